"""``powerplane maintenance`` discovers only the nodes it acts on.

A deployment of 50 workers beside three control-plane members, all on one simulated
channel; every ``capabilities`` call is counted at the channel. ``request NODE`` (and its
``--dry-run``) discovers NODE's target only, ``return``/``abandon`` discover nothing, and
``run`` discovers, pass by pass, the nodes under maintenance —
the quorum's members are read through their channels, never discovered up front.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from lifecycle_support import make_config

from powerplane.capabilities import CapabilitySet
from powerplane.cli import cli
from powerplane.sim.channel import SimulatedChannel

WORKERS = tuple(f"w{i}" for i in range(50))


@pytest.fixture
def discovered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The targets ``capabilities`` was asked for, in order."""
    seen: list[str] = []
    real = SimulatedChannel.capabilities

    async def counted(self: SimulatedChannel, target: str) -> CapabilitySet:
        seen.append(target)
        return await real(self, target)

    monkeypatch.setattr(SimulatedChannel, "capabilities", counted)
    yield seen


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(make_config(tmp_path, workers=WORKERS)), encoding="utf-8")
    return path


def pp(config: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--config", str(config), "maintenance", *args])
    assert "Traceback" not in result.output, result.output
    return result


def request(node: str, *extra: str) -> tuple[str, ...]:
    return ("request", node, "--intent", "reboot", "--reason", "kernel 6.8 rollout",
            "--confirm-node", node, "--ack-preflight", "-o", "json", *extra)


def test_request_and_its_dry_run_discover_only_that_node(
    config: Path, discovered: list[str]
) -> None:
    res = pp(config, *request("w7", "--dry-run"))
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["preflight"]["power"]["offered"] is True
    assert discovered == ["w7"]
    discovered.clear()
    res = pp(config, *request("w7"))
    assert res.exit_code == 0, res.output
    assert discovered == ["w7"]


def test_an_unknown_node_is_still_bad_input(config: Path, discovered: list[str]) -> None:
    res = pp(config, *request("nope"))
    assert res.exit_code == 2
    assert "nope" in res.output
    assert discovered == []


def test_run_discovers_the_nodes_under_maintenance_only(
    config: Path, discovered: list[str]
) -> None:
    assert pp(config, *request("w3")).exit_code == 0
    discovered.clear()
    res = pp(config, "run", "--until-idle")
    assert res.exit_code == 0, res.output
    assert "w3: Drained -> Rebooting" in res.output
    assert discovered == ["w3"]
    status = json.loads(pp(config, "status", "w3", "-o", "json").output)
    assert (status["phase"], status["dispatches"]) == ("Complete", 1)


def test_return_and_abandon_discover_nothing(config: Path, discovered: list[str]) -> None:
    shutdown = ("request", "w5", "--intent", "cordon", "--reason", "rack move",
                "--confirm-node", "w5", "--ack-preflight")
    assert pp(config, *shutdown).exit_code == 0
    discovered.clear()
    res = pp(config, "abandon", "w5", "--reason", "window moved")
    assert res.exit_code == 0, res.output
    assert discovered == []
