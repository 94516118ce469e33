"""Stopping the peers never holds the demo: every peer's own stop starts at once, and a
peer whose processes are not gone within the short grace (``STOP_GRACE_S``) has them
killed (what Ctrl-C needs: the demo exits within a second of the signal).

The peer is a real process that ignores SIGTERM, stopped by its own handle
(``Subprocess.stop(30)``: terminate, wait up to 30 s, then kill). Every wait has an
explicit timeout; nothing is timed.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path

from rich.console import Console

from powerplane.testing import StartedPeer
from powerplane.testing.process import Subprocess
from powerplane_demo import Demo

WAIT_S = 10.0
"""The bound on the stop: well under the 30 s the stubborn peer's own stop would wait."""

IGNORES_TERM = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\n"
                "time.sleep(600)\n")


def _stubborn(where: Path, name: str) -> tuple[Subprocess, StartedPeer]:
    proc = Subprocess([sys.executable, "-c", IGNORES_TERM], cwd=where,
                      log=where / f"{name}.log")
    peer = StartedPeer(config={"type": "simulated"}, targets=["a", "b"],
                       stop=lambda: proc.stop(30), description=f"{name}: ignores SIGTERM",
                       pids=[proc.pid])
    deadline = time.monotonic() + WAIT_S  # SIGTERM is ignored from here on
    while "ready" not in proc.log_tail():
        assert proc.returncode is None and time.monotonic() < deadline, proc.log_tail()
        time.sleep(0.02)
    return proc, peer


def _gone(proc: Subprocess) -> bool:
    deadline = time.monotonic() + WAIT_S
    while proc.returncode is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc.returncode is not None


def test_a_peer_that_ignores_terminate_is_killed_after_the_grace(tmp_path: Path) -> None:
    out = io.StringIO()
    demo = Demo(Console(file=out, width=120), workdir=tmp_path)
    stubborn = [_stubborn(tmp_path, f"peer{i}") for i in range(2)]
    for i, (_, peer) in enumerate(stubborn):
        demo.started[f"slot{i}"] = (f"peer{i}", peer)
    stopper = threading.Thread(target=demo.stop_peers, daemon=True)
    stopper.start()
    stopper.join(WAIT_S)
    assert not stopper.is_alive(), "stop_peers waited out a peer's own 30 s stop"
    for proc, _ in stubborn:
        assert _gone(proc), "a peer's process outlived the demo's stop"
        assert proc.returncode == -9  # killed: it ignores SIGTERM
    assert "could not stop" not in out.getvalue()
    assert demo.started == {}
