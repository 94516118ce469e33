"""The Redfish peer of ``powerplane demo``: the sushy-tools emulator on loopback.

Started with TLS (a CA generated for the run) and HTTP basic auth; the password lives in a
file the channel config references, never in the config itself. sushy-tools is part of
this distribution's ``test`` extra; without it the demo reports this peer as skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

from powerplane.testing import Peer, StartedPeer

__all__ = ["PEER"]


def start(where: Path) -> StartedPeer:
    """Start a two-system emulator in ``where`` and return the channel that reaches it."""
    from powerplane_redfish.testing.emulator import SushyEmulator

    emu = SushyEmulator(where, systems=2).start()
    secret = where / "bmc-password"
    secret.write_text(emu.password)
    os.chmod(secret, 0o600)
    config = {
        "type": "redfish",
        "endpoint": emu.endpoint,
        "username": emu.username,
        "password": {"file": str(secret)},
        "verify": str(emu.tls.ca),
        "auth": "basic",
    }
    return StartedPeer(
        config=config,
        targets=emu.system_paths,
        stop=emu.stop,
        description=f"sushy-tools emulator (fake driver) at {emu.endpoint}, TLS + basic auth",
    )


PEER = Peer(name="redfish", role="bmc", start=start)
