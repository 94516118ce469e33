"""The SNMP driver's engine and request path, on snmpsim.

Each PDU keeps its own pysnmp engine (its credentials live there alone): channels side by
side on one agent, one with the right and one with a wrong community or v3 key, each get
their own answer, however their requests interleave. Requests go out with numeric OIDs and
build no MIB compiler; closing a channel releases its UDP socket.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest

from powerplane import AuthenticationFailed, ChannelTimeout, PowerState
from powerplane_pdu import PduChannel, PduChannelConfig, parse_target
from powerplane_pdu.snmp import SnmpPdu

ONE_TWO = parse_target({"outlets": [1, 2]})
ROUNDS = 3


def _driver(channel: PduChannel) -> SnmpPdu:
    driver = next(iter(channel.drivers.values()))
    assert isinstance(driver, SnmpPdu)
    return driver


def _v3(snmp_config: Callable[..., dict[str, Any]], secret: Callable[[str], Any],
        auth: str) -> dict[str, Any]:
    from pdu_peers import PRIV_KEY, V3_USER

    cfg = snmp_config("engine", version="3", user=V3_USER, context="engine",
                      auth_protocol="sha", auth_key=secret(auth),
                      priv_protocol="aes", priv_key=secret(PRIV_KEY))
    del cfg["community"]
    return cfg


async def _side_by_side(right: PduChannel, wrong: PduChannel,
                        error: type[Exception]) -> None:
    """Each round, both channels read at once: the right one reads its outlets, the wrong
    one fails with ``error``, never answered with the other's credentials."""
    for _ in range(ROUNDS):
        good, bad = await asyncio.gather(
            right.read_power_state(ONE_TWO), wrong.read_power_state(ONE_TWO),
            return_exceptions=True)
        assert not isinstance(good, BaseException), good
        assert good.state is PowerState.ON, good
        assert isinstance(bad, error), bad


async def test_a_wrong_community_beside_the_right_one_times_out_and_the_right_one_reads(
    snmp_config: Callable[..., dict[str, Any]],
    secret: Callable[[str], Any],
    channel_for: Callable[..., PduChannel],
) -> None:
    right = channel_for(snmp_config("engine"), "right")
    wrong = channel_for(snmp_config("engine", community=secret("not-engine-7c")), "wrong")
    await _side_by_side(right, wrong, ChannelTimeout)
    assert _driver(right)._engine is not _driver(wrong)._engine


async def test_a_wrong_v3_key_beside_the_right_one_for_the_same_user_fails_authentication(
    snmp_config: Callable[..., dict[str, Any]],
    secret: Callable[[str], Any],
    channel_for: Callable[..., PduChannel],
) -> None:
    """One v3 user name, two keys: pysnmp keys its users by name, so one engine for both
    would sign one channel's requests with the other's key."""
    from pdu_peers import AUTH_KEY

    right = channel_for(_v3(snmp_config, secret, AUTH_KEY), "right")
    wrong = channel_for(_v3(snmp_config, secret, "wrong-auth-key-3d"), "wrong")
    await _side_by_side(right, wrong, AuthenticationFailed)
    # and in the other order of first use
    again_wrong = channel_for(_v3(snmp_config, secret, "wrong-auth-key-3d"), "wrong2")
    again_right = channel_for(_v3(snmp_config, secret, AUTH_KEY), "right2")
    with pytest.raises(AuthenticationFailed):
        await again_wrong.read_power_state(ONE_TWO)
    assert (await again_right.read_power_state(ONE_TWO)).state is PowerState.ON


async def test_requests_are_numeric_and_build_no_mib_compiler(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    """A read and a switch leave the engine's MIB builder without a MIB compiler (the
    high-level get_cmd/set_cmd attach one per engine, a parser built each time)."""
    ch = channel_for(snmp_config("engine"))
    await ch.shutdown(parse_target({"outlets": [3]}))
    assert (await ch.read_power_state(parse_target({"outlets": [3]}))).state is PowerState.OFF
    engine = _driver(ch)._engine
    assert engine is not None
    assert engine.get_mib_builder().get_mib_compiler() is None
    assert "mibViewController" in engine.cache  # the engine's own, never asked to resolve


def _socket_inodes() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            out.add(link)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
async def test_closing_a_channel_releases_its_socket(
    snmp_config: Callable[..., dict[str, Any]],
) -> None:
    before = _socket_inodes()
    ch = PduChannel("rack", PduChannelConfig.model_validate(snmp_config("engine")))
    try:
        assert (await ch.read_power_state(ONE_TWO)).state is PowerState.ON
        opened = _socket_inodes() - before
        assert opened, "the channel's UDP socket"
    finally:
        await ch.close()
    assert not (opened & _socket_inodes()), "the socket is closed when close() returns"
    assert _driver(ch)._engine is None
    # a closed channel used again opens a fresh engine and socket
    try:
        assert (await ch.read_power_state(ONE_TWO)).state is PowerState.ON
    finally:
        await ch.close()
