"""The PDU's peer for ``powerplane demo``: a simulated APC rPDU2 (snmpsim) on loopback."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from powerplane.testing import StartedPeer

__all__ = ["start_demo_pdu"]

PROFILE = "apc-rpdu2"
OUTLETS = 8


def start_demo_pdu(workdir: Path) -> StartedPeer:
    """Start snmpsim with one metered 8-outlet PDU; return the channel that reaches it."""
    from powerplane.testing import StartedPeer
    from powerplane_pdu.profiles import PROFILES
    from powerplane_pdu.simulator import SnmpSim, write_snmprec

    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    community = f"demo-{secrets.token_hex(4)}"
    write_snmprec(data, community, PROFILES[PROFILE], dict.fromkeys(range(1, OUTLETS + 1), "on"))
    secret = workdir / "community"
    secret.write_text(community + "\n", encoding="utf-8")
    secret.chmod(0o600)
    sim = SnmpSim(data, workdir, secrets.token_hex(8), secrets.token_hex(8))
    sim.start()
    config = {
        "type": "pdu",
        "protocol": "snmp",
        "profile": PROFILE,
        "host": "127.0.0.1",
        "port": sim.port,
        "community": {"file": str(secret)},
        "timeout_s": 1,
        "retries": 1,
        "reboot_delay_s": 0.2,
    }
    return StartedPeer(
        config=config,
        targets=[{"outlets": [1, 2]}, {"outlets": [3]}, {"outlets": [4]}],
        stop=sim.stop,
        description=f"snmpsim: {PROFILE} PDU, {OUTLETS} metered outlets, "
        f"udp 127.0.0.1:{sim.port}",
        conformance={"xfail": {
            "POWER_ON_IDEMPOTENT": "refuses power-on of outlets already on, by design "
                                   "(on_when_already_on: refuse)"}},
    )
