"""Power outcomes: reboot waits for the node, shutdown parks with PowerOffConfirmed, return."""

from __future__ import annotations

import pytest
from lifecycle_support import ceremony

from powerplane.lifecycle import Phase
from powerplane.lifecycle.model import DispatchOutcome
from powerplane.lifecycle.service import NotReturnable


async def test_reboot_takes_the_node_away_and_waits_for_it(open_lifecycle) -> None:
    lc = await open_lifecycle(channel={"transition_ms": 300})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=1)
    rebooting = lc.store.get(m.name)
    assert rebooting.phase is Phase.REBOOTING
    assert await lc.ports.cluster.is_ready("w1") is False
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    assert lc.store.get(m.name).status.conditions["NodeReady"].status == "True"


async def test_shutdown_parks_powered_off_and_confirms_by_readback(open_lifecycle) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    off = lc.store.get(m.name)
    assert off.phase is Phase.POWERED_OFF
    assert off.status.powered_off_at is not None
    assert off.status.conditions["PowerOffConfirmed"].status == "True"
    assert off.dispatch_for("shutdown").outcome is DispatchOutcome.ACCEPTED
    await lc.return_to_service("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    back = lc.store.get(m.name)
    assert back.phase is Phase.COMPLETE
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1"), ("power-on", "w1")]
    assert [a.action.value for a in lc.store.audit("w1")] == [
        "servers:shutdown", "servers:uncordon", "servers:power-on"]


async def test_power_off_unconfirmable_is_unknown_and_never_gates_the_phase(
    open_lifecycle,
) -> None:
    lc = await open_lifecycle(channel={"readback": "on-only"})
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    off = lc.store.get(m.name)
    assert off.phase is Phase.POWERED_OFF
    assert off.status.conditions["PowerOffConfirmed"].status == "Unknown"


async def test_return_without_power_on_needs_a_persons_confirmation(open_lifecycle) -> None:
    lc = await open_lifecycle(verbs=("reboot", "shutdown"), attended=True)
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    await lc.return_to_service("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    waiting = lc.store.get(m.name)
    assert waiting.phase is Phase.RETURNING
    assert waiting.status.conditions["AwaitingPowerOn"].status == "True"
    lc.host.channel("lab").set_state("w1", "on")  # a person at the rack
    await lc.return_to_service("w1", ceremony("w1"), machine_on=True)
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1")]


async def test_a_refused_dispatch_fails_and_is_never_resent(open_lifecycle) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "refused"}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    await lc.run(until_idle=True)
    failed = lc.store.get(m.name)
    assert failed.phase is Phase.FAILED
    assert len(failed.status.dispatches) == 1
    assert failed.status.dispatches[0].outcome is DispatchOutcome.FAILED
    assert lc.host.channel("lab").calls["reboot"] == 1


async def test_abandon_goes_through_returning(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a"]},
                                       "eviction_ticks": 5})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=2)
    assert lc.store.get(m.name).phase is Phase.DRAINING
    await lc.abandon("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert [t.to for t in done.status.history][-2:] == [Phase.RETURNING, Phase.COMPLETE]
    assert lc.host.channel("lab").dispatches == []
    assert not await lc.ports.cluster.is_cordoned("w1")


async def test_return_applies_only_to_a_parked_maintenance(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a"]},
                                       "eviction_ticks": 5})
    await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(max_passes=1)
    with pytest.raises(NotReturnable):
        await lc.return_to_service("w1", ceremony("w1"))
