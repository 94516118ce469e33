"""Storage evacuation (ADR 0025): write order, skip-when-set, pause on timeout, absent storage."""

from __future__ import annotations

import pytest
from lifecycle_support import Clock, ceremony

from powerplane.lifecycle import EvacuationStatus, LonghornHook, Phase, evacuation_status
from powerplane.lifecycle.storage import StorageError, apply_writes
from powerplane.settings.lifecycle import SimulatedStorageConfig
from powerplane.sim.storage import SimulatedStorage


def test_begin_turns_scheduling_off_before_requesting_eviction() -> None:
    assert LonghornHook().begin() == [("allowScheduling", False), ("evictionRequested", True)]


def test_end_cancels_eviction_before_turning_scheduling_on() -> None:
    assert LonghornHook().end() == [("evictionRequested", False), ("allowScheduling", True)]


def test_status_function() -> None:
    assert evacuation_status(0, 999, 10) is EvacuationStatus.DONE
    assert evacuation_status(3, 5, 10) is EvacuationStatus.WAITING
    assert evacuation_status(3, 10, 10) is EvacuationStatus.PAUSED


async def test_writes_in_order_and_the_reverse_order_is_refused_by_the_webhook() -> None:
    storage = SimulatedStorage(SimulatedStorageConfig(type="simulated", replicas={"n": 2}))
    hook = LonghornHook()
    assert await apply_writes(storage, "n", hook.begin()) == hook.begin()
    with pytest.raises(StorageError):  # end in begin's order leaves both true: refused
        await apply_writes(storage, "n", list(reversed(hook.end())))
    assert await apply_writes(storage, "n", hook.end()) == hook.end()
    assert storage.writes == [("n", f, v) for f, v in hook.begin() + hook.end()]


async def test_a_field_already_holding_its_value_is_not_rewritten() -> None:
    storage = SimulatedStorage(SimulatedStorageConfig(type="simulated", replicas={"n": 2}))
    await storage.write("n", "allowScheduling", False)
    storage.writes.clear()
    assert await apply_writes(storage, "n", LonghornHook().begin()) == [
        ("evictionRequested", True)
    ]
    assert storage.writes == [("n", "evictionRequested", True)]
    assert await apply_writes(storage, "n", LonghornHook().begin()) == []


async def test_evacuation_runs_after_cordon_and_before_drain(open_lifecycle) -> None:
    lc = await open_lifecycle(storage={"type": "simulated", "replicas": {"w1": 3}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    writes = lc.ports.storage.writes  # type: ignore[attr-defined]
    assert writes == [("w1", "allowScheduling", False), ("w1", "evictionRequested", True),
                      ("w1", "evictionRequested", False), ("w1", "allowScheduling", True)]
    assert done.status.conditions["Evacuated"].status == "True"


async def test_timeout_pauses_in_cordoned_ends_evacuation_and_never_drains(
    open_lifecycle,
) -> None:
    clock = Clock()
    lc = await open_lifecycle(
        clock=clock,
        storage={"type": "simulated", "replicas": {"w1": 3}, "evict_per_read": 0},
        cluster={"type": "simulated", "pods": {"w1": ["web"]}},
        lifecycle={"evacuation_timeout_s": 60},
    )
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(max_passes=3)
    assert lc.store.get(m.name).status.conditions["Evacuated"].reason == "Evacuating"
    clock.advance(61)
    await lc.run(until_idle=True)
    paused = lc.store.get(m.name)
    assert paused.phase is Phase.CORDONED
    assert paused.status.conditions["EvacuationPaused"].status == "True"
    assert "3 replica(s)" in paused.status.conditions["EvacuationPaused"].message
    assert lc.ports.storage.writes[-2:] == [  # type: ignore[attr-defined]
        ("w1", "evictionRequested", False), ("w1", "allowScheduling", True)]
    assert await lc.ports.cluster.pods_on("w1") == ["web"]  # no drain
    assert lc.host.channel("lab").dispatches == []
    assert [t.to for t in paused.status.history] == [Phase.CORDONED]


async def test_absent_storage_proceeds(open_lifecycle) -> None:
    lc = await open_lifecycle(storage={"type": "none"})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.conditions["Evacuated"].reason == "NoStorage"


async def test_node_without_a_storage_object_proceeds(open_lifecycle) -> None:
    lc = await open_lifecycle(storage={"type": "simulated", "replicas": {"w2": 1}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.conditions["Evacuated"].reason == "NoStorageObject"
    assert lc.ports.storage.writes == []  # type: ignore[attr-defined]


async def test_a_failed_drain_ends_the_evacuation_it_began(open_lifecycle) -> None:
    clock = Clock()
    lc = await open_lifecycle(
        clock=clock,
        storage={"type": "simulated", "replicas": {"w1": 1}},
        cluster={"type": "simulated", "pods": {"w1": ["db-0"]},
                 "pdbs": {"db": {"pods": ["db-0"]}}},
        lifecycle={"drain_deadline_s": 10},
    )
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=4)
    assert lc.store.get(m.name).phase is Phase.DRAINING
    clock.advance(11)
    await lc.run(until_idle=True)
    failed = lc.store.get(m.name)
    assert failed.phase is Phase.FAILED
    assert failed.status.evacuation_ended
    assert lc.ports.storage.writes[-2:] == [  # type: ignore[attr-defined]
        ("w1", "evictionRequested", False), ("w1", "allowScheduling", True)]


async def test_a_failed_begin_pauses_and_ends_the_evacuation(open_lifecycle) -> None:
    lc = await open_lifecycle(storage={"type": "simulated", "replicas": {"w1": 1}})
    storage = lc.ports.storage
    real_write = storage.write
    calls = {"n": 0}

    async def flaky(node: str, fieldname: str, value: bool) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the eviction request is refused by the storage system
            raise StorageError("admission webhook unavailable")
        await real_write(node, fieldname, value)

    storage.write = flaky  # type: ignore[method-assign]
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    paused = lc.store.get(m.name)
    assert paused.phase is Phase.CORDONED
    assert paused.status.conditions["EvacuationPaused"].reason == "BeginFailed"
    assert storage.fields["w1"] == {  # type: ignore[attr-defined]
        "allowScheduling": True, "evictionRequested": False}
    assert lc.host.channel("lab").dispatches == []


async def test_a_storage_read_error_is_recorded_and_retried(open_lifecycle) -> None:
    lc = await open_lifecycle(storage={"type": "simulated", "replicas": {"w1": 1}})
    storage = lc.ports.storage
    real = storage.replicas_remaining
    failures = {"left": 2}

    async def flaky(node: str) -> int:
        if failures["left"]:
            failures["left"] -= 1
            raise StorageError("storage API timed out")
        return await real(node)

    storage.replicas_remaining = flaky  # type: ignore[method-assign]
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=2)
    erring = lc.store.get(m.name)
    assert erring.phase is Phase.CORDONED
    assert erring.status.conditions["PortError"].status == "True"
    assert "storage API timed out" in erring.status.last_error
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.conditions["PortError"].status == "False"
