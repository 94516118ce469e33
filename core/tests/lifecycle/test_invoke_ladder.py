"""One ceremony ladder for ``invoke`` and ``maintenance request`` (and ``PowerHost``'s own guard).

Three ready control-plane members, quorum 2: taking one out consumes the last of the margin,
a hazard. ``maintenance request`` asks a typed hazard reason for it; so does a direct call,
through the library's guard and through ``powerplane invoke``, and the CLI asks the typed
node name wherever the ladder does (``--yes`` confirms a prompt, it is not the typed name).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from lifecycle_support import cp_deployment, make_config

from powerplane import PowerHost
from powerplane.capabilities import Verb
from powerplane.cli import cli
from powerplane.config import parse_config
from powerplane.lifecycle.guard import HazardReasonRequired

WHY = "kernel update"
HAZARD = "cp-2 and cp-3 stay up"




def pp(config: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", config, *args], input=stdin)
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def sent(tmp: Path) -> list[list[str]]:
    path = tmp / "lab.json"
    return json.loads(path.read_text())["dispatches"] if path.exists() else []


def test_the_reproduced_hazard_call_needs_the_hazard_reason_as_a_request_does(
    tmp_path: Path,
) -> None:
    config = cp_deployment(tmp_path)
    # the request path: HAZARD, needs --hazard-reason
    code, out, _ = pp(config, "maintenance", "request", "cp-1", "--intent", "reboot",
                      "--reason", WHY, "--dry-run", "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["hazard"] is True
    assert "--hazard-reason" in [step["flag"] for step in doc["ceremony"]]
    # the reproduced call: accepted before; now the hazard tier is asked, nothing sent
    code, _, err = pp(config, "invoke", "cp-1", "reboot", "--reason", WHY, "--yes",
                      "--confirm-node", "cp-1")
    assert code == 2, err
    assert "HazardReasonRequired" in err and "--hazard-reason" in err
    assert "3 control-plane members, 3 ready, quorum 2, margin 1" in err
    # a hazard reason the reason policy refuses is no hazard reason
    code, _, err = pp(config, "invoke", "cp-1", "reboot", "--reason", WHY, "--yes",
                      "--confirm-node", "cp-1", "--hazard-reason", "ok")
    assert code == 2 and "at least 8 characters" in err
    assert sent(tmp_path) == []
    # the whole ladder: sent once
    code, _, err = pp(config, "invoke", "cp-1", "reboot", "--reason", WHY, "--yes",
                      "--confirm-node", "cp-1", "--hazard-reason", HAZARD)
    assert code == 0, err
    assert sent(tmp_path) == [["reboot", "m1"]]


def test_yes_does_not_replace_the_typed_node_name_under_a_lifecycle(tmp_path: Path) -> None:
    config = cp_deployment(tmp_path)
    code, _, err = pp(config, "invoke", "w-1", "shutdown", "--reason", WHY, "--yes")
    assert code == 2
    assert "--confirm-node w-1" in err and "does not replace" in err
    # a wrong typed name says so
    code, _, err = pp(config, "invoke", "w-1", "shutdown", "--reason", WHY, "--yes",
                      "--confirm-node", "w-2")
    assert code == 2 and "did not match" in err
    # no --yes and no terminal: the typed name comes on stdin, and must match
    code, _, err = pp(config, "invoke", "w-1", "shutdown", "--reason", WHY, stdin="w-2\n")
    assert code == 2 and "did not match" in err
    assert sent(tmp_path) == []
    code, _, err = pp(config, "invoke", "w-1", "shutdown", "--reason", WHY,
                      "--confirm-node", "w-1")
    assert code == 0, err
    assert sent(tmp_path) == [["shutdown", "m4"]]
    # power-on is not on the ladder: nothing to type, but a typed name given must match
    code, _, err = pp(config, "invoke", "w-1", "power-on", "--reason", WHY,
                      "--confirm-node", "cp-1")
    assert code == 2 and "did not match" in err
    code, _, err = pp(config, "invoke", "w-1", "power-on", "--reason", WHY)
    assert code == 0, err


def test_several_nodes_each_need_their_typed_name(tmp_path: Path) -> None:
    config = cp_deployment(tmp_path)
    code, _, err = pp(config, "invoke", "w-1", "cp-1", "reboot", "--reason", WHY, "--yes",
                      "--hazard-reason", HAZARD, "--confirm-node", "w-1")
    assert code == 2 and "--confirm-node cp-1" in err
    assert sent(tmp_path) == []
    code, _, err = pp(config, "invoke", "w-1", "cp-1", "reboot", "--reason", WHY, "--yes",
                        "--hazard-reason", HAZARD, "--confirm-node", "w-1",
                        "--confirm-node", "cp-1", "-o", "json")
    assert code == 0, err
    assert sorted(d[1] for d in sent(tmp_path)) == ["m1", "m4"]


def test_without_a_lifecycle_yes_still_confirms_as_documented(tmp_path: Path) -> None:
    cfg = yaml.safe_load(Path(cp_deployment(tmp_path)).read_text())
    del cfg["lifecycle"]
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, _, err = pp(str(path), "invoke", "cp-1", "reboot", "--reason", WHY, "--yes")
    assert code == 0, err
    # a typed name given anyway must match
    code, _, err = pp(str(path), "invoke", "cp-2", "reboot", "--reason", WHY,
                      "--confirm-node", "cp-3")
    assert code == 2 and "did not match" in err
    assert sent(tmp_path) == [["reboot", "m1"]]


@pytest.mark.parametrize("via", ["invoke", "invoke_many", "plan"])
async def test_the_library_guard_refuses_a_hazard_without_its_reason(
    tmp_path: Path, via: str
) -> None:
    deployment_ = parse_config(make_config(tmp_path))
    async with PowerHost(deployment_) as host:  # the guard comes with the host
        if via == "invoke":
            with pytest.raises(HazardReasonRequired) as caught:
                await host.invoke("cp1", Verb.REBOOT, reason="replace the PSU in slot 2")
            assert caught.value.exit_code == 2
        elif via == "invoke_many":
            out = await host.invoke_many(["cp1"], Verb.REBOOT, "replace the PSU in slot 2")
            assert isinstance(out["cp1"], HazardReasonRequired)
        else:
            plans = await host.plan(["cp1", "w1"], Verb.SHUTDOWN, "replace the PSU in slot 2")
            assert isinstance(plans["cp1"], HazardReasonRequired)
            assert not isinstance(plans["w1"], Exception)  # a worker is no hazard
        assert host.channel("lab").dispatches == []
        result = await host.invoke("cp1", Verb.REBOOT, reason="replace the PSU in slot 2",
                                   hazard_reason="planned window CHG-1234")
        assert result.accepted
        assert host.channel("lab").dispatches == [("reboot", "cp1")]


def _until(fd: int, text: bytes, seen: bytearray, timeout_s: float = 60) -> None:
    """Read the terminal until ``text`` appears (an explicit bound on the wait)."""
    deadline = time.monotonic() + timeout_s
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} never appeared in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:  # the child closed the terminal
                assert text in seen, bytes(seen)


def test_at_a_terminal_the_hazard_reason_and_the_name_are_asked(tmp_path: Path) -> None:
    config = cp_deployment(tmp_path)
    parent, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerplane.cli", "--config", config, "invoke", "cp-1",
         "reboot", "--reason", WHY], stdin=child, stdout=child, stderr=child,
        env={**os.environ, "NO_COLOR": "1"})
    os.close(child)
    seen = bytearray()
    try:
        _until(parent, b"type the reason for consuming the last of the quorum margin", seen)
        assert b"HAZARD: reboot of cp-1 consumes the last of the quorum margin" in seen
        os.write(parent, HAZARD.encode() + b"\r")
        _until(parent, b"type the node name to confirm", seen)
        os.write(parent, b"cp-1\r")
        _until(parent, b"reboot accepted for cp-1", seen)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(parent)
    assert sent(tmp_path) == [["reboot", "m1"]]
