"""The PDU plugin's loopback peer, for its tests and ``powerplane demo``: a simulated APC rPDU2.

:func:`start` writes one metered 8-outlet PDU (every outlet on) for snmpsim, starts it on a
free loopback UDP port (:class:`~powerplane_pdu.testing.SnmpSim`) and returns the channel
config that reaches it; :data:`PEER` is what ``register_demo_peers`` registers. Needs the
``test`` extra (snmpsim).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from powerplane.testing import Peer, StartedPeer

__all__ = ["OUTLETS", "PEER", "PROFILE", "start"]

PROFILE = "apc-rpdu2"
"""The profile the simulated PDU is written from (metered: it reads on, not only energized)."""
OUTLETS = 8
"""How many outlets it has."""


def start(workdir: Path) -> StartedPeer:
    """Start snmpsim with one metered 8-outlet PDU; return the channel that reaches it."""
    from powerplane_pdu.profiles import PROFILES
    from powerplane_pdu.testing.simulator import SnmpSim, write_snmprec

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
        "timeouts": {"connect_s": 1, "read_s": 1},
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
                                   "(on_when_already_on: refuse)",
            "WRONG_CREDENTIALS_REJECTED": "SNMPv2c: an agent drops a request with a wrong "
                                          "community without a word, so a timeout is all a "
                                          "manager can see",
            "CLOSED_PORT_UNREACHABLE": "SNMP is UDP: the agent library reports a closed "
                                       "port as silence (ChannelTimeout)"}},
        pids=[sim.proc.pid] if sim.proc is not None else [],
    )


PEER = Peer(name="pdu", role="pdu", start=start)
"""The PDU peer of ``powerplane demo`` (plays the PDU role)."""
