"""The dispatch ledger: at most once rests on records nobody can change, not on a status.

A maintenance's ``status`` says which power verbs were recorded and what became of them,
and the dispatcher decides from it whether to send. A status can be written again by
whoever may write it, or brought back from a backup: a status that lost a dispatch, or
that claims a verb was shown not applied, would make the dispatcher send that verb again.

A store that keeps a ledger (:class:`DispatchLedger`: the ``kubernetes`` store's
``MaintenanceDispatch`` objects, create-only and written by the executor alone; the
``sqlite`` store's append-only table) gives the dispatcher records that only grow:

* **before a verb is sent** (after its dispatch is in the status), the executor records it
  in the ledger (:meth:`DispatchLedger.record_dispatch`): one record per (maintenance,
  verb, attempt), created once. A record of that attempt already there with another attempt
  id means another runner, or a status brought back from before, recorded that attempt:
  :class:`LedgerConflict`, and nothing is sent;
* **before an attempt after the first**, the attempt before it must have been shown not
  applied by something the status cannot fake: this runner's own settle window (recorded
  then: :meth:`DispatchLedger.record_not_applied`), a ledger record of one, or a person's
  resolution (which the admission binds to its author);
* **at every read** by the executor, the status is held against the ledger
  (:func:`regressions`): a dispatch the ledger has and the status lost, or a "not applied
  by evidence" the ledger never recorded, is a regression. The maintenance then parks for a
  person with the evidence, as an indeterminate dispatch does (:func:`park`): the lost
  dispatch is put back as ``indeterminate``, ``StatusRegressed`` says what differed, and
  the regression is audited once. Nothing is sent until a person resolves it.

A store without a ledger (one that no one else can write) behaves as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from powerplane.errors import LifecycleError
from powerplane.lifecycle.model import (
    ConditionStatus,
    ConditionType,
    Dispatch,
    DispatchOutcome,
    Evidence,
    NodeMaintenance,
    set_condition,
)

__all__ = ["DISPATCH", "NOT_APPLIED", "DispatchLedger", "LedgerConflict", "LedgerEntry",
           "LedgerKind", "ledger_of", "park", "regressions", "unsent"]


class LedgerKind(str, Enum):
    """What a ledger entry records."""

    DISPATCH = "dispatch"
    """Recorded before a verb is sent."""
    NOT_APPLIED = "not-applied"
    """Recorded when evidence showed an attempt did not take effect."""

    def __str__(self) -> str:
        return self.value


DISPATCH = LedgerKind.DISPATCH
NOT_APPLIED = LedgerKind.NOT_APPLIED


class LedgerConflict(LifecycleError):
    """The ledger already holds this attempt of this verb under another attempt id: it may
    have been sent; it is not sent again (exit 1)."""


@dataclass(frozen=True)
class LedgerEntry:
    """One record of the ledger of a maintenance."""

    kind: LedgerKind
    """What it records."""
    verb: str
    attempt: int
    attempt_id: str
    at: dt.datetime
    """When it was recorded."""
    runner: str = ""
    before: Evidence | None = None
    """The evidence taken before the send (a dispatch entry)."""
    name: str = ""
    """Where the store keeps it (an object's name, a row's id), for a person to look at."""


@runtime_checkable
class DispatchLedger(Protocol):
    """A store's append-only record of dispatches (see the module docstring)."""

    def record_dispatch(self, m: NodeMaintenance, d: Dispatch) -> None:
        """Record ``d`` before it is sent (once: again with the same attempt id is a no-op);
        :class:`LedgerConflict` when this verb's attempt is recorded with another id."""
        ...

    def record_not_applied(self, m: NodeMaintenance, d: Dispatch) -> None:
        """Record that evidence showed ``d`` did not take effect (once)."""
        ...

    def ledger(self, m: NodeMaintenance) -> list[LedgerEntry]:
        """Every entry of ``m``'s ledger, oldest first."""
        ...


_SHOWN = ("evidence", "runner")
"""Who may have shown an attempt not applied in a way the ledger records (a person's
resolution is bound by the admission instead)."""


def unsent(entries: Sequence[LedgerEntry]) -> _Never:
    """What a status may call not applied without the ledger's word: an attempt the ledger
    shows not applied, or one it never recorded as dispatched (a verb leaves only after its
    entry is written, so that one never left)."""
    return _Never({(e.verb, e.attempt) for e in entries if e.kind is NOT_APPLIED},
                  {(e.verb, e.attempt) for e in entries if e.kind is DISPATCH})


@dataclass(frozen=True)
class _Never:
    shown: set[tuple[str, int]]
    dispatched: set[tuple[str, int]]

    def __contains__(self, key: object) -> bool:
        return key in self.shown or key not in self.dispatched


def ledger_of(store: object) -> DispatchLedger | None:
    """``store``'s ledger, or None when it keeps none."""
    return store if isinstance(store, DispatchLedger) else None


def regressions(m: NodeMaintenance, entries: Sequence[LedgerEntry]) -> list[str]:
    """What ``m``'s status contradicts in its ledger, in words (none: it agrees)."""
    found: list[str] = []
    by_id = {d.attempt_id: d for d in m.status.dispatches}
    shown = unsent(entries)
    for e in entries:
        if e.kind is not DISPATCH:
            continue
        d = by_id.get(e.attempt_id)
        if d is None:
            found.append(f"the status lost {e.verb} attempt {e.attempt} (attempt id "
                         f"{e.attempt_id}, recorded {e.at.isoformat()} by {e.runner or '?'}"
                         f"{', ledger ' + e.name if e.name else ''})")
        elif (d.verb, d.attempt) != (e.verb, e.attempt):
            found.append(f"the status has attempt id {e.attempt_id} as {d.verb} attempt "
                         f"{d.attempt}; the ledger as {e.verb} attempt {e.attempt}")
    for d in m.status.dispatches:
        if (d.outcome is DispatchOutcome.NOT_APPLIED and d.settled_by in _SHOWN
                and (d.verb, d.attempt) not in shown):
            found.append(f"the status says {d.verb} attempt {d.attempt} was shown not "
                         f"applied ({d.settled_by}), which the ledger never recorded")
    return found


def park(m: NodeMaintenance, entries: Sequence[LedgerEntry], problems: Sequence[str],
         now: dt.datetime) -> bool:
    """Park ``m`` for a person (see the module docstring): what the status lost is put back
    as ``indeterminate`` (with its ledger's evidence), a "not applied" the ledger does not
    know becomes ``indeterminate``, and ``StatusRegressed`` and ``AwaitingResolution``
    say what differed. True when this changed ``m`` (a regression not parked yet)."""
    by_id = {d.attempt_id: d for d in m.status.dispatches}
    shown = unsent(entries)
    why = "; ".join(problems)
    changed = False
    for e in entries:
        if e.kind is DISPATCH and e.attempt_id not in by_id:
            d = Dispatch(verb=e.verb, channel=None, attempt_id=e.attempt_id,
                         recorded_at=e.at, runner=e.runner, attempt=e.attempt,
                         before=e.before, outcome=DispatchOutcome.INDETERMINATE,
                         outcome_at=now, detail=f"put back from the ledger: {why}")
            m.status.dispatches.append(d)
            by_id[e.attempt_id] = d
            changed = True
    for d in m.status.dispatches:
        if (d.outcome is DispatchOutcome.NOT_APPLIED and d.settled_by in _SHOWN
                and (d.verb, d.attempt) not in shown):
            d.outcome, d.outcome_at, d.settled_by = DispatchOutcome.INDETERMINATE, now, ""
            d.detail = f"not applied by no recorded evidence: {why}"
            changed = True
    m.status.dispatches.sort(key=lambda x: x.recorded_at)
    regressed = m.condition(ConditionType.STATUS_REGRESSED)
    if changed or regressed is None or regressed.status is not ConditionStatus.TRUE:
        set_condition(m, ConditionType.STATUS_REGRESSED, ConditionStatus.TRUE, "Regressed",
                      f"the status contradicts the dispatch ledger: {why}; nothing is sent "
                      "until a person resolves it")
        set_condition(m, ConditionType.DISPATCH_INDETERMINATE, ConditionStatus.TRUE,
                      "StatusRegressed", why)
        set_condition(m, ConditionType.AWAITING_RESOLUTION, ConditionStatus.TRUE,
                      "StatusRegressed",
                      f"the status regressed ({why}). A person decides: powerplane "
                      f"maintenance resolve {m.node} --applied | --not-applied --reason TEXT "
                      f"--confirm-node {m.node}")
        return True
    return changed
