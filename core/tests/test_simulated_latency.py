"""The simulated channel's latency: real waiting on the loop's clock, one timer per millisecond.

No timing thresholds: the loop's own clock is read before and after each call (a call may
not end before its latency has passed), and the loop's timers are counted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from powerplane import RefusedByDevice
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig

if TYPE_CHECKING:
    from conftest import LoopTimers

TIMEOUT = 10.0
"""An explicit bound on each operation of a test (never a timing threshold)."""


def _channel(**kw: Any) -> SimulatedChannel:
    machines = {f"m{i}": "on" for i in range(50)}
    return SimulatedChannel("sim", SimulatedConfig(machines=machines, **kw))


async def test_no_call_ends_before_its_latency_has_passed() -> None:
    ch = _channel(latency_ms=20)
    loop = asyncio.get_running_loop()

    async def timed(target: str) -> float:
        start = loop.time()
        await ch.reboot(target)
        return loop.time() - start

    async with asyncio.timeout(TIMEOUT):
        took = await asyncio.gather(*(timed(f"m{i}") for i in range(50)))
        took.append(await timed("m0"))
        reading_start = loop.time()
        await ch.read_power_state("m1")
        took.append(loop.time() - reading_start)
    assert min(took) >= 0.020
    assert len(ch.dispatches) == 51


async def test_calls_due_in_the_same_millisecond_share_one_loop_timer(
        loop_timers: LoopTimers) -> None:
    ch = _channel(latency_ms=20)
    loop = asyncio.get_running_loop()
    start = loop.time()
    before = loop_timers.armed
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(ch.reboot(f"m{i}") for i in range(50)))
    armed = loop_timers.armed - before
    spread_ms = int((loop.time() - start) * 1000) + 2
    # asyncio.sleep per call arms 50 timers; here one per millisecond the calls end in
    assert armed <= min(50, spread_ms)
    assert armed < 50


async def test_a_cancelled_call_leaves_the_others_of_its_millisecond_running() -> None:
    ch = _channel(latency_ms=20)
    tasks = [asyncio.create_task(ch.reboot(f"m{i}")) for i in range(3)]
    await asyncio.sleep(0)  # all three wait on the same tick
    tasks[1].cancel()
    async with asyncio.timeout(TIMEOUT):
        done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[1], asyncio.CancelledError)
    assert [d for t, d in ch.dispatches] == ["m0", "m2"]  # the cancelled one never sent
    assert ch.active == 0


async def test_the_short_path_keeps_counts_limits_and_the_boot_record() -> None:
    ch = _channel(latency_ms=1, session_limit=2)
    async with asyncio.timeout(TIMEOUT):
        await ch.reboot("m0")
        await ch.shutdown("m1")
        await ch.power_on("m1")
        await ch.reboot("m0")
    assert ch.dispatches == [("reboot", "m0"), ("shutdown", "m1"), ("power-on", "m1"),
                             ("reboot", "m0")]
    assert ch.calls["reboot"] == 2 and ch.calls["shutdown"] == 1
    assert ch.boots_of("m0") == 3 and ch.boots_of("m1") == 2
    assert ch.state_of("m1") == "on"
    async with asyncio.timeout(TIMEOUT):
        at_once = await asyncio.gather(*(ch.reboot(f"m{i}") for i in range(3)),
                                       return_exceptions=True)
    refused = [r for r in at_once if isinstance(r, RefusedByDevice)]
    assert len(refused) == 1 and "session limit" in str(refused[0])
    assert ch.peak_active == 2
