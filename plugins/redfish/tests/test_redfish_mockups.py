"""The redfish channel against DMTF mockups served with live state and a SessionService.

These prove session auth with logout (sessions counted at the server), multi-system
targets, discovery from an ActionInfo resource or from nothing, the operator override,
refusals carrying the BMC's words, and graceful-then-force falling back to ForceOff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    CapabilitySet,
    ConfigError,
    NotSupported,
    OutcomeUnknown,
    PowerHost,
    PowerState,
    RefusedByDevice,
    Source,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane_redfish import RedfishChannel
from powerplane_redfish.testing.mockup import MockupServer

HostFor = Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]
CfgFn = Callable[..., dict[str, Any]]


RESET = "/Actions/ComputerSystem.Reset"


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    dep = parse_config({"channels": {"bmc": cfg}})
    configured = dep.channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


async def test_hundred_calls_use_one_session_and_log_it_out(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    async with host_for(one_node(mockup_cfg(server), target, site="lab")) as host:
        for i in range(100):
            if i % 10 == 0:
                await host.invoke("n1", Verb.REBOOT, reason="session test")
            else:
                assert (await host.read_power_state("n1")).state is PowerState.ON
        assert server.sessions_created == 1
        assert server.live_sessions() == 1
    assert server.sessions_created == server.sessions_deleted == 1
    assert server.live_sessions() == 0
    assert [r for _, r in server.reset_log()] == ["GracefulRestart"] * 10


async def test_sessions_balance_across_a_dropped_connection(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        for _ in range(50):
            await asyncio.to_thread(ch.read_power_state, target)
        # A read is retried once on a fresh connection; dropped twice, it fails.
        server.drop_next(2)
        with pytest.raises(Unreachable, match="closed the connection"):
            await asyncio.to_thread(ch.read_power_state, target)
        # The doubtful session was logged out at once; the next call logs in again.
        assert server.sessions_deleted == 1
        for _ in range(50):
            await asyncio.to_thread(ch.read_power_state, target)
    finally:
        ch.close()
    assert server.sessions_created == server.sessions_deleted == 2
    assert server.live_sessions() == 0


async def test_a_reset_whose_connection_drops_is_not_sent_again(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        await asyncio.to_thread(ch.capabilities, target)
        server.drop_next()
        # written, then the connection closed before an answer: it may have been applied
        with pytest.raises(OutcomeUnknown, match="may have been applied") as err:
            await asyncio.to_thread(ch.reboot, target)
        assert "ResetType=GracefulRestart" in str(err.value)
    finally:
        ch.close()
    assert server.requests.count(("POST", target + RESET)) == 1
    assert server.sessions_created == server.sessions_deleted == 1


async def test_a_refused_reset_carries_the_bmcs_words_and_keeps_the_session(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    # The operator declares PowerCycle, which this BMC does not accept.
    ch = channel_for(mockup_cfg(server, reboot="force", reset_types=["PowerCycle", "On"]))
    try:
        caps = await asyncio.to_thread(ch.capabilities, target)
        assert caps.source is Source.DECLARED
        assert caps.as_dict() == {"reboot": "hard", "power-on": "hard"}
        with pytest.raises(RefusedByDevice) as err:
            await asyncio.to_thread(ch.reboot, target)
        assert "not in the list of acceptable values" in str(err.value)
        assert "ResetType=PowerCycle" in str(err.value)
        await asyncio.to_thread(ch.power_on, target)
    finally:
        ch.close()
    assert server.sessions_created == server.sessions_deleted == 1


async def test_session_login_with_a_wrong_password_is_an_authentication_error(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = mockup("public-rackmount1")
    monkeypatch.setenv("PP_TEST_WRONG", "not-the-Passw0rd")
    ch = channel_for(mockup_cfg(server, password={"env": "PP_TEST_WRONG"}))
    try:
        with pytest.raises(AuthenticationFailed) as err:
            await asyncio.to_thread(ch.capabilities, server.systems[0])
    finally:
        ch.close()
    assert "not-the-Passw0rd" not in str(err.value)
    assert server.sessions_created == 0


async def test_omitted_target_on_a_one_system_service(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    async with host_for(one_node(mockup_cfg(server), None)) as host:
        result = await host.invoke("n1", Verb.REBOOT, reason="one system")
        assert result.accepted
    assert server.reset_log() == [(server.systems[0], "GracefulRestart")]


async def test_four_blades_behind_one_manager(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor
) -> None:
    server = mockup("public-bladed")
    assert len(server.systems) == 4
    nodes = {
        f"blade-{i}": {"channels": [{"channel": "bmc", "target": path}]}
        for i, path in enumerate(server.systems)
    }
    cfg = {
        "channels": {"bmc": mockup_cfg(server, shutdown="force")},
        "nodes": nodes,
        "recovery": {"attendedRack": True},
    }
    async with host_for(cfg) as host:
        results = await host.invoke_many(list(nodes), Verb.SHUTDOWN, reason="blades")
        assert all(not isinstance(r, Exception) for r in results.values())
        readings = [await host.read_power_state(n) for n in nodes]
    assert all(r.state is PowerState.OFF for r in readings)
    assert sorted(server.reset_log()) == sorted((p, "ForceOff") for p in server.systems)
    assert server.sessions_created == server.sessions_deleted == 1


async def test_omitted_target_with_four_blades_names_them(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-bladed")
    ch = channel_for(mockup_cfg(server))
    try:
        with pytest.raises(ConfigError) as err:
            await asyncio.to_thread(ch.capabilities, None)
    finally:
        ch.close()
    for path in server.systems:
        assert path in str(err.value)


async def test_no_allowable_values_advertises_nothing_and_says_so(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-rackmount1", advertise="none")
    target = server.systems[0]
    async with host_for(one_node(mockup_cfg(server), target, site="lab")) as host:
        caps = host.capabilities("bmc", target)
        offer = host.offer_for("n1")
        assert isinstance(caps, CapabilitySet)
        assert len(caps) == 0
        assert "advertises no reset types" in caps.detail
        assert all(not v.offered for v in offer.verbs.values())
        # Asked directly, the channel refuses before any I/O.
        before = len(server.requests)
        with pytest.raises(NotSupported):
            await asyncio.to_thread(host.channel("bmc").reboot, target)
        assert len(server.requests) == before


async def test_allowable_values_read_from_action_info(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-bladed", advertise="action-info")
    target = server.systems[1]
    ch = channel_for(mockup_cfg(server))
    try:
        caps = await asyncio.to_thread(ch.capabilities, target)
        before = len(server.requests)
        await asyncio.to_thread(ch.shutdown, target)
        assert server.requests[before:] == [("POST", target + RESET)]
    finally:
        ch.close()
    assert caps.source is Source.DISCOVERED
    assert "ActionInfo" in caps.detail
    assert caps.as_dict() == {"reboot": "graceful", "shutdown": "graceful", "power-on": "hard"}


async def test_declared_reset_types_override_a_silent_service(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", advertise="none")
    ch = channel_for(mockup_cfg(server, reset_types=["On", "ForceOff"]))
    try:
        caps = await asyncio.to_thread(ch.capabilities, server.systems[0])
    finally:
        ch.close()
    assert caps.source is Source.DECLARED
    assert caps.as_dict() == {"power-on": "hard"}  # shutdown mode graceful needs GracefulShutdown


async def test_graceful_then_force_sends_force_off_once_when_the_os_ignores_it(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    cfg = mockup_cfg(server, shutdown="graceful-then-force", shutdown_wait_s=0.3,
                     poll_interval_s=0.1)
    async with host_for(one_node(cfg, target, site="lab")) as host:
        result = await host.invoke("n1", Verb.SHUTDOWN, reason="hung OS", wait=5)
    assert result.readback is PowerState.OFF
    assert "graceful shutdown did not finish" in result.detail
    assert "ForceOff sent" in result.detail
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown", "ForceOff"]


async def test_graceful_then_force_reboot_is_an_observed_shutdown_then_on(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server, reboot="graceful-then-force", shutdown_wait_s=0.3,
                                poll_interval_s=0.1))
    try:
        acceptance = await asyncio.to_thread(ch.reboot, target)
        reading = await asyncio.to_thread(ch.read_power_state, target)
    finally:
        ch.close()
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown", "ForceOff", "On"]
    assert "ForceOff sent" in acceptance.detail
    assert reading.state is PowerState.ON


@pytest.mark.parametrize(
    ("state", "expected", "detail"),
    [
        ("On", PowerState.ON, ""),
        ("Off", PowerState.OFF, ""),
        ("PoweringOn", PowerState.UNKNOWN, "PoweringOn"),
        ("PoweringOff", PowerState.UNKNOWN, "PoweringOff"),
        (None, PowerState.UNKNOWN, "no PowerState"),
    ],
)
async def test_readback_maps_power_state(
    state: str | None, expected: PowerState, detail: str,
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn,
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.power[target] = state
    ch = channel_for(mockup_cfg(server))
    try:
        reading = await asyncio.to_thread(ch.read_power_state, target)
    finally:
        ch.close()
    assert reading.state is expected
    assert detail in reading.detail


async def test_auto_auth_uses_the_session_service(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    ch = channel_for(mockup_cfg(server, auth="auto"))
    try:
        await asyncio.to_thread(ch.read_power_state, server.systems[0])
        assert server.live_sessions() == 1
    finally:
        ch.close()
    assert server.sessions_created == server.sessions_deleted == 1


async def test_basic_auth_opens_no_session(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    ch = channel_for(mockup_cfg(server, auth="basic"))
    try:
        await asyncio.to_thread(ch.read_power_state, server.systems[0])
    finally:
        ch.close()
    assert server.sessions_created == 0


def test_identity_reads_manufacturer_model_and_firmware(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    """The conformance report's target identity comes from the device itself."""
    server = mockup("public-rackmount1")
    ch = channel_for(mockup_cfg(server))
    try:
        ident = ch.identity(server.systems[0])
    finally:
        ch.close()
    assert ident["manufacturer"] and ident["model"]
    assert ident["firmware"]
