"""What a maintenance costs the reconciler and the store, counted (never timed).

* The reconciler tells whether a step changed anything from the status alone (a step
  never touches the spec, the name or the creation time), taken as plain values (equal
  exactly when its JSON is, at every step of every flow; sharing nothing with the
  maintenance) once when the maintenance is read and once after each step; what it wrote
  is the next step's starting point, not taken again. Every change is still written, none
  twice.
* The store's ``active_phases`` (asked before every step) reads its rows once and then
  carries this connection's own writes into them; a commit by any other connection
  (``PRAGMA data_version``) makes it read them again.
* A maintenance update without an audit record is one autocommit statement: a
  version that moved is still a conflict, a lock still waits ``busy_timeout_s`` and then
  fails clearly, changing nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import ceremony

from powerplane.lifecycle import Phase, Result
from powerplane.lifecycle.audit import Action, AuditRecord
from powerplane.lifecycle.model import MaintenanceSpec, MaintenanceStatus, NodeMaintenance
from powerplane.lifecycle.store import Store, StoreConflict, StoreError


def _count_dumps(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"status": 0, "status_json": 0, "whole": 0}
    status_dump = MaintenanceStatus.model_dump
    status_json = MaintenanceStatus.model_dump_json
    whole_dump = NodeMaintenance.model_dump_json

    def status(self: Any, *a: Any, **k: Any) -> Any:
        counts["status"] += 1
        return status_dump(self, *a, **k)

    def json_of_status(self: Any, *a: Any, **k: Any) -> str:
        counts["status_json"] += 1
        return status_json(self, *a, **k)

    def whole(self: Any, *a: Any, **k: Any) -> str:
        counts["whole"] += 1
        return whole_dump(self, *a, **k)

    monkeypatch.setattr(MaintenanceStatus, "model_dump", status)
    monkeypatch.setattr(MaintenanceStatus, "model_dump_json", json_of_status)
    monkeypatch.setattr(NodeMaintenance, "model_dump_json", whole)
    return counts


async def test_a_reconcile_dumps_the_status_once_per_step_and_the_store_once_per_write(
        open_lifecycle: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a", "b"]}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    steps = {"n": 0}
    step = lc.reconciler._step

    async def counted_step(mm: Any) -> Any:
        steps["n"] += 1
        return await step(mm)

    monkeypatch.setattr(lc.reconciler, "_step", counted_step)
    writes_before = lc.store.writes
    counts = _count_dumps(monkeypatch)
    reconciles = 1
    while await lc.reconcile(m.name) is not Result.DONE:
        reconciles += 1
        await asyncio.sleep(lc.config.tick_s)
    writes = lc.store.writes - writes_before
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    # a write per phase the flow stops in: Cordoned, Drained with the dispatch's record,
    # Complete (Draining, Rebooting and Returning too where the pass waits in them)
    assert steps["n"] >= 6 and writes >= 3, writes
    # taken once as read (each reconcile reads it once: no conflict here) and once after
    # each step, as plain values, never as JSON; the whole maintenance dumped to JSON only
    # as the store writes it
    assert counts == {"status": steps["n"] + reconciles, "status_json": 0,
                      "whole": writes}, (counts, steps, reconciles, writes)


@pytest.mark.parametrize(("intent", "then"), [
    ("reboot", None), ("shutdown", "return"), ("drain", "abandon"), ("cordon", "return"),
])
async def test_a_step_changes_only_the_status_and_every_change_is_written_once(
        open_lifecycle: Any, monkeypatch: pytest.MonkeyPatch, intent: str,
        then: str | None) -> None:
    """The premises of comparing snapshots of the status alone: across each flow, no step
    changes the spec, the name or the creation time (the store moves the version); at
    every step the snapshots before and after are equal exactly when the status's JSON is;
    every status a step leaves is written, and no write repeats the one before it."""
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a", "b"]}})
    step = lc.reconciler._step
    exclude = {"status", "resource_version"}  # the version is the store's to move
    compared = {"same": 0, "changed": 0}

    async def checked_step(mm: Any) -> Any:
        outside = mm.model_dump_json(exclude=exclude)
        snap, body = mm.status.model_dump(), mm.status.model_dump_json()
        try:
            return await step(mm)
        finally:
            assert mm.model_dump_json(exclude=exclude) == outside
            same = mm.status.model_dump_json() == body
            assert (mm.status.model_dump() == snap) is same, (snap, body)
            compared["same" if same else "changed"] += 1

    monkeypatch.setattr(lc.reconciler, "_step", checked_step)
    written: list[tuple[Phase, str]] = []
    lc.store.after_write = lambda mm: written.append(
        (mm.phase, mm.model_dump_json(exclude={"resource_version"})))
    m = await lc.request("w1", intent, ceremony("w1"))
    await lc.run(until_idle=True)
    if then == "return":
        await lc.return_to_service("w1", ceremony("w1"), machine_on=False)
    elif then == "abandon":
        await lc.abandon("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE, done.status.history
    # the last state is written, and no write repeats the one before it
    assert written[-1][1] == done.model_dump_json(exclude={"resource_version"})
    bodies = [body for _, body in written]
    assert all(a != b for a, b in itertools.pairwise(bodies)), "a repeated write"
    # every phase it went through was written as it was reached, but a phase the pass only
    # passed through, written with the next (Draining where the pods left at once,
    # Rebooting where the node was back at once, the Returning of an observed reboot): each
    # is in the history, in order
    phases = [phase for phase, _ in written]
    reached = [p for i, p in enumerate(phases) if i == 0 or p is not phases[i - 1]]
    history = [t.to for t in done.status.history]
    assert set(history) - set(reached) <= {Phase.DRAINING, Phase.REBOOTING,
                                           Phase.RETURNING}, history
    assert [p for p in history if p in reached] == reached[1:]
    assert compared["changed"] >= len(done.status.history), compared


async def test_a_snapshot_of_the_status_shares_nothing_with_it(open_lifecycle: Any) -> None:
    """What the reconciler compares against cannot move with the maintenance: a step's
    change in place (a condition's message, a dispatch's outcome, a history entry) shows."""
    lc = await open_lifecycle()
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    snap = done.status.model_dump()
    assert done.status.model_dump() == snap
    done.status.conditions["Cordoned"].message = "changed in place"
    assert done.status.model_dump() != snap
    done = lc.store.get(m.name)
    snap = done.status.model_dump()
    done.status.dispatches[0].detail = "changed in place"
    assert done.status.model_dump() != snap
    done = lc.store.get(m.name)
    snap = done.status.model_dump()
    done.status.history[-1].why = "changed in place"
    assert done.status.model_dump() != snap


def _maintenance(name: str, node: str) -> NodeMaintenance:
    return NodeMaintenance(name=name, spec=MaintenanceSpec(
        node=node, intent="reboot", reason="replace the PSU in slot 2", requested_by="a"))


def _selects(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    return seen


def test_active_phases_carries_its_own_writes_without_reading_the_rows_again(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    a = store.create(_maintenance("a", "n1"))
    store.create(_maintenance("b", "n2"))
    assert sorted(store.active_phases()) == [("a", "n1", Phase.REQUESTED),
                                             ("b", "n2", Phase.REQUESTED)]
    seen = _selects(store)
    a.status.phase = Phase.CORDONED
    store.update(a)
    store.create(_maintenance("c", "n3"))
    assert sorted(store.active_phases()) == [("a", "n1", Phase.CORDONED),
                                             ("b", "n2", Phase.REQUESTED),
                                             ("c", "n3", Phase.REQUESTED)]
    a.status.phase = Phase.COMPLETE
    store.update(a)
    assert sorted(store.active_phases()) == [("b", "n2", Phase.REQUESTED),
                                             ("c", "n3", Phase.REQUESTED)]
    stale = store.get("b")
    store.update(store.get("b"))
    stale.status.phase = Phase.FAILED
    with pytest.raises(StoreConflict):
        store.update(stale)  # written by nobody: the rows stay as they are
    assert sorted(store.active_phases()) == [("b", "n2", Phase.REQUESTED),
                                             ("c", "n3", Phase.REQUESTED)]
    assert not [s for s in seen if "FROM maintenance WHERE active" in s], seen
    # and what it carried is what a fresh read finds
    assert sorted(Store(tmp_path / "s.db").active_phases()) == sorted(store.active_phases())
    store.close()


def test_active_phases_reads_again_after_a_commit_by_another_connection(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create(_maintenance("a", "n1"))
    assert store.active_phases() == [("a", "n1", Phase.REQUESTED)]
    other = Store(tmp_path / "s.db")  # another runner (another connection to the file)
    b = other.create(_maintenance("b", "n2"))
    assert sorted(store.active_phases()) == [("a", "n1", Phase.REQUESTED),
                                             ("b", "n2", Phase.REQUESTED)]
    b.status.phase = Phase.DRAINING
    other.update(b)
    assert ("b", "n2", Phase.DRAINING) in store.active_phases()
    raw = sqlite3.connect(tmp_path / "s.db", isolation_level=None)  # any writer at all
    raw.execute("UPDATE maintenance SET active = 0, phase = 'Failed' WHERE name = 'a'")
    raw.close()
    assert store.active_phases() == [("b", "n2", Phase.DRAINING)]
    other.close()
    store.close()


def test_an_update_without_audit_is_one_statement_and_with_one_a_transaction(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    m = store.create(_maintenance("a", "n1"))
    seen = _selects(store)
    m.status.phase = Phase.CORDONED
    store.update(m)
    assert [s.split()[0] for s in seen] == ["UPDATE"], seen
    seen.clear()
    m.status.phase = Phase.DRAINING
    store.update(m, AuditRecord(actor="a", action=Action.ABANDON, reason="rack move today",
                                node="n1", maintenance="a"))
    # The trail's tail (one indexed row) is read inside the same transaction, so
    # two processes appending to one file still chain one after the other.
    assert [s.split()[0] for s in seen] == ["BEGIN", "UPDATE", "SELECT", "INSERT", "COMMIT"], seen
    got = store.get("a")
    assert (got.phase, got.resource_version, len(store.audit())) == (Phase.DRAINING, 3, 1)
    store.close()


def test_an_update_without_audit_waits_for_a_lock_then_fails_changing_nothing(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", busy_timeout_s=0.2)
    m = store.create(_maintenance("a", "n1"))
    assert store.active_phases() == [("a", "n1", Phase.REQUESTED)]
    holder = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        m.status.phase = Phase.CORDONED
        with pytest.raises(StoreError, match="database is locked"):
            store.update(m)
        assert m.resource_version == 1  # the version it read, for a retry
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.get("a").phase is Phase.REQUESTED
    assert store.active_phases() == [("a", "n1", Phase.REQUESTED)]
    store.update(m)
    assert store.active_phases() == [("a", "n1", Phase.CORDONED)]
    store.close()
