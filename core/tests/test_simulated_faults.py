"""Every fault of the simulated channel maps to its error class; nothing escapes unmapped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    NotSupported,
    OutcomeUnknown,
    PowerHost,
    PowerplaneError,
    PowerState,
    ProtocolError,
    RefusedByDevice,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane.plugins import Registry, load_plugins
from powerplane.sim.channel import Fault, SimulatedChannel, SimulatedConfig

EXPECTED: dict[Fault, type[ChannelError] | None] = {
    Fault.UNREACHABLE: Unreachable,
    Fault.AUTH: AuthenticationFailed,
    Fault.TIMEOUT: ChannelTimeout,
    Fault.REFUSED: RefusedByDevice,
    Fault.SILENT: None,
    Fault.LOST_ANSWER: OutcomeUnknown,
}


def test_every_fault_has_an_expected_mapping() -> None:
    assert set(EXPECTED) == set(Fault)


@pytest.mark.parametrize("fault", list(Fault))
async def test_fault_maps_to_its_error_class(fault: Fault) -> None:
    chan = SimulatedChannel(
        "sim", SimulatedConfig(machines={"m": "on"}, faults={"m": fault}, timeout_s=0.05)
    )
    want = EXPECTED[fault]
    if want is None:
        await chan.shutdown("m")  # a silent failure reports success ...
        assert chan.state_of("m") == "on"  # ... and does nothing
        assert chan.dispatches == []
        return
    with pytest.raises(want) as info:
        await chan.shutdown("m")
    assert info.value.channel == "sim"
    assert info.value.target == "m"


async def test_unknown_machine_is_a_clear_refusal() -> None:
    chan = SimulatedChannel("sim", SimulatedConfig(machines={"m": "on"}))
    with pytest.raises(RefusedByDevice, match="no such machine 'ghost'"):
        await chan.reboot("ghost")


async def test_unadvertised_verb_fails_before_any_io() -> None:
    chan = SimulatedChannel("sim", SimulatedConfig(verbs=[Verb.REBOOT], machines={"m": "on"}))
    with pytest.raises(NotSupported, match="does not advertise power-on"):
        await chan.power_on("m")
    assert chan.calls["power_on"] == 0


async def test_session_limit_refuses_the_extra_session() -> None:
    import asyncio

    chan = SimulatedChannel(
        "sim", SimulatedConfig(machines={"a": "on", "b": "on"}, session_limit=1, latency_ms=50)
    )
    results = await asyncio.gather(chan.read_power_state("a"), chan.read_power_state("b"),
                                   return_exceptions=True)
    assert sum(isinstance(r, RefusedByDevice) for r in results) == 1


async def test_host_timeout_bounds_a_hanging_channel() -> None:
    cfg = {
        "channels": {"sim": {"type": "simulated", "machines": {"m": "on"},
                             "faults": {"m": "timeout"}, "timeout_s": 30}},
        "nodes": {"n": {"channels": [{"channel": "sim", "target": "m"}]}},
        "limits": {"timeout_s": 0.2},
    }
    async with PowerHost(parse_config(cfg)) as host:
        reading = await host.read_power_state("n")
        assert reading.state is PowerState.UNKNOWN
        assert "no answer within 0.2 s" in reading.detail


class _Leaky:
    """A plugin whose channel lets a library exception escape."""

    class Config(SimulatedConfig):
        pass

    class Channel(SimulatedChannel):
        async def reboot(self, target: str) -> Any:
            raise KeyError("library internals")

        def read_power_state(self, target: str) -> Any:  # type: ignore[override]
            raise OSError("socket trouble")


@pytest.fixture
def leaky_registry() -> Registry:
    from powerplane import ChannelType, hookimpl

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("leaky", _Leaky.Config, _Leaky.Channel))

    reg = load_plugins()
    reg.add_module("leaky-test", Plugin())
    return reg


async def test_an_exception_escaping_a_plugin_is_mapped_not_leaked(
    leaky_registry: Registry,
) -> None:
    cfg = {
        "channels": {"l": {"type": "leaky", "machines": {"m": "on"}}},
        "nodes": {"n": {"channels": [{"channel": "l", "target": "m"}]}},
    }
    async with PowerHost(parse_config(cfg, registry=leaky_registry)) as host:
        with pytest.raises(ProtocolError, match=r"unmapped builtins\.KeyError") as info:
            await host.invoke("n", Verb.REBOOT, reason="test")
        assert isinstance(info.value.__cause__, KeyError)
        reading = await host.read_power_state("n")  # a plain def, run in a worker thread
        assert reading.state is PowerState.UNKNOWN
        assert "unmapped builtins.OSError" in reading.detail


@pytest.mark.parametrize("fault", [f for f in Fault if f is not Fault.SILENT])
async def test_every_fault_through_the_host_is_a_powerplane_error(
    fault: Fault, host_for: Callable[[dict[str, Any]], PowerHost]
) -> None:
    cfg = {
        "channels": {
            "sim": {"type": "simulated", "machines": {"m": "on"}, "timeout_s": 0.05},
        },
        "nodes": {"n": {"channels": [{"channel": "sim", "target": "m"}]}},
    }
    async with host_for(cfg) as host:
        chan = host.channel("sim")
        chan.config = chan.config.model_copy(update={"faults": {"m": fault}})
        with pytest.raises(PowerplaneError) as info:
            await host.invoke("n", Verb.REBOOT, reason="fault test")
        assert isinstance(info.value, EXPECTED[fault])  # type: ignore[arg-type]
