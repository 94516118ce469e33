"""The profiles against their vendors' MIBs: index layout, status values and write values.

Expected OIDs and values come from ``mib_walks.MIB`` (written from the MIB text) and the
walks built from it, never from ``powerplane_pdu.profiles``; each write is checked by
reading the device's own objects with a plain SNMP GET, so a write that landed on the
wrong outlet shows. Also: the ATEN PE's irregular outlet arcs, readback after a write
that the PDU did not apply, ``profile: auto`` on real APC product identifiers, the
Vertiv/Geist outlet range and status values, and the withdrawn Teltronix profile (no MIB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pdu_peers import AUTH_KEY, PRIV_KEY, SnmpSim
from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData,
    ContextData,
    ObjectIdentity,
    ObjectType,
    SnmpEngine,
    UdpTransportTarget,
    get_cmd,
    set_cmd,
)
from pysnmp.proto.rfc1902 import Integer32

from powerplane import ChannelTimeout, ConfigError, OutcomeUnknown, PowerState, parse_config
from powerplane_pdu import PROFILES, PduChannel, detect, parse_target
from powerplane_pdu.profiles import WITHDRAWN, get_profile
from powerplane_pdu.testing.mib_walks import (
    ATEN_ARC,
    ATEN_OUTLET,
    MIB,
    SPDU_CTL,
    VERTIV_STATES,
    VERTIV_SWITCH,
)


async def snmp(sim: SnmpSim, community: str, oids: list[str],
               value: int | None = None) -> list[int | None]:
    """A plain GET (or SET of ``value``) to the simulated device; None for no such object."""
    engine = SnmpEngine()
    try:
        target = await UdpTransportTarget.create(("127.0.0.1", sim.port), 1.0, 0)
        binds = [ObjectType(ObjectIdentity(o)) if value is None
                 else ObjectType(ObjectIdentity(o), Integer32(value)) for o in oids]
        command = get_cmd if value is None else set_cmd
        err, status, _, out = await command(engine, CommunityData(community), target,
                                            ContextData(), *binds, lookupMib=False)
        assert err is None and not status, (err, status)
        result: list[int | None] = []
        for _, v in out:
            try:
                result.append(int(v))
            except (TypeError, ValueError):
                result.append(None)
        return result
    finally:
        engine.close_dispatcher()


# -- index layout, without a device ---------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MIB))
@pytest.mark.parametrize("outlet", [1, 2, 7, 9, 16])
def test_profile_oids_are_the_mib_objects(name: str, outlet: int) -> None:
    p, m = PROFILES[name], MIB[name]
    assert p.oid(p.state_oid, outlet) == m.state(outlet), m.mib
    assert (p.oid(p.on_oid, outlet), p.on_value) == (m.on(outlet), m.on_value), m.mib
    assert (p.oid(p.off_oid, outlet), p.off_value) == (m.off(outlet), m.off_value), m.mib
    assert p.state_of(m.reads_on).value == "on", m.mib
    assert p.state_of(m.reads_off).value == "off", m.mib


def test_aten_outlets_1_to_16_map_to_outlet1status_to_outlet16status() -> None:
    aten = PROFILES["aten"]
    for n, arc in ATEN_ARC.items():
        assert aten.oid(aten.state_oid, n) == f"{ATEN_OUTLET}.{arc}.0", n
    # outlet16Status is { outlet 18 }: Ironic's template wrote { outlet 16 } (outlet 14)
    assert aten.oid(aten.off_oid, 16) == "1.3.6.1.4.1.21317.1.3.2.2.2.2.18.0"
    assert aten.oid(aten.state_oid, 42) == f"{ATEN_OUTLET}.44.0"  # outlet42Status, the last
    with pytest.raises(ValueError, match="no outlet 43"):
        aten.oid(aten.state_oid, 43)


def test_vertiv_geist_outlets_are_pduoutletswitchindex_1_to_100() -> None:
    geist = PROFILES["vertiv-geist"]
    # INDEX { pduOutletSwitchIndex }, Integer32(1..100): the outlet number, no PDU arc
    assert geist.oid(geist.state_oid, 1) == f"{VERTIV_SWITCH}.4.1"
    assert geist.oid(geist.off_oid, 100) == f"{VERTIV_SWITCH}.6.100"
    for outlet in (0, 101):
        with pytest.raises(ValueError, match=f"no outlet {outlet}"):
            geist.oid(geist.on_oid, outlet)


def test_vertiv_geist_status_values_are_pduoutletswitchstate() -> None:
    geist = PROFILES["vertiv-geist"]
    assert {v: geist.state_of(v).value for v in VERTIV_STATES} == VERTIV_STATES
    assert geist.state_of(8).value == "unknown"  # pduOutletSwitchControl's none(8) is no state


# -- write values and status values, against walks written from the MIB ----------------------
@pytest.mark.parametrize("name", sorted(MIB))
async def test_switching_writes_the_mib_value_to_that_outlet_only(
    name: str,
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    m, community = MIB[name], f"mib-{name}"
    ch = channel_for(snmp_config(community, profile=name))
    states = [m.state(n) for n in (1, 2, 3, 4)]
    assert await snmp(snmpsim, community, states) == [m.reads_on, m.reads_on,
                                                      m.reads_off, m.reads_off]
    done = await ch.shutdown(parse_target({"outlets": [2]}))
    assert "rack/2: switched off" in done.detail
    assert await snmp(snmpsim, community, states) == [m.reads_on, m.reads_off,
                                                      m.reads_off, m.reads_off]
    await ch.power_on(parse_target({"outlets": [3]}))
    assert await snmp(snmpsim, community, states) == [m.reads_on, m.reads_off,
                                                      m.reads_on, m.reads_off]
    one = parse_target({"outlets": [2]})
    assert (await ch.read_power_state(one)).state is PowerState.OFF


# -- the ATEN PE, recorded-style, outlets 1..16 ----------------------------------------------
async def test_aten_shutdown_of_outlet_16_switches_outlet_16_and_nothing_else(
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("rec-aten-pe16", profile="aten"))
    every = parse_target({"outlets": list(range(1, 17))})
    reading = await ch.read_power_state(every)
    assert "not read" not in reading.detail and "no such object" not in reading.detail
    done = await ch.shutdown(parse_target({"outlets": [16]}))
    assert "rack/16: switched off" in done.detail
    status = [f"{ATEN_OUTLET}.{ATEN_ARC[n]}.0" for n in range(1, 17)]
    assert await snmp(snmpsim, "rec-aten-pe16", status) == [2] * 15 + [1]
    await ch.power_on(parse_target({"outlets": [16]}))
    assert await snmp(snmpsim, "rec-aten-pe16", status) == [2] * 16


async def test_aten_auto_is_confirmed_by_reading_outlet1status(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("rec-aten-pe16", profile="auto"))
    assert (await ch.drivers[""].profile()).name == "aten"  # type: ignore[attr-defined]


# -- readback: a write the PDU did not apply is not reported switched ------------------------
async def test_a_write_the_outlet_does_not_follow_is_outcome_unknown_naming_what_it_reads(
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    # rPDU2: the command object is written, the status object reads the outlet; on this
    # PDU outlet 5's relay does not follow its command (status keeps reading on(2))
    community = "rec-ap89xx-stuck5"
    ch = channel_for(snmp_config(community, profile="apc-rpdu2", settle_s=0.5))
    with pytest.raises(OutcomeUnknown) as info:
        await ch.shutdown(parse_target({"outlets": [4, 5]}))
    assert await snmp(snmpsim, community, [MIB["apc-rpdu2"].state(5)]) == [2]
    text = str(info.value)
    assert "rack/5 was switched off but reads on" in text
    assert "rack/5: switched off" not in text
    outcomes = info.value.outcomes  # type: ignore[attr-defined]
    assert outcomes["rack/5"].startswith("failed: ") and outcomes["rack/4"] == "switched off"
    assert "shutdown failed on 1 of 2 outlet(s)" in text


# -- profile: auto on real APC product identifiers -------------------------------------------
@pytest.mark.parametrize(
    ("community", "expected"),
    [("rec-ap9606", "apc-masterswitch"),  # 1.3.6.1.4.1.318.1.3.4.2 masterSwitchV2
     ("rec-ap89xx", "apc-rpdu2"),  # .4.6 masterSwitchrPDU2
     ("rec-ap7900b", "apc-masterswitch")],  # .4.8 masterSwitchrPDUB: probed
)
async def test_auto_detects_apc_from_its_product_identifier(
    community: str,
    expected: str,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config(community, profile="auto"))
    three = parse_target({"outlets": [3]})
    await ch.shutdown(three)
    assert (await ch.read_power_state(three)).state is PowerState.OFF
    assert (await ch.drivers[""].profile()).name == expected  # type: ignore[attr-defined]


async def test_the_ap7900b_probe_is_read_only_and_switches_through_spduoutletctl(
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("rec-ap7900b-2", profile="auto"))
    driver = ch.drivers[""]
    before = driver.requests
    await driver.profile()  # type: ignore[attr-defined]
    # sysObjectID, then one GET per candidate; nothing written by detection
    assert driver.requests - before == 4
    assert await snmp(snmpsim, "rec-ap7900b-2", [f"{SPDU_CTL}.{n}" for n in range(1, 9)]) \
        == [1] * 8
    await ch.shutdown(parse_target({"outlets": [8]}))
    assert await snmp(snmpsim, "rec-ap7900b-2", [f"{SPDU_CTL}.8", f"{SPDU_CTL}.7"]) == [2, 1]


@pytest.mark.parametrize(("community", "words"), [
    ("rec-rpdub-both", "several candidate profiles answer"),
    ("rec-rpdub-neither", "none of the candidate profiles"),
])
async def test_an_undecidable_apc_product_is_a_config_error_naming_the_candidates(
    community: str,
    words: str,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config(community, profile="auto"))
    with pytest.raises(ConfigError) as info:
        await ch.shutdown(parse_target({"outlets": [1]}))
    text = str(info.value)
    assert "channels.rack.profile" in text and words in text
    assert "1.3.6.1.4.1.318.1.3.4.8" in text and "masterSwitchrPDUB" in text
    for name in ("apc-rpdu2", "apc-rpdu", "apc-masterswitch"):
        assert name in text


# -- the send gate: no SET after the host gave up on the call --------------------------------
async def test_no_set_leaves_once_the_host_gave_up_on_the_call(
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    from powerplane.testing import send_gate
    from powerplane_pdu.plugin import PDU

    assert PDU.gated_sends
    community = "mib-cyberpower-gate"
    ch = channel_for(snmp_config(community, profile="cyberpower"))
    with send_gate() as gate:
        gate.close()
        with pytest.raises(ChannelTimeout, match="it was not sent"):
            await ch.shutdown(parse_target({"outlets": [1]}))
    assert not gate.sent
    assert ch.requests() == 0
    assert await snmp(snmpsim, community, [MIB["cyberpower"].state(1)]) == [1]  # still on


# -- teltronix: no Teltronix MIB found, so the profile is withdrawn --------------------------
# Enterprise 23620 is Teltronix Ltd (IANA). The only description of its outlet object is
# Ironic's driver ("1.3.6.1.4.1.23620.1.2.2.1.4 Outlet Power, 1=Off, 2=On"); this device
# answers exactly that, so a profile that trusted it would switch here.
TELTRONIX_POWER = "1.3.6.1.4.1.23620.1.2.2.1.4"


@pytest.fixture(scope="module")
def teltronix_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SnmpSim]:
    """An snmpsim of its own: a device at enterprise 23620 with Ironic's outlet objects."""
    work = tmp_path_factory.mktemp("teltronix")
    data = work / "data"
    data.mkdir()
    lines = ["1.3.6.1.2.1.1.2.0|6|1.3.6.1.4.1.23620.1",
             *(f"{TELTRONIX_POWER}.{n}|2:pduoutlet|value=2" for n in range(1, 5))]
    (data / "rec-teltronix.snmprec").write_text("\n".join(lines) + "\n")
    sim = SnmpSim(data, work, AUTH_KEY, PRIV_KEY)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


def test_teltronix_is_withdrawn_naming_why() -> None:
    assert "teltronix" not in PROFILES
    with pytest.raises(KeyError, match="could not be checked against a Teltronix MIB"):
        get_profile("teltronix")
    assert "switch the wrong outlet" in WITHDRAWN["teltronix"]
    found = detect("1.3.6.1.4.1.23620.1")
    assert found is not None and found.candidates == ()
    assert "withdrawn" in found.what


def test_a_config_naming_teltronix_is_refused_at_load(tmp_path: Path) -> None:
    community = tmp_path / "community"
    community.write_text("private\n")
    cfg = {"channels": {"rack": {"type": "pdu", "protocol": "snmp", "profile": "teltronix",
                                 "host": "127.0.0.1", "community": {"file": str(community)}}},
           "nodes": {"n1": {"channels": [{"channel": "rack", "target": {"outlets": [1]}}]}}}
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    assert "channels.rack" in str(info.value) and "'teltronix'" in str(info.value)


async def test_auto_on_a_teltronix_refuses_and_writes_nothing(
    teltronix_sim: SnmpSim,
    tmp_path: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    community = tmp_path / "community"
    community.write_text("rec-teltronix\n")
    ch = channel_for({"protocol": "snmp", "profile": "auto", "host": "127.0.0.1",
                      "port": teltronix_sim.port, "community": {"file": str(community)},
                      "timeouts": {"connect_s": 0.5, "read_s": 0.5}, "retries": 0,
                      "reboot_delay_s": 0})
    with pytest.raises(ConfigError) as info:
        await ch.shutdown(parse_target({"outlets": [2]}))
    text = str(info.value)
    assert "channels.rack.profile" in text and "Teltronix Ltd" in text and "withdrawn" in text
    assert ch.requests() == 1  # the sysObjectID GET; no SET
    outlets = [f"{TELTRONIX_POWER}.{n}" for n in range(1, 5)]
    assert await snmp(teltronix_sim, "rec-teltronix", outlets) == [2, 2, 2, 2]
