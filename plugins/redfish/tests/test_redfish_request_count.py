"""A one-node command touches only that node's system: counted at the sushy-tools emulator.

One emulator serves 50 systems; the deployment names all 50 on the same BMC (one channel,
one node per system). Each command runs in-process through the CLI and every HTTP request
the emulator received during it is counted (the emulator logs each request before handling
it, so the count is exact once the command returned).

What is counted, and why:

- *system requests*: requests whose path is under ``/redfish/v1/Systems/``. A Redfish
  state read is the channel's discovery GET of the ComputerSystem (its reset action and
  allowable values) and the GET that reads ``PowerState``: at most 2, and every one of
  them names the node's own system.
- *session setup*: every other request (the service root that ``sushy.Sushy`` reads when
  it connects; a session login and logout where the service has a SessionService, which
  the emulator has not). It is paid once per process whatever the config holds, so it is
  bounded separately (one request here).

Before targeted discovery, ``state n0`` made 52 requests (the root and all 50 systems'
discovery, then the read).
"""

from __future__ import annotations

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


def test_state_of_one_node_reads_only_its_system_in_at_most_two_requests(
    emu: SushyEmulator, config: Path
) -> None:
    code, out, requests = counted(emu, config, "state", "n0")
    assert code == 0 and out.startswith("n0: on via bmc"), out
    systems, setup = split(requests)
    assert touched(systems) == {emu.system_ids[0]}
    assert all(method == "GET" for method, _ in systems)
    assert len(systems) <= 2, requests
    assert setup == [("GET", "/redfish/v1/")], requests


def test_invoke_reboot_of_one_node_touches_only_its_system(
    emu: SushyEmulator, config: Path
) -> None:
    code, out, requests = counted(emu, config, "invoke", "n1", "reboot", "--yes",
                                  "--reason", "kernel update")
    assert code == 0 and "reboot accepted for n1" in out, out
    systems, setup = split(requests)
    assert touched(systems) == {emu.system_ids[1]}
    posts = [p for method, p in systems if method == "POST"]
    assert posts == [f"{emu.system_paths[1]}/Actions/ComputerSystem.Reset"]
    assert len(systems) <= 2, requests  # discovery GET, then the one reset POST
    assert setup == [("GET", "/redfish/v1/")], requests


def test_offers_of_one_node_discovers_its_system_and_offers_of_all_every_system(
    emu: SushyEmulator, config: Path
) -> None:
    code, _, requests = counted(emu, config, "offers", "n2", "-o", "json")
    assert code == 0
    systems, _ = split(requests)
    assert touched(systems) == {emu.system_ids[2]} and len(systems) == 1, requests
    code, _, requests = counted(emu, config, "offers", "-o", "json")
    assert code == 0
    systems, _ = split(requests)
    assert touched(systems) == set(emu.system_ids) and len(systems) == SYSTEMS, requests
