"""Fixtures for the PDU plugin's tests: one snmpsim for the session, secrets in files.

Each test owns its simulated PDU: a data file (community / v3 context) that no other
test writes to, so tests stay independent while sharing one snmpsim process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pdu_peers import AUTH_KEY, PRIV_KEY, SnmpSim, write_snmprec

from powerplane_pdu import PROFILES, PduChannel, PduChannelConfig
from powerplane_pdu.testing.mib_walks import MIB, apc_walks, aten_pe16_walk, mib_walk
from powerplane_redfish.testing.dmtf import mockups_dir

PUBLIC_PDU = mockups_dir() / "public-pdu"


FOUR = {1: "on", 2: "on", 3: "off", 4: "off"}

# community -> (profile, outlets, sysObjectID override)
DEVICES: dict[str, tuple[str, dict[int, str], str | None]] = {
    **{f"p-{name}": (name, FOUR, None) for name in PROFILES},
    **{f"auto-{name}": (name, FOUR, None) for name in PROFILES
       if PROFILES[name].sys_object_id},
    "unknown-sysoid": ("apc-rpdu", FOUR, "1.3.6.1.4.1.99999.7"),
    "v3-apc": ("apc-rpdu", FOUR, None),
    "v1-apc": ("apc-rpdu", FOUR, None),
    "feed-a": ("apc-rpdu2", FOUR, None),
    "feed-b": ("apc-rpdu2", FOUR, None),
    "feed-a2": ("apc-rpdu2", FOUR, None),
    "offers": ("apc-rpdu", FOUR, None),
    "offers-cycle": ("apc-rpdu", FOUR, None),
    "policy": ("apc-rpdu", FOUR, None),
    "readback": ("apc-rpdu2", FOUR, None),
    "batch": ("apc-rpdu2", dict.fromkeys(range(1, 9), "on"), None),
    "faulty": ("eaton-epdu", FOUR, None),
    "conformance": ("apc-rpdu2", FOUR, None),
    "engine": ("apc-rpdu2", FOUR, None),
    "already-ms": ("apc-masterswitch", FOUR, None),
    "already-rpdu2": ("apc-rpdu2", FOUR, None),
}
FAULTY = {"faulty": frozenset({2})}

RECORDED: dict[str, list[str]] = {
    "rec-aten-pe16": aten_pe16_walk(),
    **apc_walks(),
    **{f"mib-{name}": mib_walk(m, "1.3.6.1.4.1.99999.1", FOUR) for name, m in MIB.items()},
    "mib-cyberpower-gate": mib_walk(MIB["cyberpower"], "1.3.6.1.4.1.3808", FOUR),
}
"""Walks written from the vendors' MIBs (powerplane_pdu.testing.mib_walks), not from the
profiles."""
"""Devices whose listed outlets fail every SET (genErr), as a PDU with a stuck relay might."""
ALREADY = {"already-ms": "genErr", "already-rpdu2": "inconsistentValue"}
"""Devices that answer a SET switching an outlet into the state it is in with this error
status (test_pdu_already.py)."""


@pytest.fixture(scope="session")
def snmpsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SnmpSim]:
    """One snmpsim process serving every test's simulated PDU."""
    work = tmp_path_factory.mktemp("snmpsim")
    data = work / "data"
    data.mkdir()
    for community, (profile, outlets, sys_oid) in DEVICES.items():
        write_snmprec(data, community, PROFILES[profile], outlets, sys_oid,
                      FAULTY.get(community, frozenset()), ALREADY.get(community))
    for community, lines in RECORDED.items():
        (data / f"{community}.snmprec").write_text("\n".join(lines) + "\n")
    sim = SnmpSim(data, work, AUTH_KEY, PRIV_KEY)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def secret(tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """``secret(value)`` -> a ``{file: PATH}`` reference holding ``value``."""
    count = iter(range(1000))

    def make(value: str) -> dict[str, str]:
        path = tmp_path / f"secret-{next(count)}"
        path.write_text(value + "\n")
        return {"file": str(path)}

    return make


@pytest.fixture
def snmp_config(
    snmpsim: SnmpSim, secret: Callable[[str], dict[str, str]]
) -> Callable[..., dict[str, Any]]:
    """``snmp_config(device, profile=..., **keys)``: a v2c pdu channel config dict."""

    def make(device: str, profile: str | None = None, **keys: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "protocol": "snmp",
            "profile": profile or DEVICES[device][0],
            "host": "127.0.0.1",
            "port": snmpsim.port,
            "community": secret(device),
            "timeouts": {"connect_s": 0.5, "read_s": 0.5},
            "retries": 0,
            "reboot_delay_s": 0,
        }
        cfg.update(keys)
        return cfg

    return make


@pytest.fixture
async def channel_for() -> AsyncIterator[Callable[..., PduChannel]]:
    """``channel_for(config_dict)``: a PduChannel named ``rack``; closed after the test."""
    made: list[PduChannel] = []

    def make(cfg: dict[str, Any], name: str = "rack") -> PduChannel:
        channel = PduChannel(name, PduChannelConfig.model_validate(cfg))
        made.append(channel)
        return channel

    yield make
    for ch in made:
        await ch.close()


@pytest.fixture
def public_pdu() -> Path:
    """DMTF's public-pdu mockup (shipped with powerplane-redfish's test data)."""
    return PUBLIC_PDU
