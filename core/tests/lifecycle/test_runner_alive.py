"""``runner_alive``: whether the runner that recorded a dispatch still lives.

A runner that exited but is not yet reaped by its parent (a zombie) still answers
``kill(pid, 0)``; it runs nothing, so it is dead: the dispatcher must not wait out the
in-flight grace for it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from powerplane.lifecycle.dispatch import runner_alive


def _runner(pid: int) -> str:
    return f"{socket.gethostname()}/{pid}/x"


def test_a_live_process_is_alive_and_a_reaped_one_is_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert runner_alive(_runner(child.pid)) is True
    finally:
        child.kill()
        child.wait(timeout=10)
    assert runner_alive(_runner(child.pid)) is False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")
def test_an_exited_but_unreaped_runner_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        # Not reaped: wait until the kernel shows it a zombie, without wait().
        while time.monotonic() < deadline:
            with open(f"/proc/{child.pid}/stat", "rb") as f:
                stat = f.read()
            if stat[stat.rfind(b")") + 2:][:1] == b"Z":
                break
            time.sleep(0.01)
        else:
            pytest.fail("the child never exited")
        os.kill(child.pid, 0)  # still answers: the case the check exists for
        assert runner_alive(_runner(child.pid)) is False
    finally:
        child.wait(timeout=10)


def test_another_hosts_runner_cannot_be_told() -> None:
    assert runner_alive(f"not-{socket.gethostname()}/1/x") is None
    assert runner_alive("garbage") is None
