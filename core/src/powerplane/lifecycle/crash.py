"""Crash points: where the crash test kills the process, by name, with SIGKILL.

``POWERPLANE_CRASH_AT=phase:Drained,dispatch-recorded:reboot`` makes the process kill
itself with SIGKILL right after the named point is committed. Unset (always, outside the
crash test), every crash point is a no-op. In-process tests may install a hook instead
(:func:`set_hook`) that raises at a named point, to model a crash without a subprocess.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["ENV", "crashpoint", "set_hook"]

ENV = "POWERPLANE_CRASH_AT"

_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Install (or with None remove) a function called at every crash point."""
    global _hook
    _hook = hook


def crashpoint(name: str) -> None:
    """Die here with SIGKILL when ``name`` is listed in ``$POWERPLANE_CRASH_AT``."""
    if _hook is not None:
        _hook(name)
    wanted = os.environ.get(ENV)
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
