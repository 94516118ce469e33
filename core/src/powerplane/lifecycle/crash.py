"""Crash points: where the crash test kills the process, by name, with SIGKILL.

``POWERPLANE_CRASH_AT=phase:Drained,dispatch-recorded:reboot`` makes the process kill
itself with SIGKILL right after the named point is committed. Unset (always, outside the
crash test), every crash point is a no-op.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "crashpoint"]

ENV = "POWERPLANE_CRASH_AT"


def crashpoint(name: str) -> None:
    """Die here with SIGKILL when ``name`` is listed in ``$POWERPLANE_CRASH_AT``."""
    wanted = os.environ.get(ENV)
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
