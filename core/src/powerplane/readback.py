"""Confirming a power-off by readback: ``PowerOffConfirmed`` True, False or Unknown.

After a shutdown is accepted, the one machine is read back at its own cadence,
with backoff, until it reads ``off`` (True), the window closes or no channel of the
node can observe power off (Unknown). While it is still reading the status is False.
Nothing waits on it unless it chooses to: the maintenance phase never does.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Generator
from enum import Enum
from typing import Any

from powerplane.channel import PowerState

__all__ = ["PowerOffConfirmed", "PowerOffWatch"]


class PowerOffConfirmed(str, Enum):
    """The ``PowerOffConfirmed`` condition."""

    TRUE = "True"
    """The machine was observed off."""
    FALSE = "False"
    """The readback is still running."""
    UNKNOWN = "Unknown"
    """The readback settled without observing off: the channel cannot see, or the window closed."""

    def __str__(self) -> str:
        return self.value


Reader = Callable[[], Awaitable[Any]]  # returns an object with .state and .detail


class PowerOffWatch:
    """A running readback of one machine after an accepted shutdown.

    ``status`` is False while it runs; ``await watch`` gives the settled value.
    """

    def __init__(
        self,
        read: Reader,
        accepted_at: dt.datetime,
        window: float,
        cadence: float,
        *,
        can_see_off: bool = True,
        max_cadence: float | None = None,
    ) -> None:
        self.accepted_at = accepted_at
        self.window = window
        self.cadence = cadence
        self.max_cadence = max_cadence if max_cadence is not None else max(cadence * 8, cadence)
        self.status = PowerOffConfirmed.FALSE
        self.detail = "reading back"
        self.readings = 0
        self.observed_at: dt.datetime | None = None
        self._read = read
        self._can_see_off = can_see_off
        self._task: asyncio.Task[PowerOffConfirmed] = asyncio.get_running_loop().create_task(
            self._run()
        )

    def _remaining(self) -> float:
        now = dt.datetime.now(dt.UTC)
        accepted = self.accepted_at
        if accepted.tzinfo is None:
            accepted = accepted.replace(tzinfo=dt.UTC)
        return self.window - (now - accepted).total_seconds()

    async def _run(self) -> PowerOffConfirmed:
        if not self._can_see_off:
            self.status = PowerOffConfirmed.UNKNOWN
            self.detail = "no channel of this node can observe power off"
            return self.status
        delay = self.cadence
        last = ""
        while True:
            try:
                reading = await self._read()
                self.readings += 1
                if reading.state is PowerState.OFF:
                    self.status = PowerOffConfirmed.TRUE
                    self.observed_at = dt.datetime.now(dt.UTC)
                    self.detail = "observed off"
                    return self.status
                last = f"last reading {reading.state}" + (
                    f" ({reading.detail})" if reading.detail else ""
                )
            except Exception as exc:  # a failed read is a reading of nothing
                self.readings += 1
                last = f"last read failed: {exc}"
            remaining = self._remaining()
            if remaining <= 0:
                self.status = PowerOffConfirmed.UNKNOWN
                self.detail = f"window of {self.window:g} s closed; {last}"
                return self.status
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, self.max_cadence)

    def cancel(self) -> None:
        """Stop reading (the status stays as it is)."""
        self._task.cancel()

    def done(self) -> bool:
        return self._task.done()

    def __await__(self) -> Generator[Any, None, PowerOffConfirmed]:
        return self._task.__await__()
