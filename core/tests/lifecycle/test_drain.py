"""Drain: evicts, waits for pods to leave, reports PDB refusals, fails at its deadline."""

from __future__ import annotations

from lifecycle_support import Clock, ceremony

from powerplane.lifecycle import Phase

PDB_CLUSTER = {
    "type": "simulated",
    "pods": {"w1": ["web-1", "db-0"]},
    "pdbs": {"db-pdb": {"pods": ["db-0"], "allowed_disruptions": 0}},
}


async def test_pdb_refusal_is_reported_by_name_and_waited_on(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster=PDB_CLUSTER)
    m = await lc.request("w1", "drain", ceremony("w1"))
    await lc.run(max_passes=4)
    waiting = lc.store.get(m.name)
    assert waiting.phase is Phase.DRAINING
    cond = waiting.status.conditions["Drained"]
    assert cond.status == "False" and cond.reason == "BlockedByPDB"
    assert "blocked by PDB db-pdb (db-0)" in cond.message
    lc.ports.cluster.set_pdb_allowed("db-pdb", 1)  # the budget allows one disruption now
    await lc.run(until_idle=True)
    drained = lc.store.get(m.name)
    assert drained.phase is Phase.DRAINED  # a drain parks here until returned
    assert await lc.ports.cluster.pods_on("w1") == []


async def test_drain_deadline_fails_with_the_names_of_pods_still_there(open_lifecycle) -> None:
    clock = Clock()
    lc = await open_lifecycle(clock=clock, cluster=PDB_CLUSTER,
                              lifecycle={"drain_deadline_s": 30})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=3)
    clock.advance(31)
    await lc.run(until_idle=True)
    failed = lc.store.get(m.name)
    assert failed.phase is Phase.FAILED
    assert "db-0" in failed.status.last_error and "db-pdb" in failed.status.last_error
    assert lc.host.channel("lab").dispatches == []


async def test_drain_waits_for_evicted_pods_to_leave(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a"]},
                                       "eviction_ticks": 3})
    m = await lc.request("w1", "drain", ceremony("w1"))
    await lc.run(max_passes=2)
    assert lc.store.get(m.name).phase is Phase.DRAINING
    assert lc.store.get(m.name).status.conditions["Drained"].reason == "Evicting"
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.DRAINED


async def test_return_from_drained_uncordons(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a"]}})
    m = await lc.request("w1", "drain", ceremony("w1"))
    await lc.run(until_idle=True)
    assert await lc.ports.cluster.is_cordoned("w1")
    await lc.return_to_service("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    assert not await lc.ports.cluster.is_cordoned("w1")


async def test_none_cluster_records_cordon_and_drain_as_not_applicable(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "none"})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.conditions["Cordoned"].reason == "NotApplicable"
    assert done.status.conditions["Drained"].reason == "NotApplicable"
