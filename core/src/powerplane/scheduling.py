"""Fleet-call scheduling: bounded workers per endpoint, one deadline timer per batch.

``PowerHost.invoke_many`` and ``invoke_stream`` run many calls. Instead of one task per
node gathered at once, :func:`drain` runs a bounded pool of workers: at most
``per_key`` of them on one endpoint and ``total`` in all, each taking the next item of
its endpoint's queue when the last one finished. So the tasks alive at once are bounded by
the limits, not by the fleet size, and no call waits on a contended semaphore.
:class:`Limiter` is the host's bound per endpoint and in total: a counting semaphore whose
uncontended acquire is a plain call (no coroutine), so a call that does not wait pays for
no awaitable.

:class:`SharedDeadlines` bounds each call by the same ``timeout_s`` as
``asyncio.timeout`` would (the call's task is cancelled at its deadline and the
cancellation becomes :class:`TimeoutError` at the bound's exit), but every call of one
batch shares one loop timer: the calls all have the same timeout and start in order, so
their deadlines come in order, and the timer is armed for the earliest one still running.

:class:`Backoff` is the one wait before a retry, everywhere one waits (a throttled cloud
call, the Kubernetes operator's reads and watches, a Metal3 annotation's removal):
exponential from ``base_s``, capped at ``max_s``, with full jitter above the first wait (each
wait drawn uniformly between ``base_s`` and the capped doubling, so replicas that failed
together do not come back together, and no wait is shorter than the first). The draw is
injectable (``draw``) for a test that wants the ceiling or the floor. A loop keeps where it
is in :class:`Retrying` (:meth:`Backoff.retrying`): the next wait, drawn once and logged
before it is waited out, a failure moving it on and a success starting it over.

The garbage collector is not touched here (nor anywhere in library code): an application
that embeds the host keeps its own settings. The CLI's process tunes it once for the whole
command (:func:`powerplane.cli._common.tune_gc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

__all__ = ["Backoff", "Limiter", "Retrying", "SharedDeadlines", "acquire_both", "drain",
           "run_workers", "slots_of", "try_both"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

_ENTERED, _EXPIRING, _EXPIRED, _EXITED = range(4)


class _Bound:
    """One call's deadline inside a :class:`SharedDeadlines` (a ``with`` block)."""

    __slots__ = ("_cancelling", "_owner", "_state", "_task", "deadline")

    def __init__(self, owner: SharedDeadlines) -> None:
        self._owner = owner
        self._state = _EXITED
        self.deadline = 0.0

    def __enter__(self) -> _Bound:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline bounds a call inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._state = _ENTERED
        self.deadline = self._owner.loop.time() + self._owner.timeout
        self._owner._add(self)
        return self

    def _expire(self) -> None:
        self._state = _EXPIRING
        self._task.cancel()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state == _EXPIRING:
            self._state = _EXPIRED
            # as asyncio.timeout: only our own cancellation becomes a timeout
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc
        else:
            self._state = _EXITED


class SharedDeadlines:
    """Per-call deadlines of ``timeout`` seconds that share one loop timer.

    ``with deadlines.bound(): await call()`` behaves like ``async with
    asyncio.timeout(timeout)``: at the deadline the task is cancelled and the block raises
    :class:`TimeoutError` (a cancellation from elsewhere stays a cancellation). Every
    bound uses the same timeout and they are entered in time order, so the deadlines are
    in order: one timer, armed for the earliest call still running, serves them all.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self._pending: deque[_Bound] = deque()
        self._handle: asyncio.TimerHandle | None = None

    def bound(self) -> _Bound:
        """A deadline for one call, starting when its ``with`` block is entered."""
        return _Bound(self)

    def _add(self, bound: _Bound) -> None:
        pending = self._pending
        while pending and pending[0]._state != _ENTERED:  # calls that finished
            pending.popleft()
        pending.append(bound)
        if self._handle is None:
            self._arm()

    def _arm(self) -> None:
        pending = self._pending
        while pending and pending[0]._state != _ENTERED:
            pending.popleft()
        self._handle = (self.loop.call_at(pending[0].deadline, self._fire)
                        if pending else None)

    def _fire(self) -> None:
        now = self.loop.time()
        pending = self._pending
        while pending and pending[0].deadline <= now:
            bound = pending.popleft()
            if bound._state == _ENTERED:
                bound._expire()
        self._arm()

    def close(self) -> None:
        """Stop the timer (every call of the batch has ended)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._pending.clear()


class Limiter:
    """A counting bound, first come first served, like :class:`asyncio.Semaphore`.

    ``if not limiter.try_acquire(): await limiter.acquire()`` takes one unit;
    :meth:`release` gives it back (to the longest waiter first, handed over directly so no
    newcomer overtakes it). A waiter cancelled after the unit was handed to it passes the
    unit on, so none is lost. Loop-bound like every asyncio primitive: one event loop.
    """

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError("a limiter needs a bound of at least 1")
        self._value = value
        self._waiters: deque[asyncio.Future[None]] | None = None
        """Made on the first wait (one limiter per endpoint: most never wait)."""

    @property
    def available(self) -> int:
        """Units free now (0 while anyone waits)."""
        return 0 if self._waiters else self._value

    def try_acquire(self) -> bool:
        """Take a unit if one is free and nobody waits for one; never blocks."""
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a unit, waiting in line for one if none is free."""
        if self.try_acquire():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = deque()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # handed to us as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def release(self) -> None:
        """Give a unit back: to the longest waiter still waiting, else to the pool."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._value += 1


def try_both(first: Limiter, second: Limiter) -> bool:
    """Take a unit of each if both are free now (and nobody waits for either); else take
    neither. Never blocks: a call in flight with room at both bounds awaits nothing."""
    if first.try_acquire():
        if second.try_acquire():
            return True
        first.release()
    return False


async def acquire_both(first: Limiter, second: Limiter) -> None:
    """Take a unit of ``first`` then one of ``second``, waiting in line for each; if the wait
    for ``second`` ends in an error (a cancellation) the unit of ``first`` is given back.
    The slow path of :func:`try_both`::

        if not try_both(endpoint, total):
            await acquire_both(endpoint, total)
        try:
            ...  # the call
        finally:
            total.release()
            endpoint.release()
    """
    if not first.try_acquire():
        await first.acquire()
    if not second.try_acquire():
        try:
            await second.acquire()
        except BaseException:
            first.release()
            raise


async def drain(
    queues: Mapping[K, deque[T]],
    per_key: int,
    total: int,
    work: Callable[[K, T], Awaitable[None]],
) -> None:
    """Run ``work(key, item)`` for every item of every queue, bounded per key and in total.

    At most ``per_key`` items of one key and ``total`` items in all are worked on at once,
    by at most ``min(total, slots)`` worker tasks. Slots are handed out round-robin (the
    first slot of every key, then the second, ...), so every endpoint starts early; a
    worker drains its key's queue, then takes the next slot. ``work`` must not raise.
    """
    slots = slots_of(queues, per_key)

    async def worker() -> None:
        while slots:
            key = slots.popleft()
            queue = queues[key]
            while queue:
                await work(key, queue.popleft())

    await run_workers(min(total, len(slots)), worker)


def slots_of(queues: Mapping[K, deque[T]], per_key: int) -> deque[K]:
    """:func:`drain`'s worker slots: each key once per item up to ``per_key``, round-robin
    (the first slot of every key, then the second, ...). A worker takes a slot and works
    on its key's queue until it is empty, so no more than ``per_key`` work on one key."""
    depth = min(per_key, max((len(q) for q in queues.values()), default=0))
    return deque(key for rank in range(depth) for key, q in queues.items() if len(q) > rank)


async def run_workers(count: int, worker: Callable[[], Awaitable[None]]) -> None:
    """Run ``count`` copies of ``worker`` concurrently (one in the calling task)."""
    if count == 1:
        await worker()
    elif count > 1:
        await asyncio.gather(*(worker() for _ in range(count)))


@dataclass(frozen=True)
class Backoff:
    """How long to wait before each retry: exponential, capped, jittered (see the module
    docstring)."""

    base_s: float
    """The first wait; the ceiling doubles per failure in a row."""
    max_s: float
    """No wait is longer than this."""
    retries: int = 0
    """Attempts after the first, for a caller that gives up after so many (a throttled
    cloud call); a loop that tries until it is stopped leaves it alone."""
    draw: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    """A number in [0, 1) per wait: where between the floor and the ceiling it falls
    (``random.random``: jitter, not cryptography; a test passes a constant)."""

    def ceiling(self, attempt: int) -> float:
        """The longest wait before retry number ``attempt`` (0-based)."""
        if attempt >= 64:  # 2**64 times any base is past any cap
            return self.max_s
        return min(self.max_s, self.base_s * 2.0**attempt)

    def delay(self, attempt: int, hint: float | None = None) -> float:
        """The wait before retry number ``attempt`` (0-based): drawn between ``base_s`` and
        :meth:`ceiling` (``max_s`` alone when that is the smaller); a server's ``hint`` (a
        Retry-After) instead, capped, when given."""
        if hint is not None and hint >= 0:
            return min(hint, self.max_s)
        top = self.ceiling(attempt)
        floor = min(self.base_s, top)
        return floor + (top - floor) * self.draw()

    def retrying(self) -> Retrying:
        """Where one retry loop is: starts at the first wait."""
        return Retrying(self)


class Retrying:
    """One retry loop's place in its :class:`Backoff`: :attr:`next_s` is the wait before
    the next try (drawn once, so what is logged is what is waited), :meth:`failed` moves on
    after it was waited out, :meth:`reset` starts over after a success."""

    __slots__ = ("_next", "attempt", "backoff")

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.attempt = 0
        self._next: float | None = None

    @property
    def next_s(self) -> float:
        """The wait before the next try."""
        if self._next is None:
            self._next = self.backoff.delay(self.attempt)
        return self._next

    def failed(self) -> None:
        """One more failure in a row: the next wait is drawn under a doubled ceiling."""
        self.attempt += 1
        self._next = None

    def reset(self) -> None:
        """A success: the next failure waits the first wait again (cheap: at every event)."""
        if self.attempt or self._next is not None:
            self.attempt = 0
            self._next = None
