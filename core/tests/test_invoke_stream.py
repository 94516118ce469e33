"""invoke_stream and the fleet scheduler: results as they finish, bounded work, one timer.

The channel here is driven by events, not by time: a call for a target named in
``GateChannel.hold`` waits until the test releases it, so each ordering the tests prove is
forced, never raced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import BaseModel, ConfigDict

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelTimeout,
    ChannelType,
    InvokeResult,
    OutcomeUnknown,
    PowerHost,
    Reading,
    Source,
    Verb,
    about_to_send,
    hookimpl,
    parse_config,
)
from powerplane.plugins import Registry, load_plugins

if TYPE_CHECKING:
    from conftest import LoopTimers

TIMEOUT = 10.0
"""An explicit bound on each operation of a test (never a timing threshold)."""


class _GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = "bmc"


class GateChannel:
    """Targets in ``hold`` wait for their event (before or after the send); others answer."""

    hold: dict[str, asyncio.Event] = {}
    hold_after_send: set[str] = set()
    sent: list[str] = []
    started: list[str] = []
    tasks_seen: list[int] = []

    def __init__(self, name: str, config: _GateConfig) -> None:
        self.config = config

    def endpoint(self, target: str) -> str:
        return self.config.endpoint

    async def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.of(hard=[Verb.REBOOT], source=Source.DECLARED)

    async def reboot(self, target: str) -> Acceptance:
        GateChannel.started.append(target)
        GateChannel.tasks_seen.append(len(asyncio.all_tasks()))
        event = GateChannel.hold.get(target)
        if event is not None and target not in GateChannel.hold_after_send:
            await event.wait()
        about_to_send()
        GateChannel.sent.append(target)
        if event is not None and target in GateChannel.hold_after_send:
            await event.wait()
        return Acceptance()

    async def shutdown(self, target: str) -> Acceptance:
        raise AssertionError("not advertised")

    power_on = shutdown

    async def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    async def close(self) -> None:
        pass


def _registry() -> Registry:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("gate", _GateConfig, GateChannel, gated_sends=True))

    reg = load_plugins()
    reg.add_module("gate-test", Plugin())
    return reg


def _host(endpoints: int, per: int, **limits: Any) -> PowerHost:
    GateChannel.hold = {}
    GateChannel.hold_after_send = set()
    GateChannel.sent = []
    GateChannel.started = []
    GateChannel.tasks_seen = []
    channels = {f"ep{e}": {"type": "gate", "endpoint": f"bmc-{e}"} for e in range(endpoints)}
    nodes = {f"n{e}-{i}": {"channels": [{"channel": f"ep{e}", "target": f"m{e}-{i}"}]}
             for e in range(endpoints) for i in range(per)}
    return PowerHost(parse_config({"channels": channels, "nodes": nodes, "limits": limits},
                                  registry=_registry()))


async def test_the_first_result_arrives_before_the_last_call_completes() -> None:
    async with _host(1, 2, per_endpoint=2) as host:
        last = GateChannel.hold["m0-1"] = asyncio.Event()
        stream = host.invoke_stream(["n0-0", "n0-1"], Verb.REBOOT, reason="kernel")
        async with asyncio.timeout(TIMEOUT):
            node, outcome = await anext(stream)
            # n0-1's call is still held: its event has not been set
            assert (node, type(outcome)) == ("n0-0", InvokeResult)
            assert "m0-1" in GateChannel.started and "m0-1" not in GateChannel.sent
            last.set()
            rest = [item async for item in stream]
        assert [n for n, _ in rest] == ["n0-1"]
        assert isinstance(rest[0][1], InvokeResult) and rest[0][1].accepted


async def test_refusals_stream_before_any_call_and_each_node_comes_once() -> None:
    async with _host(2, 3) as host:
        async with asyncio.timeout(TIMEOUT):
            seen = [item async for item in host.invoke_stream(
                ["ghost", *host.nodes, "n0-0"], Verb.REBOOT, reason="kernel")]
        assert seen[0][0] == "ghost" and type(seen[0][1]).__name__ == "UnknownNode"
        assert sorted(n for n, _ in seen) == sorted(["ghost", *host.nodes])
        assert sorted(GateChannel.sent) == sorted(f"m{e}-{i}" for e in range(2) for i in range(3))


async def test_bad_arguments_raise_when_the_stream_is_asked_for() -> None:
    async with _host(1, 1) as host:
        with pytest.raises(ValueError, match="reason is required"):
            host.invoke_stream(["n0-0"], Verb.REBOOT, reason=" ")
        with pytest.raises(ValueError, match="wait must be"):
            host.invoke_stream(["n0-0"], Verb.REBOOT, reason="x", wait=-1)
    assert GateChannel.sent == []


async def test_work_in_flight_is_bounded_by_the_limits_not_the_fleet() -> None:
    # 400 nodes on 4 endpoints, 2 per endpoint: at most 8 calls (and their workers) at once
    async with _host(4, 100, per_endpoint=2, total=100) as host:
        baseline = len(asyncio.all_tasks())
        async with asyncio.timeout(TIMEOUT):
            results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert all(isinstance(r, InvokeResult) for r in results.values())
        assert len(GateChannel.sent) == 400
        # one task per node gathered at once would show about 400 tasks here
        assert max(GateChannel.tasks_seen) - baseline <= 8 + 2


async def test_the_total_limit_bounds_the_workers_across_endpoints() -> None:
    async with _host(10, 20, per_endpoint=4, total=3) as host:
        baseline = len(asyncio.all_tasks())
        async with asyncio.timeout(TIMEOUT):
            await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert len(GateChannel.sent) == 200
        assert max(GateChannel.tasks_seen) - baseline <= 3 + 2


async def test_one_loop_timer_bounds_every_call_of_a_batch(loop_timers: LoopTimers) -> None:
    async with _host(5, 40, per_endpoint=4, total=1000) as host:
        before = loop_timers.armed
        async with asyncio.timeout(TIMEOUT):
            results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="x")
        armed = loop_timers.armed - before
        assert len(results) == 200 and len(GateChannel.sent) == 200
        # asyncio.timeout per call arms 200 timers; the batch's shared deadline, one
        assert armed <= 2


async def test_a_call_held_before_the_send_times_out_and_never_sends() -> None:
    async with _host(1, 3, timeout_s=0.2) as host:
        GateChannel.hold["m0-1"] = held = asyncio.Event()
        async with asyncio.timeout(TIMEOUT):
            results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert isinstance(results["n0-1"], ChannelTimeout)
        assert "nothing was sent" in str(results["n0-1"])
        assert isinstance(results["n0-0"], InvokeResult)
        assert isinstance(results["n0-2"], InvokeResult)
        held.set()
        await asyncio.sleep(0)
    assert "m0-1" not in GateChannel.sent


async def test_a_call_held_after_the_send_is_outcome_unknown() -> None:
    async with _host(1, 2, timeout_s=0.2) as host:
        GateChannel.hold["m0-0"] = asyncio.Event()
        GateChannel.hold_after_send = {"m0-0"}
        async with asyncio.timeout(TIMEOUT):
            results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert isinstance(results["n0-0"], OutcomeUnknown)
        assert isinstance(results["n0-1"], InvokeResult)
    assert GateChannel.sent.count("m0-0") == 1  # sent once, never retried


async def test_leaving_the_stream_early_never_sends_what_was_not_sent() -> None:
    async with _host(1, 3, per_endpoint=1) as host:
        GateChannel.hold["m0-1"] = held = asyncio.Event()
        stream = host.invoke_stream(list(host.nodes), Verb.REBOOT, reason="kernel")
        async with asyncio.timeout(TIMEOUT):
            async for node, _ in stream:
                assert node == "n0-0"
                break
            await stream.aclose()  # type: ignore[attr-defined]
        held.set()
        for _ in range(3):
            await asyncio.sleep(0)
    assert GateChannel.sent == ["m0-0"]
