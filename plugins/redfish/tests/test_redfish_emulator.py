"""The redfish channel against the sushy-tools emulator: over TLS, with basic auth."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    CapabilitySet,
    ConfigError,
    PowerHost,
    PowerOffConfirmed,
    PowerState,
    Source,
    Verb,
)
from powerplane_redfish import RedfishChannel
from powerplane_redfish.testing.emulator import SushyEmulator

HostFor = Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]
CfgFn = Callable[..., dict[str, Any]]


WAIT = 20.0  # seconds a test reads back before giving up (an explicit operation timeout)


async def test_capabilities_discovered_from_allowable_values(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str
) -> None:
    async with host_for(one_node(emu_cfg(), emu_system)) as host:
        caps = host.capabilities("bmc", emu_system)
    assert isinstance(caps, CapabilitySet)
    assert caps.source is Source.DISCOVERED
    assert caps.as_dict() == {"reboot": "graceful", "shutdown": "graceful", "power-on": "hard"}
    assert "ResetType@Redfish.AllowableValues" in caps.detail


async def test_modes_change_what_is_advertised(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str
) -> None:
    cfg = emu_cfg(shutdown="force", reboot="force")
    async with host_for(one_node(cfg, emu_system)) as host:
        caps = host.capabilities("bmc", emu_system)
    assert isinstance(caps, CapabilitySet)
    assert caps.as_dict() == {"reboot": "hard", "shutdown": "hard", "power-on": "hard"}


async def test_graceful_shutdown_then_power_on_read_back(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str
) -> None:
    async with host_for(one_node(emu_cfg(), emu_system, site="lab")) as host:
        off = await host.invoke("n1", Verb.SHUTDOWN, reason="test", wait=WAIT)
        assert off.readback is PowerState.OFF
        assert (await host.read_power_state("n1")).state is PowerState.OFF
        on = await host.invoke("n1", Verb.POWER_ON, reason="test", wait=WAIT)
        assert on.readback is PowerState.ON


async def test_force_shutdown_reads_off(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str
) -> None:
    async with host_for(one_node(emu_cfg(shutdown="force"), emu_system)) as host:
        result = await host.invoke("n1", Verb.SHUTDOWN, reason="test", wait=WAIT)
    assert result.readback is PowerState.OFF


async def test_graceful_then_force_shutdown_that_finishes_sends_no_force_off(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str, emulator: SushyEmulator
) -> None:
    cfg = emu_cfg(shutdown="graceful-then-force", shutdown_wait_s=10, poll_interval_s=0.2)
    async with host_for(one_node(cfg, emu_system)) as host:
        emulator.reset_count()
        result = await host.invoke("n1", Verb.SHUTDOWN, reason="test", wait=WAIT)
        posts = [p for m, p in emulator.requests() if m == "POST"]
    assert result.readback is PowerState.OFF
    assert result.detail == ""
    assert posts == [f"{emu_system}/Actions/ComputerSystem.Reset"]


@pytest.mark.parametrize("mode", ["graceful", "force", "graceful-then-force"])
async def test_reboot_each_mode_reads_back_on(
    mode: str, host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emu_system: str
) -> None:
    cfg = emu_cfg(reboot=mode, shutdown_wait_s=10, poll_interval_s=0.2)
    async with host_for(one_node(cfg, emu_system)) as host:
        result = await host.invoke("n1", Verb.REBOOT, reason="test", wait=WAIT)
    assert result.accepted
    assert result.readback is PowerState.ON


async def test_steady_state_verb_costs_one_post(
    emu_cfg: CfgFn, emu_system: str, emulator: SushyEmulator
) -> None:
    from powerplane import parse_config

    dep = parse_config({"channels": {"bmc": emu_cfg()}})
    channel = dep.channels["bmc"]
    ch = channel.type.factory("bmc", channel.config)
    assert isinstance(ch, RedfishChannel)
    try:
        ch.capabilities(emu_system)
        for _ in range(3):
            emulator.reset_count()
            ch.power_on(emu_system)
            assert emulator.requests() == [
                ("POST", f"{emu_system}/Actions/ComputerSystem.Reset")
            ]
        assert ch.connection.logins == 1
    finally:
        ch.close()


async def test_omitted_target_with_many_systems_is_a_config_error_naming_them(
    host_for: HostFor, emu_cfg: CfgFn, one_node: CfgFn, emulator: SushyEmulator
) -> None:
    async with host_for(one_node(emu_cfg(), None)) as host:
        reason = host.capabilities("bmc", None)
        offer = host.offer_for("n1")
        with pytest.raises(ConfigError) as err:
            await asyncio.to_thread(host.channel("bmc").capabilities, None)
    assert isinstance(reason, str)
    for path in emulator.system_paths:
        assert path in reason
        assert path in str(err.value)
    assert not offer.verbs[Verb.REBOOT].offered


@pytest.mark.slow
async def test_real_emulator_delay_is_seen_through_readback(
    tmp_path: Path, host_for: HostFor, one_node: CfgFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``sushy-emulator`` CLI applies a power change 1-11 s later; readback waits for it."""
    with SushyEmulator(tmp_path, cli=True, zero_delay=False) as emu:
        monkeypatch.setenv("PP_TEST_SLOW_PASSWORD", emu.password)
        cfg = {
            "type": "redfish",
            "endpoint": emu.endpoint,
            "username": emu.username,
            "password": {"env": "PP_TEST_SLOW_PASSWORD"},
            "verify": str(emu.tls.ca),
        }
        target = emu.system_paths[0]
        async with host_for(one_node(cfg, target)) as host:
            accepted_at = dt.datetime.now(dt.UTC)
            result = await host.invoke("n1", Verb.SHUTDOWN, reason="slow test")
            assert result.readback is None
            watch = host.confirm_power_off("n1", accepted_at, window=40, cadence=0.5)
            status = await asyncio.wait_for(watch, 60)
            assert status is PowerOffConfirmed.TRUE, watch.detail
            assert watch.readings >= 1
            assert (await host.read_power_state("n1")).state is PowerState.OFF
