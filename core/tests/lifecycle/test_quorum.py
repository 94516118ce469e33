"""The quorum guard and the virtual-node refusal, at request time and in the reconciler."""

from __future__ import annotations

import pytest
from lifecycle_support import ceremony

from powerplane.lifecycle import MaintenanceRefused, Phase
from powerplane.lifecycle.model import Intent, MaintenanceSpec, NodeMaintenance
from powerplane.lifecycle.quorum import assess, derive_membership

CP = "node-role.kubernetes.io/control-plane"


def test_three_members_one_may_go_as_hazard() -> None:
    members = ["a", "b", "c"]
    verdict = assess("a", members, dict.fromkeys(members, True), set())
    assert verdict.allowed and verdict.hazard
    assert verdict.numbers is not None
    assert (verdict.numbers.members, verdict.numbers.quorum, verdict.numbers.margin) == (3, 2, 1)


def test_three_members_a_second_is_refused_with_the_numbers() -> None:
    members = ["a", "b", "c"]
    verdict = assess("b", members, dict.fromkeys(members, True), {"a"})
    assert not verdict.allowed
    assert verdict.numbers is not None
    assert verdict.numbers.model_dump() == {
        "members": 3, "ready": 2, "quorum": 2, "margin": 0, "member": True
    }
    assert "3 control-plane members, 2 ready, quorum 2, margin 0" in verdict.reason


def test_a_member_not_ready_counts_against_the_margin() -> None:
    members = ["a", "b", "c"]
    verdict = assess("a", members, {"a": True, "b": True, "c": None}, set())
    assert not verdict.allowed


def test_unlabelled_cluster_derives_no_membership_and_refuses() -> None:
    assert derive_membership({"w1": {}, "w2": {"x": "y"}}, CP) is None
    verdict = assess("w1", None, {}, set(), label=CP)
    assert not verdict.allowed
    assert "no control-plane membership can be derived" in verdict.reason


def test_a_declared_absent_control_plane_allows() -> None:
    assert assess("w1", None, {}, set(), no_control_plane=True).allowed


async def test_second_member_request_refused_while_first_is_out(open_lifecycle) -> None:
    lc = await open_lifecycle()
    first = await lc.request("cp1", "cordon", ceremony("cp1", hazard=True))
    assert first.status.hazard
    assert first.spec.preflight.quorum is not None
    await lc.reconcile(first.name)  # takes cp1 out of service (parks at Cordoned)
    out = lc.store.get(first.name)
    assert out.status.hazard and out.status.quorum is not None
    assert (out.status.quorum.members, out.status.quorum.quorum, out.status.quorum.margin) == (
        3, 2, 1)
    with pytest.raises(MaintenanceRefused) as err:
        await lc.request("cp2", "reboot", ceremony("cp2", hazard=True))
    assert err.value.exit_code == 3
    assert err.value.numbers is not None
    assert (err.value.numbers.members, err.value.numbers.ready, err.value.numbers.quorum,
            err.value.numbers.margin) == (3, 2, 2, 0)


async def test_hazard_needs_its_typed_reason(open_lifecycle) -> None:
    from powerplane.lifecycle import CeremonyRequired

    lc = await open_lifecycle()
    with pytest.raises(CeremonyRequired, match="hazard"):
        await lc.request("cp1", "cordon", ceremony("cp1", hazard=False))
    assert lc.store.all() == []


async def test_reconciler_refuses_what_bypassed_the_request_path(open_lifecycle) -> None:
    """The guard is authoritative where the work runs: a row written straight to the store."""
    lc = await open_lifecycle()
    one = await lc.request("cp1", "cordon", ceremony("cp1", hazard=True))
    await lc.reconcile(one.name)
    sneaky = NodeMaintenance(
        name="sneaky",
        spec=MaintenanceSpec(node="cp2", intent=Intent.REBOOT, reason="bypass", requested_by="x"),
    )
    lc.store.create(sneaky)
    await lc.reconcile("sneaky")
    got = lc.store.get("sneaky")
    assert got.phase is Phase.REFUSED
    assert got.status.refusal is not None and got.status.refusal.margin == 0
    assert lc.host.channel("lab").dispatches.count(("reboot", "cp2")) == 0


async def test_unlabelled_cluster_is_refused_at_request(open_lifecycle) -> None:
    lc = await open_lifecycle(control_plane=())
    with pytest.raises(MaintenanceRefused, match="no control-plane membership"):
        await lc.request("w1", "cordon", ceremony("w1"))


async def test_virtual_node_refuses_every_action(open_lifecycle) -> None:
    lc = await open_lifecycle(labels={"w1": {"powerplane.io/virtual-node": "true"}})
    for intent in ("cordon", "drain", "reboot", "shutdown"):
        with pytest.raises(MaintenanceRefused, match="virtual node"):
            await lc.request("w1", intent, ceremony("w1"))
    lc.store.create(NodeMaintenance(
        name="v", spec=MaintenanceSpec(node="w1", intent=Intent.CORDON, reason="bypass",
                                       requested_by="x")))
    await lc.reconcile("v")
    assert lc.store.get("v").phase is Phase.REFUSED
    assert not await lc.ports.cluster.is_cordoned("w1")


async def test_quorum_lost_after_cordon_holds_instead_of_dispatching(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"cp1": ["p"]},
                                       "eviction_ticks": 3})
    m = await lc.request("cp1", "reboot", ceremony("cp1", hazard=True))
    await lc.reconcile(m.name)
    assert lc.store.get(m.name).phase is Phase.DRAINING
    lc.ports.cluster.set_ready("cp2", False)  # another member goes away meanwhile
    await lc.run(until_idle=True)
    held = lc.store.get(m.name)
    assert held.phase is Phase.DRAINING
    assert held.status.conditions["SafetyHold"].status == "True"
    assert lc.host.channel("lab").dispatches == []
    lc.ports.cluster.set_ready("cp2", True)
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    assert lc.host.channel("lab").dispatches == [("reboot", "cp1")]
