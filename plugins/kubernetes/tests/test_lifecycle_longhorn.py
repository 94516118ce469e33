"""Longhorn evacuation (ADR 0025) on the longhorn storage port through the Reconciler, on kmock.

Each claim is read off the requests the API server received: begin writes
``allowScheduling=false`` then ``evictionRequested=true`` (each its own ``PUT``) before the
first eviction; end writes ``evictionRequested=false`` then ``allowScheduling=true`` after
the uncordon; a field already holding its value gets no write; the evacuation timeout
pauses in ``Cordoned`` with the evacuation ended and no eviction at all; Longhorn absent
(its CRDs not installed) or the node's object absent is nothing to evacuate.
"""

from __future__ import annotations

from pathlib import Path

from lifecycle_kmock import EVICT, LONGHORN_W1, Clock, ceremony, open_cluster

from powerplane.lifecycle import Phase
from powerplane_kubernetes.testing.apiserver import LONGHORN_REPLICAS, RecordedRequest

BEGIN_END = [(False, False), (False, True), (False, False), (True, False)]
"""The four PUTs of ``nodes.longhorn.io/w1`` as (allowScheduling, evictionRequested)."""


def is_longhorn_put(r: RecordedRequest) -> bool:
    return r.method == "PUT" and r.path == LONGHORN_W1


def is_eviction(r: RecordedRequest) -> bool:
    return r.method == "POST" and r.path.startswith(EVICT) and r.path.endswith("/eviction")


def is_uncordon(r: RecordedRequest) -> bool:
    return r.method == "PATCH" and r.path == "/api/v1/nodes/w1" and \
        r.body == {"spec": {"unschedulable": False}}


async def test_begin_before_the_drain_and_end_after_the_uncordon_in_adr_order(
    tmp_path: Path,
) -> None:
    async with open_cluster(tmp_path, cluster={"pods": {"w1": ["web-1"]}},
                            storage={"type": "simulated", "replicas": {"w1": 2}}) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(until_idle=True)
        done = c.lc.store.get(m.name)
        assert done.phase is Phase.COMPLETE
        assert done.status.conditions["Evacuated"].reason == "Evacuated"
        assert c.longhorn_puts() == BEGIN_END
        puts = c.index(is_longhorn_put)
        evictions = c.index(is_eviction)
        uncordon = c.index(is_uncordon)
        assert len(evictions) == 1 and len(uncordon) == 1
        assert puts[1] < evictions[0] < uncordon[0] < puts[2]  # begin, drain, uncordon, end
        assert c.api.objects(LONGHORN_REPLICAS) == []  # Longhorn moved them off the node
        assert c.host.channel("lab").dispatches == [("reboot", "w1")]


async def test_a_field_already_holding_its_value_is_not_written(tmp_path: Path) -> None:
    async with open_cluster(tmp_path, storage={"type": "simulated", "replicas": {"w1": 1}}) as c:
        # an administrator turned scheduling off on the Longhorn node before the request
        c.api.add_longhorn_node("w1", allow_scheduling=False)
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(m.name).phase is Phase.COMPLETE
        # begin wrote only evictionRequested; end cancelled it and turned scheduling on
        assert c.longhorn_puts() == [(False, True), (False, False), (True, False)]
        before = len(c.api.requests_to("PUT", LONGHORN_W1))
        await c.lc.reconcile(m.name)  # terminal: reconciling again writes nothing
        assert len(c.api.requests_to("PUT", LONGHORN_W1)) == before


async def test_the_evacuation_timeout_pauses_without_a_drain(tmp_path: Path) -> None:
    clock = Clock()
    async with open_cluster(tmp_path, cluster={"pods": {"w1": ["web-1"]}}, clock=clock,
                            storage={"type": "simulated", "replicas": {"w1": 2},
                                     "evict_per_read": 0},  # the replicas cannot move
                            evacuation_timeout_s=60) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(max_passes=3)
        assert c.lc.store.get(m.name).status.conditions["Evacuated"].reason == "Evacuating"
        clock.advance(61)
        await c.lc.run(until_idle=True)
        paused = c.lc.store.get(m.name)
        assert paused.phase is Phase.CORDONED
        cond = paused.status.conditions["EvacuationPaused"]
        assert (cond.status, cond.reason) == ("True", "Timeout")
        assert "2 replica(s) still only on w1 after 60 s" in cond.message
        assert c.longhorn_puts() == BEGIN_END  # begun, then ended: eviction off first
        assert c.index(is_eviction) == []  # never drained
        assert Phase.DRAINING not in [t.to for t in paused.status.history]
        assert c.host.channel("lab").dispatches == []


async def test_longhorn_not_installed_proceeds(tmp_path: Path) -> None:
    async with open_cluster(tmp_path, longhorn=False) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(until_idle=True)
        done = c.lc.store.get(m.name)
        assert done.phase is Phase.COMPLETE
        assert done.status.conditions["Evacuated"].reason == "NoStorageObject"
        asked = [r for r in c.api.requests if r.path.startswith("/apis/longhorn.io/")]
        assert asked and {r.method for r in asked} == {"GET"}  # read, found absent, no write
        assert c.host.channel("lab").dispatches == [("reboot", "w1")]


async def test_a_node_without_a_longhorn_object_proceeds(tmp_path: Path) -> None:
    async with open_cluster(tmp_path, longhorn_nodes=False) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(m.name).phase is Phase.COMPLETE
        assert c.longhorn_puts() == []
        assert c.api.requests_to("GET", LONGHORN_W1)  # it did look
