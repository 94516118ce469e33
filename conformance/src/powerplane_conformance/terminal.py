"""The terminal of a conformance run, one writer at a time.

The power plan's workers run side by side with the checks, and a machine whose channel
cannot power it on is brought back by a person at the rack, asked at the terminal. While
that prompt is open nothing else may write there: not a second prompt (two machines may
need a person at once; one person is asked one thing at a time), and not pytest's progress
output (a check's line, ``-v``'s test id, the percentage), which would cut into the
question being typed at. :data:`BY_HAND` is held for the prompt, and around each of pytest's
report writes by :mod:`powerplane_conformance.plugin`.
"""

from __future__ import annotations

import threading

__all__ = ["BY_HAND"]

BY_HAND = threading.Lock()
"""Held while a person is asked to power a machine on, and while pytest writes a report
line; the readback after a prompt is not held."""
