"""Worker threads for plain ``def`` channel methods: daemon threads, bounded, one pool per process.

The host runs a channel's plain ``def`` methods (a blocking library: sushy, pyghmi, boto3)
in worker threads. The threads of :class:`concurrent.futures.ThreadPoolExecutor` (and of
:func:`asyncio.to_thread`'s default executor) are joined by the interpreter at exit, so a
call the host has already given up on -- ``limits.timeout_s``, Ctrl-C, SIGTERM -- would hold
the process until the plugin's library returned, which for a device that never answers may
be never. :class:`WorkerPool` is the executor used instead:

* its threads are **daemon** threads, never registered with the interpreter's exit join:
  a process whose work is done exits, whatever a plugin's call is still blocked in;
* abandoning a thread loses nothing but the thread: once the host has given up on a call,
  :func:`powerplane.channel.about_to_send` raises in the thread still running it (the send
  gate is closed before the host reports the call as ended), so no state-changing request
  leaves after that;
* the threads are **bounded**. One pool serves the whole process (:func:`shared_pool`, used
  by every :class:`~powerplane.host.PowerHost`, by :func:`powerplane.channel.maybe_await`
  and, in the CLI, as the event loop's default executor). It runs at most
  :data:`MAX_WORKERS` calls at once, plus at most :data:`MAX_ABANDONED` threads still inside
  calls whose caller gave up (:func:`call` marks them; a call the plugin never returns from
  holds its thread for good). A long-running process -- a runner retrying a BMC that wedges
  its library -- therefore never holds more than ``MAX_WORKERS + MAX_ABANDONED`` worker
  threads. Once the abandoned ones reach their bound, new calls wait in the queue for a
  thread, and end under the host's ``limits.timeout_s`` as a
  :class:`~powerplane.errors.ChannelTimeout` with nothing sent; a warning is logged when that
  bound is first reached. A plugin's own connect and read timeouts are what normally return
  an abandoned thread to the pool.

A thread a plugin starts itself (its own ``ThreadPoolExecutor``) is the plugin's: the CLI
still exits on an interrupt without waiting for it (:mod:`powerplane.cli`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["MAX_ABANDONED", "MAX_WORKERS", "WorkerPool", "call", "loop_executor", "owns",
           "shared_pool"]

log = logging.getLogger("powerplane.workers")

T = TypeVar("T")

MAX_WORKERS = 64
"""Calls the process's pool runs at once (as many as the host's own executor ran before)."""
MAX_ABANDONED = 64
"""Threads the pool lets calls whose caller gave up keep, beyond :data:`MAX_WORKERS`."""

_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class WorkerPool(Executor):
    """An executor of daemon threads, started on demand, bounded (see the module docstring).

    ``max_workers`` calls run at once; :meth:`abandon` moves a running call out of that count,
    up to ``max_abandoned`` of them. Threads are never joined at interpreter exit.
    """

    def __init__(self, max_workers: int = MAX_WORKERS, max_abandoned: int = MAX_ABANDONED,
                 name: str = "powerplane-worker") -> None:
        if max_workers < 1 or max_abandoned < 0:
            raise ValueError("max_workers must be at least 1 and max_abandoned at least 0")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._abandoned: set[Future[Any]] = set()
        self._counter = 0
        self._shutdown = False
        self._warned = False

    # -- figures -------------------------------------------------------------------------
    @property
    def threads(self) -> int:
        """Worker threads alive now (idle, running, or held by abandoned calls)."""
        return len(self._threads)

    @property
    def abandoned(self) -> int:
        """Threads still inside a call whose caller gave up."""
        return len(self._abandoned)

    # -- Executor --------------------------------------------------------------------------
    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in a worker thread; its :class:`Future`."""
        future: Future[T] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if self._idle.acquire(blocking=False):
                return future  # an idle thread takes it
            self._grow()
        return future

    def _grow(self) -> None:
        """Start a thread for queued work where the bounds allow (the lock held)."""
        held = len(self._abandoned)
        if (len(self._threads) - held < self.max_workers
                and len(self._threads) < self.max_workers + self.max_abandoned):
            self._counter += 1
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"{self._name}-{self._counter}")
            self._threads.add(thread)
            thread.start()
        elif held >= self.max_abandoned and not self._warned:
            self._warned = True
            log.warning(
                "%d worker threads are held by calls the host gave up on (a plugin's call "
                "that does not return): further calls wait for a thread", held)

    def abandon(self, future: Future[Any]) -> None:
        """The caller gave up on ``future``: cancel it if it has not started, else count its
        thread as abandoned (it no longer counts against ``max_workers``, and a thread is
        started for work waiting behind it, within the bounds)."""
        if future.cancel():
            return
        with self._lock:
            if not future.done() and future not in self._abandoned:
                self._abandoned.add(future)
                if not self._queue.empty():
                    self._grow()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; idle threads end. ``wait`` joins threads not held by an
        abandoned call. ``cancel_futures`` cancels what is still queued."""
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()

    # -- the thread ------------------------------------------------------------------------
    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            item = self._queue.get()
            if item is None:
                with self._lock:
                    self._threads.discard(me)
                return
            future, fn, args, kwargs = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the caller's to see, as ThreadPoolExecutor does
                    future.set_exception(exc)
                    del exc
                else:
                    future.set_result(result)
                    del result
            del fn, args, kwargs
            with self._lock:
                self._abandoned.discard(future)
                if len(self._threads) - len(self._abandoned) > self.max_workers:
                    self._threads.discard(me)  # a surplus thread once its call returned
                    return
            del future
            self._idle.release()


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's one :class:`WorkerPool` (created on first use)."""
    global _POOL
    pool = _POOL
    if pool is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = WorkerPool()
            pool = _POOL
    return pool


def owns(thread: threading.Thread) -> bool:
    """Whether ``thread`` is one of :func:`shared_pool`'s (the interpreter never waits for
    those; a thread a plugin starts from one inherits its daemon flag, not this)."""
    pool = _POOL
    return pool is not None and thread in pool._threads


async def call(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of :func:`shared_pool`, in a copy of this context (so the
    thread sees this call's :class:`~powerplane.channel.SendGate`).

    Cancelled (a timeout, an interrupt), it returns at once: a call not started yet never
    starts; one running is abandoned to its thread (see the module docstring).
    """
    pool = shared_pool()
    future = pool.submit(contextvars.copy_context().run, fn, *args)
    try:
        return await asyncio.wrap_future(future)
    except BaseException:
        if not future.done():
            pool.abandon(future)
        raise


class _LoopExecutor(ThreadPoolExecutor):
    """An event loop's default executor backed by :func:`shared_pool`: ``shutdown`` (which
    :func:`asyncio.run` calls and waits for) returns at once instead of joining threads.

    A :class:`ThreadPoolExecutor` only because ``loop.set_default_executor`` accepts nothing
    else: it starts none of that class's threads (every call goes to the shared pool)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="powerplane-unused")

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return shared_pool().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


def loop_executor() -> Executor:
    """A default executor for an event loop (``loop.set_default_executor``) that never holds
    the loop's shutdown or the process: :func:`asyncio.to_thread` and
    ``run_in_executor(None, ...)`` run in :func:`shared_pool`."""
    return _LoopExecutor()
