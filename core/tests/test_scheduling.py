"""The fleet scheduler's parts: the limiter, the worker slots. (The collector is tuned by the
CLI's process only: ``test_cli_gc.py``; library code never tunes it: ``test_library_gc.py``.)"""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from powerplane.scheduling import (
    Limiter,
    acquire_both,
    slots_of,
    try_both,
)

TIMEOUT = 10.0
"""An explicit bound on each operation of a test (never a timing threshold)."""


async def test_a_free_unit_is_taken_without_waiting_and_the_bound_holds() -> None:
    limiter = Limiter(2)
    assert limiter.try_acquire() and limiter.try_acquire()
    assert not limiter.try_acquire() and limiter.available == 0
    limiter.release()
    assert limiter.available == 1


async def test_waiters_are_served_first_come_first_served_and_nobody_overtakes() -> None:
    limiter = Limiter(1)
    assert limiter.try_acquire()
    order: list[int] = []

    async def take(i: int) -> None:
        await limiter.acquire()
        order.append(i)
        limiter.release()

    tasks = [asyncio.create_task(take(i)) for i in range(3)]
    await asyncio.sleep(0)
    limiter.release()  # handed to the first waiter, not back to the pool
    assert not limiter.try_acquire()  # a newcomer does not overtake the waiters
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


async def test_a_waiter_cancelled_after_the_handover_passes_the_unit_on() -> None:
    limiter = Limiter(1)
    assert limiter.try_acquire()
    first = asyncio.create_task(limiter.acquire())
    second = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    limiter.release()  # handed to ``first`` ...
    first.cancel()     # ... which is cancelled before it runs
    async with asyncio.timeout(TIMEOUT):
        await second   # the unit went on to the next waiter: none was lost
    with pytest.raises(asyncio.CancelledError):
        await first
    limiter.release()
    assert limiter.available == 1


async def test_a_waiter_cancelled_while_waiting_leaves_the_line() -> None:
    limiter = Limiter(1)
    assert limiter.try_acquire()
    waiting = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    limiter.release()
    assert limiter.available == 1 and limiter.try_acquire()


def test_slots_are_round_robin_and_at_most_per_key() -> None:
    queues = {"a": deque(range(5)), "b": deque(range(1)), "c": deque(range(3))}
    assert list(slots_of(queues, 2)) == ["a", "b", "c", "a", "c"]
    assert list(slots_of({"a": deque()}, 4)) == []


async def test_try_both_takes_both_units_or_neither() -> None:
    first, second = Limiter(1), Limiter(1)
    assert try_both(first, second)
    assert (first.available, second.available) == (0, 0)
    first.release()
    assert not try_both(first, second)  # the second is taken: the first is not kept
    assert (first.available, second.available) == (1, 0)
    second.release()
    assert try_both(first, second)


async def test_acquire_both_waits_for_each_and_gives_the_first_back_when_cancelled() -> None:
    first, second = Limiter(1), Limiter(1)
    assert second.try_acquire()  # the second bound is full
    waiter = asyncio.create_task(acquire_both(first, second))
    await asyncio.sleep(0)
    assert first.available == 0  # it holds the first and waits in line for the second
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert first.available == 1  # given back: no unit lost
    second.release()
    await asyncio.wait_for(acquire_both(first, second), timeout=5)
    assert (first.available, second.available) == (0, 0)
