"""A one-node command touches only that node's system: counted at the sushy-tools emulator.

One emulator serves 50 systems; the deployment names all 50 on the same BMC (one channel,
one node per system, basic authentication). Each command runs through the CLI and every
HTTP request the emulator received during it is counted (the emulator logs each request
before handling it, so the count is exact once the command returned).

A Redfish state read is 2 requests in all, both of the node's own system: the channel's
discovery GET of the ComputerSystem (its reset action and allowable values), then the GET
that reads ``PowerState`` (a fresh read: the state never comes from the discovery body).
Nothing else: with basic authentication there is no session to log in or out, and a named
system is read by its path, so the service root is not read. A reboot is the discovery GET
and the one reset POST.

Before targeted discovery, ``state n0`` made 52 requests (the root and all 50 systems'
discovery, then the read); before the direct client, 3 (sushy reads the service root when
it connects). A one-shot command with basic authentication imports neither sushy nor
requests (checked in a fresh process).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from powerplane.cli import cli
from powerplane_redfish.testing.emulator import SushyEmulator

SYSTEMS = 50
PASSWORD_ENV = "PP_TEST_COUNT_PASSWORD"
SYSTEMS_PREFIX = "/redfish/v1/Systems/"


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SushyEmulator]:
    """A zero-delay emulator serving 50 systems (its own: the session one serves fewer)."""
    with SushyEmulator(tmp_path_factory.mktemp("count-emulator"), systems=SYSTEMS) as server:
        yield server


@pytest.fixture
def config(emu: SushyEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """50 nodes ``n0``..``n49``, one per system, all on the one channel ``bmc``."""
    monkeypatch.setenv(PASSWORD_ENV, emu.password)
    cfg: dict[str, Any] = {
        "channels": {"bmc": {
            "type": "redfish", "endpoint": emu.endpoint, "username": emu.username,
            "password": {"env": PASSWORD_ENV}, "verify": str(emu.tls.ca), "auth": "basic",
            "timeouts": {"connect_s": 5, "read_s": 10},
        }},
        "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": path}]}
                  for i, path in enumerate(emu.system_paths)},
    }
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def counted(emu: SushyEmulator, config: Path, *args: str) -> tuple[int, str,
                                                                   list[tuple[str, str]]]:
    """Run one CLI command; its exit code, stdout and the requests the emulator received."""
    emu.reset_count()
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, emu.requests()


def split(requests: list[tuple[str, str]]) -> tuple[list[tuple[str, str]],
                                                    list[tuple[str, str]]]:
    """(system requests, session setup requests)."""
    systems = [r for r in requests if r[1].startswith(SYSTEMS_PREFIX)]
    return systems, [r for r in requests if not r[1].startswith(SYSTEMS_PREFIX)]


def touched(requests: list[tuple[str, str]]) -> set[str]:
    """The system ids the requests name."""
    return {p[len(SYSTEMS_PREFIX):].split("/")[0] for _, p in requests}


@pytest.mark.perf
def test_state_of_one_node_reads_only_its_system_in_at_most_two_requests(
    emu: SushyEmulator, config: Path
) -> None:
    code, out, requests = counted(emu, config, "state", "n0")
    assert code == 0 and out.startswith("n0: on via bmc"), out
    # discovery, then the fresh read of PowerState; no service root, no session
    assert requests == [("GET", emu.system_paths[0])] * 2, requests


@pytest.mark.perf
def test_invoke_reboot_of_one_node_touches_only_its_system(
    emu: SushyEmulator, config: Path
) -> None:
    code, out, requests = counted(emu, config, "invoke", "n1", "reboot", "--yes",
                                  "--reason", "kernel update")
    assert code == 0 and "reboot accepted for n1" in out, out
    # the discovery GET, then the one reset POST; no service root, no session
    assert requests == [("GET", emu.system_paths[1]),
                        ("POST", f"{emu.system_paths[1]}/Actions/ComputerSystem.Reset")], requests


@pytest.mark.perf
def test_offers_of_one_node_discovers_its_system_and_offers_of_all_every_system(
    emu: SushyEmulator, config: Path
) -> None:
    code, _, requests = counted(emu, config, "offers", "n2", "-o", "json")
    assert code == 0
    systems, _ = split(requests)
    assert requests == [("GET", emu.system_paths[2])], requests  # its system, once
    code, _, requests = counted(emu, config, "offers", "-o", "json")
    assert code == 0
    systems, _ = split(requests)
    assert touched(systems) == set(emu.system_ids) and len(systems) == SYSTEMS, requests


_IMPORTS = """
import sys
from powerplane.cli import cli
try:
    cli.main(sys.argv[1:], standalone_mode=False)
finally:
    print(sorted({m.split('.')[0] for m in sys.modules} & {'sushy', 'requests', 'urllib3'}))
"""


@pytest.mark.perf
@pytest.mark.parametrize("command", [["state", "n3"],
                                     ["invoke", "n4", "power-on", "--yes", "--reason", "test"]])
def test_a_one_shot_command_with_basic_auth_imports_neither_sushy_nor_requests(
    emu: SushyEmulator, config: Path, command: list[str]
) -> None:
    proc = subprocess.run([sys.executable, "-c", _IMPORTS, "--config", str(config), *command],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout
