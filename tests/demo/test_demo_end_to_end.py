"""`powerplane demo` end to end in a subprocess: exit status, key lines, nothing left behind."""

from __future__ import annotations

import os
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
    for peer in ("redfish", "talos", "pdu", "ec2"):
        assert f"started {peer}" in out, out
    flat = " ".join(out.split())
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


def test_demo_only_limits_the_peers() -> None:
    res, mark = run_demo("--only", "talos")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "started talos" in res.stdout
    assert "started redfish" not in res.stdout
    assert "bmc: no peer started; core's simulated channel stands in" in res.stdout
    assert wait_gone(mark) == []
