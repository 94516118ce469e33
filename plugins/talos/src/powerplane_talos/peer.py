"""The Talos loopback peer, for tests, benchmarks and ``powerplane demo``: the Talos mock.

The mock (:mod:`powerplane_talos.testing`, built from Talos's own ``machine.proto``) runs
as its own process (``python -m powerplane_talos.testing``) on a free loopback port, writes
its PKI and a matching talosconfig into the directory it is given, and is stopped by its
own process handle (:class:`powerplane.testing.Subprocess`). A machine it has shut down
stays dark until "a person at the rack" powers it on through the mock's control hook.

The demo's channel config is the inline form (``endpoint`` and ``ca``/``crt``/``key`` as
``{file:}`` references to the PEMs the mock wrote, the key mode 0600): it declares the
address and the secrets, so the conformance suite's network negatives and secret checks
run against it with no hints.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from powerplane.testing import Peer, StartedPeer, Subprocess, wait_ready
from powerplane_talos.testing import pki
from powerplane_talos.testing.control import MockControl

__all__ = ["NODES", "PEER", "RunningMock", "start", "start_mock"]

NODES = ["talos-node-1", "talos-node-2", "talos-node-3"]
"""The demo's node addresses (the mock answers for any)."""


@dataclass
class RunningMock:
    """A running Talos mock: where it listens, its control hook, its files, its process."""

    algorithm: str
    """``ed25519`` or ``ecdsa``: the keys of its PKI."""
    port: int
    """Its gRPC port on 127.0.0.1."""
    control: MockControl
    """The client of its control hook (power on, faults, what it received)."""
    talosconfig: Path
    """A talosconfig (context ``mock``) with its CA and the ``os:admin`` client."""
    certs: Path
    """The directory of its PKI (``talos-ca``, ``server``, ``admin``, ``reader``)."""
    proc: Subprocess
    """Its process; :meth:`stop` stops it."""

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<port>``, as a talosconfig writes it."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the mock by its own handle (terminate, wait, kill)."""
        self.proc.stop(10)


def start_mock(
    directory: Path, algorithm: str = "ed25519", reboot_seconds: float = 0.3,
    timeout: float = 60.0,
) -> RunningMock:
    """Start a mock in ``directory``; wait until it has written ``mock.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    ready = directory / "mock.json"
    proc = Subprocess(
        [sys.executable, "-m", "powerplane_talos.testing", "--port", "0", "--certs",
         str(directory), "--algorithm", algorithm, "--reboot-seconds", str(reboot_seconds)],
        log=directory / "mock.log",
    )
    wait_ready(ready.exists, timeout, "the Talos mock", proc)
    info = json.loads(ready.read_text(encoding="utf-8"))
    return RunningMock(algorithm, int(info["port"]), MockControl(int(info["control_port"])),
                       Path(info["talosconfig"]), directory, proc)


def start(where: Path) -> StartedPeer:
    """Start the demo's mock in ``where`` (reboots take half a second)."""
    mock = start_mock(where, "ed25519", reboot_seconds=0.5, timeout=30)
    ca, admin = pki.load(mock.certs, "ca"), pki.load(mock.certs, "admin")
    return StartedPeer(
        config={"type": "talos", "endpoint": mock.endpoint,
                "ca": {"file": str(ca.files.cert)}, "crt": {"file": str(admin.files.cert)},
                "key": {"file": str(admin.files.key)},
                "timeouts": {"connect_s": 5, "read_s": 5}},
        targets=list(NODES),
        stop=mock.stop,
        description=f"Talos mock (grpclib, Ed25519 mutual TLS) at {mock.endpoint}",
        power_on_by_hand=lambda node: mock.control.power_on(str(node)),
        conformance={"xfail": {"UNKNOWN_TARGET_ERROR": "the mock answers for any address"}},
        pids=[mock.proc.pid],
    )


PEER = Peer(name="talos", role="inband", start=start)
"""What :func:`~powerplane_talos.plugin.register_demo_peers` offers ``powerplane demo``."""
