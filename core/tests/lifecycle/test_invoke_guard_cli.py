"""No direct call bypasses the guard: ``powerplane invoke`` under a ``lifecycle:`` section."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from lifecycle_support import cp_deployment

from powerplane.cli import cli


def pp(config: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", config, *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def dispatches(tmp: Path) -> list[list[str]]:
    path = tmp / "lab.json"
    return json.loads(path.read_text())["dispatches"] if path.exists() else []


def test_invoke_cannot_take_a_second_control_plane_node_down(tmp_path: Path) -> None:
    config = cp_deployment(tmp_path)
    code, _, err = pp(config, "maintenance", "request", "cp-1", "--intent", "shutdown",
                      "--reason", "replace the PSU", "--confirm-node", "cp-1", "--ack-preflight",
                      "--hazard-reason", "cp-2 and cp-3 stay up")
    assert code == 0, err
    code, _, err = pp(config, "maintenance", "run", "--until-idle")
    assert code == 0, err
    assert pp(config, "maintenance", "status", "cp-1", "-o", "json")[1].count("PoweredOff")
    sent_before = dispatches(tmp_path)

    # the reproduced call: a one-character reason fails the reason policy (bad input)
    code, _, err = pp(config, "invoke", "cp-2", "reboot", "--yes", "--reason", "x")
    assert code == 2 and "reason" in err
    # a good reason: refused below quorum, with members, quorum and margin
    code, _, err = pp(config, "invoke", "cp-2", "reboot", "--yes", "--reason", "kernel update")
    assert code == 3
    assert "3 control-plane members" in err and "quorum 2" in err and "margin" in err
    # a node under maintenance is refused too, naming it
    code, _, err = pp(config, "invoke", "cp-1", "reboot", "--yes", "--reason", "kernel update")
    assert code == 3 and "maintenance" in err
    # the dry run says what the guard says, and sends nothing either
    code, out, _ = pp(config, "invoke", "cp-2", "reboot", "--dry-run", "--reason",
                      "kernel update", "-o", "json")
    assert code == 3 and json.loads(out)["sent"] is False
    assert dispatches(tmp_path) == sent_before  # nothing reached the channel

    # a worker is not a member: allowed (the ladder still asks its typed name: --yes does
    # not replace it), and power-on is never restricted
    code, _, err = pp(config, "invoke", "w-1", "reboot", "--yes", "--reason", "kernel update")
    assert code == 2 and "--confirm-node w-1" in err
    assert dispatches(tmp_path) == sent_before
    code, _, err = pp(config, "invoke", "w-1", "reboot", "--yes", "--reason", "kernel update",
                      "--confirm-node", "w-1")
    assert code == 0, err
    assert dispatches(tmp_path)[-1] == ["reboot", "m4"]


def test_invoke_many_counts_the_nodes_of_one_call_together(tmp_path: Path) -> None:
    config = cp_deployment(tmp_path)
    # the first member consumes the last of the margin: its hazard reason is given
    code, out, _ = pp(config, "invoke", "--selector", "node-role.kubernetes.io/control-plane=",
                      "reboot", "--yes", "--reason", "kernel update", "-o", "json",
                      "--confirm-node", "cp-1", "--confirm-node", "cp-2",
                      "--confirm-node", "cp-3", "--hazard-reason", "cp-2 and cp-3 stay up")
    assert code == 3
    rows = {r["node"]: r for r in json.loads(out)["nodes"]}
    allowed = [n for n, r in rows.items() if "error" not in r]
    assert len(allowed) == 1  # 3 members, quorum 2: one may go at a time
    assert sorted(d[1] for d in dispatches(tmp_path)) == ["m" + allowed[0][-1]]
