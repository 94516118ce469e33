"""`powerplane demo` end to end in a subprocess: exit status, key lines, nothing left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

MARK = "POWERPLANE_DEMO_TEST_MARK"


def marked_processes(mark: str) -> list[str]:
    """Processes (other than this one) whose environment carries ``mark``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes()
            if f"{MARK}={mark}".encode() in env:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def run_demo(*args: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str], str]:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark, "COLUMNS": "160"}
    res = subprocess.run([sys.executable, "-m", "powerplane.cli", "demo", *args],
                         capture_output=True, text=True, env=env, timeout=timeout)
    return res, mark


def wait_gone(mark: str, seconds: float = 10) -> list[str]:
    deadline = time.monotonic() + seconds
    left = marked_processes(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(mark)
    return left


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_demo_runs_every_step_on_real_peers_and_cleans_up() -> None:
    res, mark = run_demo()
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    for peer in ("redfish", "talos", "pdu", "ec2", "ipmi"):
        assert f"started {peer}" in out, out
    flat = " ".join(out.split())
    assert "already played" not in flat
    # the IPMI node: its offers, a reboot through the lifecycle and its readback, a shutdown
    # observed off through the BMC, the return, and its conformance run in the matrix
    assert "│ ipmi-node │ plant-a │ ipmi (hard) │ ipmi (graceful) │ ipmi (hard) │ withheld │" \
        in flat
    assert "ipmi-node: shutdown recoverable: channel ipmi can power on" in flat
    assert "pods queue-1; power reboot via ipmi" in flat
    assert "ipmi-node: after the reboot the host reads it on (via ipmi" in flat
    assert "ipmi-node: PowerOffConfirmed=True (observed off)" in flat
    assert flat.count("ipmi-node: Complete (back in service)") == 2
    assert re.search(r"ipmi: pass \(\d+ pass, 0 fail", flat), flat
    assert re.search(r"│ ipmi │ hard ok │ graceful ok │ hard ok │ - │ pass │", flat), flat
    assert "talos-only: shutdown withheld: channel 'talos' cannot power on, and site " \
           "'plant-a' is not declared attended" in flat
    assert "ec2-repairable: terminate withheld: the node is repairable" in flat
    assert "rf-node: Complete" in flat
    assert "rf-node: PowerOffConfirmed=True" in flat
    assert "talos-attended: PowerOffConfirmed=Unknown" in flat
    assert "conformant for every advertised verb: yes" in flat
    assert "demo passed" in flat
    assert "Traceback" not in out + res.stderr
    assert wait_gone(mark) == []


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_demo_ctrl_c_stops_every_peer() -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark}
    proc = subprocess.Popen([sys.executable, "-m", "powerplane.cli", "demo"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "offers:" not in seen and time.monotonic() < deadline:  # peers are up by then
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "demo passed" not in rest
    assert wait_gone(mark) == []


def test_demo_only_ipmi_walks_the_ipmi_node_with_stand_ins_for_the_rest() -> None:
    res, mark = run_demo("--only", "ipmi")
    out = res.stdout
    flat = " ".join(out.split())
    assert res.returncode == 0, out + res.stderr
    assert "started ipmi" in out
    for peer in ("redfish", "talos", "pdu", "ec2"):
        assert f"started {peer}" not in out, out
    for slot in ("bmc", "inband", "pdu", "cloud"):
        assert f"{slot}: no peer started; core's simulated channel stands in" in flat
    assert "rf-node: shutdown recoverable: channel sim-bmc can power on" in flat
    assert "ipmi-node: after the reboot the host reads it on (via ipmi" in flat
    assert "ipmi-node: PowerOffConfirmed=True (observed off)" in flat
    assert "demo passed" in flat
    assert wait_gone(mark) == []


def test_demo_only_limits_the_peers() -> None:
    res, mark = run_demo("--only", "talos")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "started talos" in res.stdout
    assert "started redfish" not in res.stdout
    assert "bmc: no peer started; core's simulated channel stands in" in res.stdout
    assert "ipmi: no peer started; core's simulated channel stands in" in res.stdout
    assert "ipmi-node: PowerOffConfirmed=True" in " ".join(res.stdout.split())
    assert wait_gone(mark) == []


BLOCKER = '''\
"""Test-only: makes the modules named in $POWERPLANE_TEST_BLOCK impossible to import."""
import os
import sys

_BLOCKED = [n for n in os.environ.get("POWERPLANE_TEST_BLOCK", "").split(",") if n]


class _Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in _BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Block())
'''


def run_blocked(tmp_path: Path, blocked: str, *args: str) -> tuple[
        subprocess.CompletedProcess[str], str]:
    """The demo with ``blocked`` impossible to import, in it and in every child it starts."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    mark = uuid.uuid4().hex
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, MARK: mark, "POWERPLANE_TEST_BLOCK": blocked, "PYTHONPATH": path}
    res = subprocess.run([sys.executable, "-m", "powerplane.cli", "demo", *args],
                         capture_output=True, text=True, env=env, timeout=240)
    return res, mark


@pytest.mark.parametrize(("peer", "blocked", "dist", "why"), [
    # the Redfish peer imports bcrypt itself (htpasswd for the emulator)
    ("redfish", "bcrypt", "powerplane-redfish",
     "missing: the Python package 'bcrypt' (declared by powerplane-redfish[test]) "
     "cannot be imported"),
    # the EC2 peer runs moto's server as a child process, which cannot start
    ("ec2", "moto", "powerplane-cloud", "missing: moto (declared by powerplane-cloud[test])"),
])
def test_demo_fails_when_a_peer_asked_for_cannot_start(
    tmp_path: Path, peer: str, blocked: str, dist: str, why: str
) -> None:
    res, mark = run_blocked(tmp_path, blocked, "--only", peer)
    out = res.stdout
    flat = " ".join(out.split())
    assert res.returncode == 1, out + res.stderr
    assert f"not started {peer}: could not start" in flat
    assert why in flat
    # printed intact: Rich markup would have eaten "[test]"
    assert f"install it with: pip install '{dist}[test]'" in out
    assert f"not started: {peer}" in flat
    assert "demo failed" in flat and "demo passed" not in flat
    assert "Traceback" not in out + res.stderr
    assert wait_gone(mark) == []


def test_demo_unknown_only_name_is_bad_input() -> None:
    res, mark = run_demo("--only", "nope")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "unknown demo peer(s) in --only: 'nope'; the peers are: ec2, ipmi, pdu, " \
           "redfish, talos" in res.stderr
    assert "started" not in res.stdout
    assert "Traceback" not in res.stdout + res.stderr
    assert wait_gone(mark) == []


def pid_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 1:].split()[0] != "Z"


def line_after(out: str, prefix: str) -> str:
    found = [ln.strip()[len(prefix):] for ln in out.splitlines()
             if ln.strip().startswith(prefix)]
    assert len(found) == 1, out
    return found[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_demo_keep_leaves_a_truthful_config_and_one_command_that_stops_every_peer() -> None:
    res, mark = run_demo("--keep", "--only", "talos")
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    cfg = Path(line_after(out, "peers left running; config: "))
    stop = line_after(out, "stop them all: ")
    remove = line_after(out, "then remove the directory: ")
    assert stop.startswith("kill ")
    pids = [int(p) for p in stop.split()[1:]]
    try:
        assert pids, out
        assert re.search(rf"talos: pid {pids[0]}\b", out)
        assert all(pid_running(p) for p in pids), out
        # what one process did, the next one reads: rf-node is on a simulated stand-in here
        pp = [sys.executable, "-m", "powerplane.cli", "--config", str(cfg)]
        shut = subprocess.run([*pp, "invoke", "rf-node", "shutdown", "--yes",
                               "--confirm-node", "rf-node", "--reason",
                               "kept config keeps state"], capture_output=True, text=True,
                              timeout=60)
        assert shut.returncode == 0, shut.stdout + shut.stderr
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the stand-in's power change settles in 200 ms
            state = subprocess.run([*pp, "state", "rf-node", "-o", "json"],
                                   capture_output=True, text=True, timeout=60)
            assert state.returncode == 0, state.stdout + state.stderr
            seen.append(json.loads(state.stdout)["state"])
            if seen[-1] != "unknown":
                break
            time.sleep(0.1)
        assert seen[-1] == "off", seen
        assert "on" not in seen, seen
    finally:
        subprocess.run(stop, shell=True, timeout=30, check=False)
        deadline = time.monotonic() + 30
        while any(pid_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if pid_running(p)]
        subprocess.run(remove, shell=True, timeout=30, check=False)
    assert left == []
    assert not cfg.parent.exists()
    assert wait_gone(mark) == []


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_demo_keep_leaves_the_ipmi_peer_running_with_its_pids_and_state() -> None:
    res, mark = run_demo("--keep", "--only", "ipmi")
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    cfg = Path(line_after(out, "peers left running; config: "))
    stop = line_after(out, "stop them all: ")
    remove = line_after(out, "then remove the directory: ")
    pids = [int(p) for p in stop.split()[1:]]
    try:
        listed = [int(p) for p in line_after(out, "ipmi: pid ").split(", ")]
        assert listed and set(listed) <= set(pids), out
        # the kept processes are the IPMI peer's BMCs, running
        assert any("ipmi_sim" in cmdline(p) for p in listed), [cmdline(p) for p in listed]
        assert all(pid_running(p) for p in listed), out
        # the BMC keeps its machine's state across processes: a shutdown one command sends,
        # the next one reads back as off through IPMI
        pp = [sys.executable, "-m", "powerplane.cli", "--config", str(cfg)]
        shut = subprocess.run([*pp, "invoke", "ipmi-node", "shutdown", "--yes",
                               "--confirm-node", "ipmi-node", "--reason",
                               "kept demo keeps the BMC"], capture_output=True, text=True,
                              timeout=60)
        assert shut.returncode == 0, shut.stdout + shut.stderr
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # soft-off reaches off after the peer's delay
            state = subprocess.run([*pp, "state", "ipmi-node", "-o", "json"],
                                   capture_output=True, text=True, timeout=60)
            assert state.returncode == 0, state.stdout + state.stderr
            seen.append(json.loads(state.stdout)["state"])
            if seen[-1] == "off":
                break
            time.sleep(0.2)
        assert seen[-1] == "off", seen
        assert "unknown" not in seen, seen
    finally:
        subprocess.run(stop, shell=True, timeout=30, check=False)
        deadline = time.monotonic() + 30
        while any(pid_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if pid_running(p)]
        subprocess.run(remove, shell=True, timeout=30, check=False)
    assert left == []
    assert not cfg.parent.exists()
    assert wait_gone(mark) == []
