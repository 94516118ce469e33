"""Backoff for throttled calls: exponential, capped, with jitter.

Throttling is retried only where repeating the request cannot do harm: reads, and
writes whose repetition leaves the same end state (stop, start, terminate). A reboot
is never repeated; a throttled reboot is reported as refused.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait before repeating a throttled call."""

    retries: int = 4
    """Attempts after the first (0: never retry)."""
    base_s: float = 0.5
    """The first delay; each later one doubles."""
    max_s: float = 8.0
    """No single delay is longer than this."""

    def delay(self, attempt: int, hint: float | None = None) -> float:
        """The wait before retry number ``attempt`` (0-based); ``hint`` is a Retry-After."""
        if hint is not None and hint >= 0:
            return min(hint, self.max_s)
        ceiling = min(self.max_s, self.base_s * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)  # jitter, not crypto
