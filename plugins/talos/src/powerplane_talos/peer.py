"""The Talos peer of ``powerplane demo``: the Talos mock on loopback (Ed25519 mutual TLS).

The mock runs as its own process (``python -m powerplane_talos.mock``), writes its PKI and a
matching talosconfig into the demo's directory, and is stopped by its process handle. A
machine it has shut down stays dark until "a person at the rack" powers it on through the
mock's control hook.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from powerplane.testing import Peer, StartedPeer

__all__ = ["PEER"]

NODES = ["talos-node-1", "talos-node-2", "talos-node-3"]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def start(where: Path) -> StartedPeer:
    """Start the mock in ``where``; wait until it reports its ports."""
    from powerplane_talos.mock.control import MockControl

    log = (where / "mock.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerplane_talos.mock", "--port", "0", "--certs", str(where),
         "--reboot-seconds", "0.5"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    ready = where / "mock.json"
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError(f"the Talos mock did not start (see {where / 'mock.log'})")
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    control = MockControl(info["control_port"])
    return StartedPeer(
        config={"type": "talos", "talosconfig": info["talosconfig"], "timeout_s": 5},
        targets=list(NODES),
        stop=lambda: _stop(proc),
        description=f"Talos mock (grpclib, Ed25519 mutual TLS) at 127.0.0.1:{info['port']}",
        power_on_by_hand=lambda node: control.power_on(str(node)),
        conformance={"xfail": {"UNKNOWN_TARGET_ERROR": "the mock answers for any address"}},
    )


PEER = Peer(name="talos", role="inband", start=start)
