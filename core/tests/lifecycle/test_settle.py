"""Settling by evidence in-process: an unknown outcome, the boot marker, a person's word.

Each test drives one deployment of simulated machines; the channel's own dispatch list is
what was applied at the machine.
"""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import Clock, ceremony

from powerplane.authority.identity import Identity
from powerplane.lifecycle import Phase
from powerplane.lifecycle.ceremony import Ceremony, CeremonyRequired
from powerplane.lifecycle.model import DispatchOutcome
from powerplane.lifecycle.ports import PermanentPortError, TemporaryPortError
from powerplane.lifecycle.service import NotResolvable

FAST = {"settle_window_s": 0.2, "readback_window_s": 0.5}
NO_BOOT_ID = {"type": "simulated", "boot_id": False}


def sure(node: str, actor: str = "carol") -> Ceremony:
    return Ceremony(reason="checked at the rack console", identity=Identity(actor),
                    confirm_node=node)


async def test_a_lost_answer_is_unknown_then_applied_by_the_boot_marker(
    open_lifecycle: Any,
) -> None:
    """The host's OutcomeUnknown is never Failed: the marker shows the reboot happened."""
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05},
                              lifecycle=FAST)
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    (d,) = done.status.dispatches
    assert (d.outcome, d.settled_by) == (DispatchOutcome.APPLIED, "evidence")
    # the record keeps both: the host's "outcome unknown" first, then the evidence
    assert d.detail.startswith("outcome unknown (no answer: "), d.detail
    assert "after the request was sent" in d.detail
    assert "settled by evidence: boot marker changed w1-boot-1 -> w1-boot-2 (from cluster)" \
        in d.detail
    assert done.status.conditions["RebootObserved"].status == "True"
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]


async def test_without_a_cluster_boot_id_the_channel_marker_is_the_evidence(
    open_lifecycle: Any,
) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05},
                              lifecycle=FAST, cluster=NO_BOOT_ID)
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.dispatches[0].before.boot_marker_source == "lab"
    assert "boot-1 -> boot-2 (from lab)" in done.status.dispatches[0].detail
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]


async def test_a_lost_answer_on_a_shutdown_is_applied_by_readback(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05},
                              lifecycle=FAST)
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    off = lc.store.get(m.name)
    assert off.phase is Phase.POWERED_OFF
    assert off.status.dispatches[0].outcome is DispatchOutcome.APPLIED
    assert lc.host.channel("lab").state_of("w1") == "off"
    assert lc.host.channel("lab").dispatches == [("shutdown", "w1")]


async def test_no_marker_anywhere_parks_awaiting_a_person(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05,
                                       "boot_marker": False}, lifecycle=FAST,
                              cluster=NO_BOOT_ID)
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    parked = lc.store.get(m.name)
    assert parked.phase is Phase.DRAINED  # never moves on by itself
    assert parked.status.dispatches[0].outcome is DispatchOutcome.INDETERMINATE
    assert parked.status.conditions["DispatchIndeterminate"].status == "True"
    awaiting = parked.status.conditions["AwaitingResolution"]
    assert awaiting.status == "True"
    assert "no boot marker" in awaiting.message  # what is unknown
    assert "power reads on (via lab)" in awaiting.message  # and what was observed
    assert parked.summary()["awaitingResolution"] == awaiting.message
    await lc.run(max_passes=3)
    assert lc.store.get(m.name).phase is Phase.DRAINED


async def test_a_person_resolves_applied_and_nothing_is_sent_again(
    open_lifecycle: Any,
) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05,
                                       "boot_marker": False}, lifecycle=FAST,
                              cluster=NO_BOOT_ID)
    m = await lc.request("w1", "reboot", ceremony("w1", actor="alice"))
    await lc.run(until_idle=True)
    await lc.resolve("w1", sure("w1"), applied=True)
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    assert done.status.dispatches[0].settled_by == "person:carol"
    assert done.status.conditions["RebootObserved"].status == "Unknown"
    assert done.status.conditions["AwaitingResolution"].status == "False"
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]
    audit = [(a.action.value, a.actor) for a in lc.store.audit("w1")]
    assert audit == [("servers:reboot", "alice"), ("servers:maintenance-resolve", "carol")]


async def test_resolve_needs_its_ceremony_and_a_pending_dispatch(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "lost-answer"}, "timeout_s": 0.05,
                                       "boot_marker": False}, lifecycle=FAST,
                              cluster=NO_BOOT_ID)
    await lc.request("w1", "reboot", ceremony("w1"))
    with pytest.raises(NotResolvable):
        await lc.resolve("w1", sure("w1"), applied=True)  # nothing indeterminate yet
    await lc.run(until_idle=True)
    with pytest.raises(CeremonyRequired, match="--confirm-node w1"):
        await lc.resolve("w1", Ceremony(reason="checked at the rack console",
                                        identity=Identity("carol")), applied=False)
    with pytest.raises(CeremonyRequired, match="reason"):
        await lc.resolve("w1", Ceremony(reason="x", identity=Identity("carol"), confirm_node="w1"),
                         applied=False)
    assert [a.action.value for a in lc.store.audit("w1")] == ["servers:reboot"]


async def test_ready_alone_is_not_a_reboot(open_lifecycle: Any) -> None:
    """A channel that accepts and does nothing: the node stays ready, the marker unchanged."""
    clock = Clock()
    lc = await open_lifecycle(channel={"faults": {"w1": "silent"}}, clock=clock)
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=False, max_passes=8)
    waiting = lc.store.get(m.name)
    assert waiting.phase is Phase.REBOOTING
    assert waiting.status.conditions["RebootObserved"].status == "False"
    clock.advance(901)
    await lc.run(until_idle=True)
    failed = lc.store.get(m.name)
    assert failed.phase is Phase.FAILED
    assert "no reboot of w1 observed" in failed.status.last_error


async def test_without_a_marker_the_reboot_is_recorded_unobserved(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(channel={"boot_marker": False}, cluster=NO_BOOT_ID)
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    cond = done.status.conditions["RebootObserved"]
    assert (cond.status, cond.message) == (
        "Unknown", "ready; no boot marker to show a reboot happened")


async def test_a_shutdown_that_left_the_machine_on_says_so(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(channel={"faults": {"w1": "silent"}}, lifecycle=FAST)
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    off = lc.store.get(m.name)
    assert off.phase is Phase.POWERED_OFF
    assert off.status.conditions["PowerOffConfirmed"].status == "Unknown"
    assert off.status.conditions["MachineReadsOn"].status == "True"
    assert "the machine still reads on" in off.status.conditions["MachineReadsOn"].message
    assert off.summary()["machineReadsOn"] is True


async def test_a_permanent_port_error_fails_with_its_message(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "drain", ceremony("w1"))

    async def forbidden(node: str) -> Any:
        raise PermanentPortError("nodes/w1 drain forbidden: RBAC denies eviction")

    lc.ports.cluster.drain = forbidden
    await lc.run(until_idle=True)
    failed = lc.store.get(m.name)
    assert failed.phase is Phase.FAILED
    assert failed.status.last_error == "nodes/w1 drain forbidden: RBAC denies eviction"


async def test_a_temporary_port_error_is_tried_again(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "drain", ceremony("w1"))
    real = lc.ports.cluster.drain
    calls = 0

    async def flaky(node: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TemporaryPortError("apiserver timeout")
        return await real(node)

    lc.ports.cluster.drain = flaky
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.DRAINED
