"""The reconciler reads a maintenance from the store when it starts on it and after a conflict,
not again after each of its own writes: the write leaves it at the store's current version,
and anyone else's change in between makes its next write a conflict (and a dispatch's
record-before-send with it), so nothing is sent from a stale copy."""

from __future__ import annotations

from typing import Any

from lifecycle_support import ceremony

from powerplane.lifecycle import Phase


def _count(store: Any) -> dict[str, int]:
    counts = {"get": 0, "update": 0}
    get, update = store.get, store.update

    def counted_get(*a: Any, **k: Any) -> Any:
        counts["get"] += 1
        return get(*a, **k)

    def counted_update(*a: Any, **k: Any) -> Any:
        counts["update"] += 1
        return update(*a, **k)

    store.get, store.update = counted_get, counted_update
    return counts


async def test_each_reconcile_reads_once_however_many_phases_it_writes(
        open_lifecycle: Any) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a", "b"]}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    counts = _count(lc.store)
    calls = {"reconcile": 0}
    reconcile = lc.reconciler.reconcile

    async def counted(*a: Any, **k: Any) -> Any:
        calls["reconcile"] += 1
        return await reconcile(*a, **k)

    lc.reconciler.reconcile = counted
    await lc.run(until_idle=True)
    lc.reconciler.reconcile = reconcile
    reads, writes = counts["get"], counts["update"]
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    # a write per phase the flow stops in: Cordoned, Drained with the dispatch's record,
    # Complete (Draining, Rebooting and Returning too where the pass waits in them)
    assert writes >= 3
    # One read per reconcile (no conflict in a one-runner flow), not one per write.
    assert reads == calls["reconcile"], (reads, writes, calls)
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]


async def test_a_change_by_another_writer_is_read_before_anything_is_sent(
        open_lifecycle: Any) -> None:
    """Another runner's write between two steps: the next write conflicts, the reconciler
    reads again and continues from the store's version; one reboot in all."""
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a", "b"]}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    store = lc.store
    update = store.update
    moved = {"done": False}

    def update_then_someone_else(mm: Any, *a: Any, **k: Any) -> Any:
        out = update(mm, *a, **k)
        if not moved["done"] and mm.phase is Phase.DRAINING:
            moved["done"] = True
            other = store.get(mm.name)  # another runner's copy, written at once
            update(other)
        return out

    store.update = update_then_someone_else
    await lc.run(until_idle=True)
    done = store.get(m.name)
    assert moved["done"]
    assert done.phase is Phase.COMPLETE
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]
