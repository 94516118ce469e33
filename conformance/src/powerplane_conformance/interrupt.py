"""SIGINT and SIGTERM during a conformance run: both stop it as an interruption.

Python turns SIGINT into :class:`KeyboardInterrupt`, and pytest then stops the run (its
status INTERRUPTED) and tears the fixtures down; SIGTERM would kill the process instead,
before anything is written. While a run is under way (:func:`signals_interrupt`, used by
``powerplane conformance`` and, once it has collected checks, by the suite's pytest plugin)
both raise :class:`KeyboardInterrupt` in the main thread, and the signal is remembered
(:func:`received`), so that ``results.json`` can say which one ended the run. A signal the
parent process set to be ignored (a background job of a non-interactive shell ignores
SIGINT) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["SIGNALS", "received", "reset", "signals_interrupt"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a run."""

_received: list[str] = []


def received() -> str | None:
    """The name of the first signal that interrupted the run (``SIGINT``), or None."""
    return _received[0] if _received else None


def reset() -> None:
    """Forget the signals received (a new run starts)."""
    _received.clear()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`KeyboardInterrupt` (and are remembered) inside the
    block; the previous handlers are back after it. Outside the main thread: nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before: dict[signal.Signals, object] = {}
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is signal.SIG_IGN or current is _interrupt:
            continue
        before[sig] = current
        signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
