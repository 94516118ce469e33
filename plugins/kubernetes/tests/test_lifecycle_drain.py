"""Drain on the kubernetes cluster port through the lifecycle's Reconciler, on kmock.

A budget that refuses keeps the maintenance in ``Draining`` with "blocked by PDB <name>"
(the eviction is asked again every pass: a 429 is never swallowed) and it proceeds once
the budget allows; the drain deadline fails it naming the pods still there. Every claim is
read off the store and the requests the API server received.
"""

from __future__ import annotations

from pathlib import Path

from lifecycle_kmock import EVICT, LONGHORN_W1, Clock, ceremony, open_cluster

from powerplane.lifecycle import Phase
from powerplane_kubernetes.testing.apiserver import PODS, KubeApiServer

PDB_CLUSTER = {
    "pods": {"w1": ["web-1", "db-0"]},
    "pdbs": {"db-pdb": {"pods": ["db-0"], "allowed_disruptions": 0}},
}


def evictions(api: KubeApiServer, pod: str) -> int:
    return len(api.requests_to("POST", f"{EVICT}{pod}/eviction"))


async def test_a_refusing_pdb_keeps_draining_named_then_the_budget_allows(
    tmp_path: Path,
) -> None:
    async with open_cluster(tmp_path, cluster=PDB_CLUSTER) as c:
        m = await c.lc.request("w1", "drain", ceremony("w1"))
        await c.lc.run(max_passes=4)
        waiting = c.lc.store.get(m.name)
        assert waiting.phase is Phase.DRAINING
        cond = waiting.status.conditions["Drained"]
        assert (cond.status, cond.reason) == ("False", "BlockedByPDB")
        assert "blocked by PDB db-pdb (default/db-0)" in cond.message
        assert c.api.object(PODS, "default", "db-0") is not None  # refused: still there
        assert c.api.object(PODS, "default", "web-1") is None  # no budget: evicted, gone
        refused = evictions(c.api, "db-0")
        assert refused >= 2  # asked again on a later pass, never dropped
        assert evictions(c.api, "web-1") == 1

        c.world.set_pdb_allowed("db-pdb", 1)  # the disruption controller: one allowed now
        await c.lc.run(until_idle=True)
        drained = c.lc.store.get(m.name)
        assert drained.phase is Phase.DRAINED
        assert drained.status.conditions["Drained"].reason == "Drained"
        assert c.api.object(PODS, "default", "db-0") is None
        assert evictions(c.api, "db-0") == refused + 1  # the one the budget allowed
        assert c.host.channel("lab").dispatches == []  # a drain sends no power verb


async def test_the_drain_deadline_fails_naming_the_pods_still_there(tmp_path: Path) -> None:
    clock = Clock()
    async with open_cluster(tmp_path, cluster=PDB_CLUSTER, clock=clock,
                            drain_deadline_s=30) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(max_passes=3)
        assert c.lc.store.get(m.name).phase is Phase.DRAINING
        clock.advance(31)
        await c.lc.run(until_idle=True)
        failed = c.lc.store.get(m.name)
        assert failed.phase is Phase.FAILED
        assert "drain deadline of 30 s passed" in failed.status.last_error
        assert "default/db-0" in failed.status.last_error
        assert "blocked by PDB db-pdb" in failed.status.last_error
        assert failed.status.conditions["Drained"].reason == "DeadlineExceeded"
        assert c.host.channel("lab").dispatches == []  # never powered
        # the evacuation it began is ended: eviction cancelled first, then scheduling on
        assert c.longhorn_puts(LONGHORN_W1) == [(False, False), (False, True),
                                                (False, False), (True, False)]
