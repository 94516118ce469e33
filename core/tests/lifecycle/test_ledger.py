"""At most once rests on the dispatch ledger, not on a status anyone can write again.

The SQLite store's ledger (an append-only table) is written before every send; a status
that lost a dispatch, or claims one was shown not applied by evidence the ledger never
recorded, parks the maintenance for a person (``StatusRegressed``, the lost dispatch back as
``indeterminate``), is audited once, and causes no send. The status is rewritten here as
a stale backup or a hostile writer would: straight in the store's file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import ceremony

from powerplane.lifecycle import Lifecycle, Phase
from powerplane.lifecycle.ledger import DISPATCH, LedgerConflict
from powerplane.lifecycle.model import DispatchOutcome

FAST = {"settle_window_s": 0.2, "readback_window_s": 0.5}


def rewrite(lc: Lifecycle, name: str, change: Any) -> None:
    """Change the stored status of ``name`` by hand, as a restore or another writer would."""
    path = lc.store.path  # type: ignore[attr-defined]
    with sqlite3.connect(path) as db:
        body = json.loads(db.execute("SELECT body FROM maintenance WHERE name = ?",
                                     (name,)).fetchone()[0])
        change(body)
        body["resourceVersion"] += 1  # a coherent write, as the store's own would be
        db.execute("UPDATE maintenance SET body = ?, phase = ?, resource_version = ? "
                   "WHERE name = ?", (json.dumps(body), body["status"]["phase"],
                                      body["resourceVersion"], name))


async def test_every_dispatch_is_in_the_ledger_before_it_is_sent(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    [entry] = lc.store.ledger(done)  # type: ignore[attr-defined]
    [d] = done.status.dispatches
    assert (entry.kind, entry.verb, entry.attempt, entry.attempt_id) == (
        DISPATCH, "reboot", 1, d.attempt_id)
    assert entry.before is not None and entry.before.boot_marker == d.before.boot_marker  # type: ignore[union-attr]


async def test_a_status_that_lost_its_dispatch_parks_and_sends_nothing_again(
    open_lifecycle: Any,
) -> None:
    """The attack of the issue, in the embedded store: the phase set back to Drained and
    the dispatch history removed after the reboot was sent."""
    lc = await open_lifecycle()
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.POWERED_OFF
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1")]

    def back_to_drained(body: dict[str, Any]) -> None:
        body["status"]["phase"] = "Drained"
        body["status"]["dispatches"] = []
        body["status"]["conditions"].pop("PowerOffConfirmed", None)

    rewrite(lc, m.name, back_to_drained)
    await lc.run(max_passes=5)
    parked = lc.store.get(m.name)
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1")]  # never a second
    assert parked.phase is Phase.DRAINED
    regressed = parked.condition("StatusRegressed")
    assert regressed is not None and regressed.status == "True"
    assert "the status lost shutdown attempt 1" in regressed.message
    [d] = parked.status.dispatches
    assert d.outcome is DispatchOutcome.INDETERMINATE and d.before is not None
    assert parked.is_true("AwaitingResolution")
    records = [r for r in lc.store.audit("w1") if r.outcome == "regression"]
    assert len(records) == 1  # audited once, however many passes see it
    assert records[0].maintenance == m.name and "lost shutdown" in records[0].detail
    # a person resolves it as applied: it goes on from there, still one send
    await lc.resolve("w1", ceremony("w1"), applied=True)
    await lc.run(max_passes=5)
    after = lc.store.get(m.name)
    assert after.phase is Phase.POWERED_OFF
    assert not after.is_true("StatusRegressed")
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1")]


async def test_a_not_applied_no_evidence_recorded_is_never_sent_again(
    open_lifecycle: Any,
) -> None:
    """A status claiming the first attempt was shown not applied (the ledger never recorded
    such evidence) would send the verb again: it parks instead."""
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05,
                                       "boot_marker": False}, lifecycle=FAST,
                              cluster={"type": "simulated", "boot_id": False})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)  # sent, its answer lost, no marker: awaiting a person
    assert lc.store.get(m.name).status.dispatches[0].outcome is DispatchOutcome.INDETERMINATE

    def forged(body: dict[str, Any]) -> None:
        d = body["status"]["dispatches"][0]
        d["outcome"], d["settledBy"] = "not-applied", "evidence"

    rewrite(lc, m.name, forged)
    await lc.run(max_passes=5)
    parked = lc.store.get(m.name)
    assert [d[0] for d in lc.host.channel("lab").dispatches] == ["reboot"]
    assert parked.is_true("StatusRegressed")
    assert parked.status.dispatches[0].outcome is DispatchOutcome.INDETERMINATE


async def test_the_ledger_refuses_a_second_id_for_an_attempt_and_any_change(
    open_lifecycle: Any, tmp_path: Path,
) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    [d] = done.status.dispatches
    lc.store.record_dispatch(done, d)  # type: ignore[attr-defined]  # the same id: no-op
    other = d.model_copy(update={"attempt_id": "another"})
    with pytest.raises(LedgerConflict, match="may have been sent"):
        lc.store.record_dispatch(done, other)  # type: ignore[attr-defined]
    with sqlite3.connect(lc.store.path) as db:  # type: ignore[attr-defined]
        for sql in ("UPDATE dispatch_ledger SET attempt_id = 'x'", "DELETE FROM dispatch_ledger"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(sql)
