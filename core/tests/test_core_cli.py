"""The CLI: JSON shapes and exit codes of CONTRACT.md, the typed confirmation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane.cli import cli

CONFIG = """\
channels:
  plant-talos:
    type: simulated
    verbs: [reboot, shutdown]
    readback: on-only
    machines: {10.0.0.11: on, 10.0.0.12: on}
  rack-a:
    type: simulated
    graceful: false
    machines: {outlet-3: on}
    manners: {sessions: 2, lockout_s: 60}
  bench-bmc:
    type: simulated
    machines: {sys-1: on}
    faults: {sys-1: refused}
nodes:
  node-1:
    site: plant-a
    channels:
      - {channel: plant-talos, target: 10.0.0.11}
      - {channel: rack-a, target: outlet-3}
  node-2:
    site: plant-a
    channels: [{channel: bench-bmc, target: sys-1}]
  node-3:
    site: plant-a
    channels: [{channel: plant-talos, target: 10.0.0.12}]
"""


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "powerplane.yaml"
    path.write_text(CONFIG)
    return str(path)


def run(config: str, *args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["--config", config, *args], input=input)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_offers_json_matches_the_contract(config: str) -> None:
    code, out = run(config, "offers", "node-1", "-o", "json")
    assert code == 0
    assert json.loads(out) == {
        "nodes": [
            {
                "node": "node-1",
                "site": "plant-a",
                "verbs": {
                    # "allowed": what the policy says of the verb's action for the
                    # caller (no policy: section, so every action)
                    "reboot": {"offered": True, "channel": "plant-talos", "graceful": True,
                               "allowed": True},
                    "shutdown": {"offered": True, "channel": "plant-talos", "graceful": True,
                                 "recovery": "channel rack-a can power on", "allowed": True},
                    "power-on": {"offered": True, "channel": "rack-a", "graceful": False,
                                 "allowed": True},
                    "terminate": {"offered": False, "cause": "rule", "reason": (
                        "terminate withheld: channel 'plant-talos' does not advertise "
                        "terminate; channel 'rack-a' does not advertise terminate"),
                                  "allowed": True},
                },
            }
        ],
        # the channels of the nodes shown: each one's type and the manners the host keeps
        # with its devices (the type's defaults under the channel's manners: key)
        "channels": [
            {"channel": "plant-talos", "type": "simulated", "manners": {
                "per_endpoint": None, "sessions": None, "min_interval_s": 0.0,
                "lockout_s": 600.0}},
            {"channel": "rack-a", "type": "simulated", "manners": {
                "per_endpoint": None, "sessions": 2, "min_interval_s": 0.0,
                "lockout_s": 60.0}},
        ],
    }


def test_offers_table_shows_the_withheld_reason(config: str) -> None:
    code, out = run(config, "offers", "node-3")
    assert code == 0
    flat = " ".join(out.split())
    assert "cannot power on" in flat and "not declared attended" in flat


def test_invoke_json_and_exit_0(config: str) -> None:
    code, out = run(config, "invoke", "node-1", "power-on", "--reason", "rack work", "-o", "json")
    assert code == 0
    assert json.loads(out) == {"node": "node-1", "verb": "power-on", "channel": "rack-a",
                               "accepted": True, "readback": None, "detail": ""}


def test_invoke_withheld_verb_is_exit_3(config: str) -> None:
    code, out = run(config, "invoke", "node-3", "shutdown", "--reason", "x", "--yes")
    assert code == 3
    assert "shutdown withheld: channel 'plant-talos' cannot power on" in out


def test_invoke_device_failure_is_exit_1(config: str) -> None:
    code, out = run(config, "invoke", "node-2", "reboot", "--reason", "x", "--yes")
    assert code == 1
    assert "refused" in out


def test_invoke_unknown_node_and_bad_verb_are_exit_2(config: str) -> None:
    assert run(config, "invoke", "node-9", "reboot", "--reason", "x", "--yes")[0] == 2
    code, out = run(config, "invoke", "node-1", "hibernate", "--reason", "x")
    assert code == 2 and "unknown verb 'hibernate'" in out
    assert run(config, "invoke", "node-1", "reboot")[0] == 2  # --reason is required


def test_destructive_invoke_asks_for_the_node_name(config: str) -> None:
    code, out = run(config, "invoke", "node-1", "reboot", "--reason", "x", input="node-2\n")
    assert code == 2 and "nothing was sent" in out
    code, out = run(config, "invoke", "node-1", "reboot", "--reason", "x", input="node-1\n")
    assert code == 0 and "reboot accepted for node-1 via channel plant-talos" in out


def test_state_json(config: str) -> None:
    code, out = run(config, "state", "node-1", "-o", "json")
    assert code == 0
    assert json.loads(out) == {
        "node": "node-1", "state": "on", "channel": "plant-talos", "detail": "",
        "readings": [{"channel": "plant-talos", "state": "on", "detail": ""},
                     {"channel": "rack-a", "state": "on", "detail": ""}],
        "disagreement": False,
    }
