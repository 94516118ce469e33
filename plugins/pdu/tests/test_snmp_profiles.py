"""Every vendor profile against snmpsim: off, on, cycle and readback; detection; versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pdu_peers import AUTH_KEY, PRIV_KEY

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    OutcomeUnknown,
    PowerState,
    ProtocolError,
    RefusedByDevice,
)
from powerplane.testing import free_port
from powerplane_pdu import ENERGIZED_NOT_VISIBLE, PROFILES, PduChannel, parse_target

TWO = parse_target({"outlets": [1, 2]})


def _energized(reading: Any, profile: str) -> None:
    """On where the profile meters outlets (150 W > standby); else honestly unknown."""
    if PROFILES[profile].metered:
        assert reading.state is PowerState.ON, reading
        assert "150 W" in reading.detail
    else:
        assert reading.state is PowerState.UNKNOWN, reading
        assert reading.detail == ENERGIZED_NOT_VISIBLE


@pytest.mark.parametrize("profile", sorted(PROFILES))
async def test_profile_switches_off_on_and_cycles_with_readback(
    profile: str,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config(f"p-{profile}"))
    caps = await ch.capabilities(TWO)
    assert caps.as_dict() == {"reboot": "hard", "shutdown": "hard", "power-on": "hard"}
    _energized(await ch.read_power_state(TWO), profile)

    off = await ch.shutdown(TWO)
    assert "rack/1: switched off" in off.detail and "rack/2: switched off" in off.detail
    assert (await ch.read_power_state(TWO)).state is PowerState.OFF

    on = await ch.power_on(TWO)
    assert "rack/1: switched on" in on.detail
    _energized(await ch.read_power_state(TWO), profile)

    before = ch.requests()
    cycled = await ch.reboot(TWO)
    assert cycled.detail.count("switched off and on again") == 2
    assert ch.requests() - before == 4, "SET off, readback GET, SET on, readback GET"
    _energized(await ch.read_power_state(TWO), profile)

    # an outlet that starts off is switched on by power-on; mixed reads unknown by name
    mixed = parse_target({"outlets": [2, 3]})
    reading = await ch.read_power_state(mixed)
    assert reading.state is PowerState.UNKNOWN
    assert "on rack/2" in reading.detail and "off rack/3" in reading.detail
    await ch.power_on(mixed)
    _energized(await ch.read_power_state(mixed), profile)


@pytest.mark.parametrize(
    "profile", sorted(n for n, p in PROFILES.items() if p.sys_object_id)
)
async def test_profile_detected_from_sys_object_id(
    profile: str,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config(f"auto-{profile}", profile="auto"))
    await ch.shutdown(parse_target({"outlets": [1]}))
    assert (await ch.read_power_state(parse_target({"outlets": [1]}))).state is PowerState.OFF
    driver = ch.drivers[""]
    assert (await driver.profile()).name == profile  # type: ignore[attr-defined]


async def test_unknown_sys_object_id_is_a_protocol_error_asking_for_a_profile(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("unknown-sysoid", profile="auto"))
    with pytest.raises(ProtocolError, match=r"1\.3\.6\.1\.4\.1\.99999\.7 matches no PDU profile"):
        await ch.capabilities(TWO)


async def test_power_on_refused_when_every_outlet_is_already_on(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("policy"))
    with pytest.raises(RefusedByDevice, match="restore-on-AC") as info:
        await ch.power_on(TWO)
    assert "on_when_already_on: cycle" in str(info.value)


async def test_power_on_cycles_when_configured_and_every_outlet_is_on(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("policy", on_when_already_on="cycle"))
    before = ch.requests()
    done = await ch.power_on(TWO)
    assert done.detail.count("already on; switched off and on again") == 2
    assert ch.requests() - before == 5, "one GET, SET off, readback, SET on, readback"


async def test_snmp_v1_works(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("v1-apc", version=1))
    await ch.shutdown(TWO)
    assert (await ch.read_power_state(TWO)).state is PowerState.OFF


def _v3(snmp_config: Callable[..., dict[str, Any]], secret: Callable[[str], Any],
        auth: str = AUTH_KEY, priv: str = PRIV_KEY) -> dict[str, Any]:
    cfg = snmp_config("v3-apc", version="3", user="ppuser", context="v3-apc",
                      auth_protocol="sha", auth_key=secret(auth),
                      priv_protocol="aes", priv_key=secret(priv))
    del cfg["community"]
    return cfg


async def test_snmp_v3_auth_priv_switches_and_reads(
    snmp_config: Callable[..., dict[str, Any]],
    secret: Callable[[str], Any],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(_v3(snmp_config, secret))
    await ch.shutdown(TWO)
    assert (await ch.read_power_state(TWO)).state is PowerState.OFF
    await ch.power_on(TWO)
    assert (await ch.read_power_state(TWO)).detail == ENERGIZED_NOT_VISIBLE


async def test_wrong_v3_key_fails_authentication_without_the_key_in_the_message(
    snmp_config: Callable[..., dict[str, Any]],
    secret: Callable[[str], Any],
    channel_for: Callable[..., PduChannel],
) -> None:
    wrong = "wrong-auth-key-77"
    ch = channel_for(_v3(snmp_config, secret, auth=wrong))
    with pytest.raises(AuthenticationFailed) as info:
        await ch.shutdown(TWO)
    text = str(info.value) + repr(info.value) + str(info.value.__cause__ or "")
    for value in (wrong, AUTH_KEY, PRIV_KEY):
        assert value not in text
    assert "rack/1" in str(info.value)


async def test_wrong_community_times_out_without_the_community_in_the_message(
    snmp_config: Callable[..., dict[str, Any]],
    secret: Callable[[str], Any],
    channel_for: Callable[..., PduChannel],
) -> None:
    cfg = snmp_config("p-apc-rpdu", community=secret("not-the-community-x9"))
    ch = channel_for(cfg)
    with pytest.raises(ChannelTimeout, match="wrong community") as info:
        await ch.capabilities(TWO)
    assert "not-the-community-x9" not in str(info.value)
    assert "p-apc-rpdu" not in str(info.value)


async def test_no_agent_on_the_port_is_a_timeout(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("p-apc-rpdu", port=free_port("udp")))
    with pytest.raises(ChannelTimeout, match="no SNMP response"):
        await ch.read_power_state(TWO)
    # a SET that got no answer may have been applied: never a plain timeout
    with pytest.raises(OutcomeUnknown, match="no SNMP response to the SET"):
        await ch.shutdown(TWO)


async def test_a_missing_outlet_is_named(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("p-apc-rpdu"))
    reading = await ch.read_power_state(parse_target({"outlets": [1, 9]}))
    assert reading.state is PowerState.UNKNOWN
    assert "rack/9" in reading.detail and "no such object" in reading.detail


async def test_a_set_the_agent_rejects_is_refused_by_the_device_naming_the_object(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("faulty"))
    with pytest.raises(RefusedByDevice, match=r"SNMP set refused: genErr at 1\.3\.6") as info:
        await ch.shutdown(parse_target({"outlets": [2]}))
    assert "rack/2: FAILED" in str(info.value)
    # the faulty outlet is named; the others of the same request are written one by one
    # (agents differ on whether a refused SET applied its other writes)
    with pytest.raises(RefusedByDevice) as info:
        await ch.shutdown(parse_target({"outlets": [1, 2, 3]}))
    text = str(info.value)
    assert "shutdown failed on 1 of 3 outlet(s)" in text
    assert "rack/1: switched off" in text and "rack/3: switched off" in text
    assert "rack/2: FAILED (RefusedByDevice" in text
    reading = await ch.read_power_state(parse_target({"outlets": [1, 3]}))
    assert reading.state is PowerState.OFF


@pytest.mark.parametrize(
    ("indication", "mapped"),
    [
        ("RequestTimedOut", ChannelTimeout),
        ("WrongDigest", AuthenticationFailed),
        ("UnknownUserName", AuthenticationFailed),
        ("AuthenticationFailure", AuthenticationFailed),
        ("DecryptionError", AuthenticationFailed),
        ("UnknownSecurityName", AuthenticationFailed),
        ("UnsupportedSecurityLevel", AuthenticationFailed),
        ("NotInTimeWindow", AuthenticationFailed),
        ("UnknownCommunityName", AuthenticationFailed),
        ("ParseError", ProtocolError),
        ("OtherError", ProtocolError),
    ],
)
def test_every_snmp_error_indication_maps_into_the_channel_error_tree(
    indication: str, mapped: type[Exception], secret: Callable[[str], Any]
) -> None:
    from pysnmp.proto import errind

    from powerplane_pdu.config import PduSpec
    from powerplane_pdu.snmp import SnmpPdu

    spec = PduSpec(protocol="snmp", profile="apc-rpdu", host="127.0.0.1",
                   community=secret("c"))  # type: ignore[arg-type]
    error = SnmpPdu("rack", "rack", spec)._indication("get", getattr(errind, indication)("x"))
    assert type(error) is mapped
