"""Denials counted, never dropped: repeats of one denial folded into one record with a count.

A denial is written to the trail the first time it happens (:class:`DenialFolder.fold`
returns its record). The same denial again while its **window** is open is not written;
it is counted, and the count is written as one record, a **fold**, whose ``detail`` reads::

    and 57 more of servers:reboot by eve since 10:02:07

(``since``: the time of the first repeat counted, UTC; a date is added when the fold is
written on another day). A fold is written, whichever comes first:

- when its window closes (:meth:`DenialFolder.due`: ``window_s`` after the first repeat
  it counts; the authority asks on every denial and record, and a long-running surface
  asks on a timer);
- at the next record the authority writes (a distinct denial, an accepted direct act):
  the trail's order stays the order things happened in (a maintenance's record, which its
  store writes in the request's own transaction, does not wait for it: a fold written
  after it is stamped no earlier than it, as every entry of a chained trail is);
- when its key leaves the bounded memory (:attr:`DenialFolder.max_keys`, least recently
  seen first): evicted, its count is written, never lost;
- at close (:meth:`DenialFolder.flush`).

**What makes two denials the same** (the key): the identity (the user and who vouched
for them, or the bucket the caller gives, such as an unauthenticated caller's address),
the action, the rule that denied it, and **the node**. The node is part of the key
because a denial is about one node: ``audit --node``, the Servers surface's audit view and
the filter that hides the nodes a reader may not read all go by the record's node, and an
inspector asks "who tried to reboot node-7"; a fold across nodes could name none of them
(or an unbounded list). A sweep of many nodes thus writes one record per node and window,
in proportion to what was asked (as the accepted acts of a fleet call are); memory stays
bounded by :attr:`~DenialFolder.max_keys` whatever the sweep. The requester's ``reason``
is not part of the key (free text: varying it would defeat folding); a fold keeps the
reason of the first repeat it counts.

Each record counts denials: a first record one, a fold the number in its detail
(:func:`denials_in`); over a trail they sum to every denial made.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from powerplane.authority.audit import AuditRecord, now

__all__ = ["DenialFolder", "denials_in"]

_FOLD = re.compile(r"^and (\d+) more of \S+ by .* since \S+(?: \S+)?$")

Key = tuple[str, str, str, str, str]
"""(who, via, action, rule, node)."""


@dataclass(slots=True)
class _Seen:
    """One key's state: when its last record was written, and the repeats counted since."""

    written: float
    """The monotonic time its last record (first or fold) was written."""
    template: AuditRecord | None = None
    """The first repeat counted (its reason and identity are the fold's), or None."""
    count: int = 0
    since: dt.datetime | None = None
    since_m: float = 0.0
    last: dt.datetime | None = None


def denials_in(record: AuditRecord) -> int:
    """How many denials ``record`` stands for: a fold the number in its detail, any other
    denial one, an accepted act none."""
    if record.outcome != "denied":
        return 0
    found = _FOLD.match(record.detail)
    return int(found.group(1)) if found else 1


class DenialFolder:
    """Folds repeats of one denial (see the module docstring). Thread-safe.

    ``window_s``: how long a fold counts before it is written; ``max_keys``: how many
    distinct denials are remembered (each a few hundred bytes); ``clock`` (monotonic) and
    ``wall`` (aware UTC) are for tests.
    """

    def __init__(self, window_s: float = 60.0, max_keys: int = 4096, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], dt.datetime] = now) -> None:
        if window_s <= 0 or max_keys < 1:
            raise ValueError("a denial folder needs window_s > 0 and max_keys >= 1")
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        self.wall = wall
        self._seen: OrderedDict[Key, _Seen] = OrderedDict()
        """Every key remembered, least recently seen first (at most ``max_keys``)."""
        self._pending: OrderedDict[Key, None] = OrderedDict()
        """The keys with repeats counted, in the order their first repeat came (so the
        ones whose window closed are at the front)."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many distinct denials are remembered."""
        return len(self._seen)

    @property
    def pending(self) -> int:
        """How many folds are counting (written by :meth:`due` or :meth:`flush`)."""
        return len(self._pending)

    def fold(self, record: AuditRecord, who: str | None = None) -> list[AuditRecord]:
        """The records to write for one denial, in order: the folds it makes due (their
        window closed, their key evicted; all of them when this one is written: the trail
        keeps its order), then this denial's own record when it is not a repeat (empty
        when it was counted). ``who``: the identity part of the key (default the
        record's actor)."""
        key: Key = (who or record.actor, record.via, record.action.value, record.rule,
                    record.node)
        with self._lock:
            t = self.clock()
            out = self._due(t)
            seen = self._seen.get(key)
            if seen is not None and (seen.count or t - seen.written < self.window_s):
                self._seen.move_to_end(key)
                if seen.count == 0:
                    seen.template, seen.since, seen.since_m = record, record.at, t
                    self._pending[key] = None
                seen.count += 1
                seen.last = record.at
                return out
            # written: every fold counting goes first (the trail's order)
            out.extend(self._take_all())
            if seen is None:
                self._seen[key] = _Seen(written=t)
                if len(self._seen) > self.max_keys:
                    self._seen.popitem(last=False)  # nothing pending: all taken above
            else:
                seen.written = t
                self._seen.move_to_end(key)
            out.append(record)
            return out

    def due(self) -> list[AuditRecord]:
        """The folds whose window has closed (and only those)."""
        with self._lock:
            return self._due(self.clock())

    def take(self) -> list[AuditRecord]:
        """Every fold counting, whether its window closed or not (before another record
        is written, so the trail keeps its order)."""
        with self._lock:
            return self._take_all()

    def flush(self) -> list[AuditRecord]:
        """:meth:`take`, and forget every key (at close)."""
        with self._lock:
            out = self._take_all()
            self._seen.clear()
            return out

    def _due(self, t: float) -> list[AuditRecord]:
        out: list[AuditRecord] = []
        while self._pending:
            key = next(iter(self._pending))
            closed = self._seen[key].since_m + self.window_s
            if t < closed:
                break
            out.append(self._write(key, closed))  # as if written when its window closed
        return out

    def _take_all(self) -> list[AuditRecord]:
        t = self.clock()
        return [self._write(key, t) for key in list(self._pending)]

    def _write(self, key: Key, t: float) -> AuditRecord:
        """The fold of ``key``, its count reset (the key stays remembered)."""
        del self._pending[key]
        seen = self._seen[key]
        assert seen.template is not None and seen.since is not None
        record = _fold_record(seen.template, seen.count, seen.since, seen.last or seen.since,
                              self.wall())
        seen.count, seen.template, seen.since, seen.last, seen.written = 0, None, None, None, t
        return record


def _fold_record(first: AuditRecord, count: int, since: dt.datetime, last: dt.datetime,
                 today: dt.datetime) -> AuditRecord:
    since = since.astimezone(dt.UTC) if since.tzinfo else since.replace(tzinfo=dt.UTC)
    when = (f"{since:%H:%M:%S}" if since.date() == today.astimezone(dt.UTC).date()
            else f"{since:%Y-%m-%d %H:%M:%S}")
    detail = f"and {count} more of {first.action.value} by {first.actor} since {when}"
    return replace(first, at=last, detail=detail)
