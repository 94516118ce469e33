"""One asyncio event loop on a background thread, so synchronous pytest checks can drive
async channels whose clients stay bound to the loop that created them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "OuterTimeout"]

T = TypeVar("T")

LOOP_GRACE_S = 1.0
"""How much longer than a call's bound :meth:`LoopThread.run` waits when the loop does not
answer at all (a channel blocked it): then the call is an :class:`OuterTimeout` too."""


class OuterTimeout(Exception):
    """The suite's own bound on a call ran out: the channel hung past every bound it has."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"no answer within the suite's bound of {seconds:g} s")


class LoopThread:
    """A running event loop on a daemon thread; :meth:`run` blocks on one coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._main, name="powerplane-conformance-loop", daemon=True
        )
        self._thread.start()

    def _main(self) -> None:
        from powerplane.workers import loop_executor

        # the loop's default executor (asyncio.to_thread in a plugin, a resolver lookup)
        # never holds the process at exit, as the CLI's own loop's
        self.loop.set_default_executor(loop_executor())
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it; :class:`OuterTimeout` after ``timeout``."""

        async def bounded() -> T:
            if timeout is None:
                return await coro
            try:
                return await asyncio.wait_for(coro, timeout)
            except TimeoutError:
                raise OuterTimeout(timeout) from None

        future = asyncio.run_coroutine_threadsafe(bounded(), self.loop)
        try:
            # the bound is kept on the loop; this one holds when the loop itself is stuck
            # (a channel that blocks it in a synchronous call)
            return future.result(None if timeout is None else timeout + LOOP_GRACE_S)
        except concurrent.futures.CancelledError:
            raise OuterTimeout(timeout or 0.0) from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise OuterTimeout(timeout or 0.0) from None
        except KeyboardInterrupt:
            future.cancel()  # interrupted: the call in flight is cancelled, not left running
            raise

    def close(self) -> None:
        """Stop the loop and its thread (waits for worker threads briefly)."""
        if self.loop.is_closed():
            return

        async def drain() -> None:
            await self.loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(drain(), self.loop).result(5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
