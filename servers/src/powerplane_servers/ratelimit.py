"""The per-identity rate limit: a token bucket per identity, in bounded memory.

Every API request that costs work takes a token from its caller's bucket (the
authenticated identity; an unauthenticated caller's address); an empty bucket is 429 with
``Retry-After``, and the refusal is audited, its repeats folded into one record with a
count (:mod:`powerplane.authority.folding`). The buckets live in an LRU of at most
``max_keys``: the least recently used forgotten first (a forgotten identity starts again
with a full bucket, as a new one would), so no stream of identities grows the process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket per key: ``burst`` at once, then ``per_minute``; at most ``max_keys``
    buckets (least recently used forgotten first)."""

    def __init__(self, per_minute: float, burst: int, *, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0 or burst < 1 or max_keys < 1:
            raise ValueError("a rate limit needs per_minute > 0, burst >= 1, max_keys >= 1")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> float:
        """0 when admitted (a token taken); else the seconds to wait (nothing taken)."""
        return self._ask(key, take=True)

    def wait(self, key: str) -> float:
        """What :meth:`take` would answer, taking nothing: 0 when a token is there."""
        return self._ask(key, take=False)

    def _ask(self, key: str, *, take: bool) -> float:
        with self._lock:
            now = self.clock()
            found = self._buckets.get(key)
            if found is None:
                if not take:
                    return 0.0
                tokens, last = self.burst, now
            else:
                tokens, last = found
                tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                self._buckets.move_to_end(key)
                return (1.0 - tokens) / self.rate
            if take:
                self._buckets[key] = (tokens - 1.0, now)
                self._buckets.move_to_end(key)
                while len(self._buckets) > self.max_keys:
                    self._buckets.popitem(last=False)
            return 0.0

    def describe(self) -> str:
        """The limit in words (the rule of a refusal's audit record: one per limit, so
        its repeats fold)."""
        return (f"over the Servers surface's rate limit ({self.per_minute:g} requests a "
                f"minute, bursts of {self.burst:.0f})")
