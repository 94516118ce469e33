"""The recoverability rule, example by example."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from powerplane import CapabilitySet, NotOffered, PowerHost, Unreachable, Verb
from powerplane.config import Recovery
from powerplane.recovery import decide

ALL = [Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON]
TALOS = CapabilitySet.of([Verb.REBOOT, Verb.SHUTDOWN], sees_power_off=False)
PDU = CapabilitySet.of(hard=[Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON])
CLOUD = CapabilitySet.of([Verb.REBOOT, Verb.SHUTDOWN], hard=[Verb.POWER_ON, Verb.TERMINATE])


def test_shutdown_withheld_when_no_channel_can_power_on() -> None:
    offers = decide([("talos", TALOS)], "plant-a", "repairable", Recovery())
    assert not offers[Verb.SHUTDOWN].offered
    assert offers[Verb.SHUTDOWN].reason == (
        "shutdown withheld: channel 'talos' cannot power on, "
        "and site 'plant-a' is not declared attended"
    )
    assert offers[Verb.REBOOT].offered


def test_shutdown_offered_when_site_is_attended() -> None:
    rec = Recovery.model_validate({"sites": {"plant-a": {"attended": True}}})
    offers = decide([("talos", TALOS)], "plant-a", "repairable", rec)
    assert offers[Verb.SHUTDOWN].offered
    assert offers[Verb.SHUTDOWN].recovery == "site plant-a is declared attended"
    other = decide([("talos", TALOS)], "plant-b", "repairable", rec)
    assert not other[Verb.SHUTDOWN].offered


def test_shutdown_offered_when_rack_is_attended() -> None:
    rec = Recovery.model_validate({"attendedRack": True})
    offers = decide([("talos", TALOS)], None, "repairable", rec)
    assert offers[Verb.SHUTDOWN].offered
    assert "attendedRack" in (offers[Verb.SHUTDOWN].recovery or "")


def test_graceful_shutdown_preferred_and_pdu_named_as_recovery() -> None:
    offers = decide([("rack-a", PDU), ("talos", TALOS)], "plant-a", "repairable", Recovery())
    shutdown = offers[Verb.SHUTDOWN]
    assert shutdown.offered and shutdown.channel == "talos" and shutdown.graceful
    assert shutdown.recovery == "channel rack-a can power on"
    # reboot keeps plain preference order: the first channel that advertises it
    assert offers[Verb.REBOOT].channel == "rack-a"
    assert offers[Verb.POWER_ON].channel == "rack-a"


def test_terminate_only_for_replaceable_nodes() -> None:
    repairable = decide([("ec2", CLOUD)], None, "repairable", Recovery())
    assert not repairable[Verb.TERMINATE].offered
    assert "repairable" in repairable[Verb.TERMINATE].reason
    replaceable = decide([("ec2", CLOUD)], None, "replaceable", Recovery())
    assert replaceable[Verb.TERMINATE].offered


def test_no_channel_offers_nothing() -> None:
    offers = decide([], "plant-a", "repairable", Recovery.model_validate({"attendedRack": True}))
    assert not any(o.offered for o in offers.values())
    assert all("no channel configured" in o.reason for o in offers.values())


def test_undiscovered_channel_advertises_nothing_and_says_why() -> None:
    offers = decide([("bmc", "channel 'bmc': connection refused")], None, "repairable",
                    Recovery())
    assert not offers[Verb.REBOOT].offered
    assert "could not be discovered (channel 'bmc': connection refused)" in (
        offers[Verb.REBOOT].reason
    )


def test_power_on_channel_that_failed_discovery_does_not_make_shutdown_recoverable() -> None:
    offers = decide([("talos", TALOS), ("pdu", "timed out")], "plant-a", "repairable",
                    Recovery())
    assert not offers[Verb.SHUTDOWN].offered
    assert "no channel of the node ('talos' and 'pdu') can power on" in (
        offers[Verb.SHUTDOWN].reason
    )


async def test_invoke_rechecks_the_rule(lab_host: PowerHost) -> None:
    with pytest.raises(NotOffered) as info:
        await lab_host.invoke("t1", Verb.SHUTDOWN, reason="PSU swap")
    assert "site 'plant-a' is not declared attended" in info.value.reason
    assert lab_host.channel("talos").dispatches == []  # type: ignore[attr-defined]


async def test_invoke_refuses_after_refresh_finds_channel_gone(
    host_for: Callable[[dict[str, Any]], PowerHost],
) -> None:
    cfg = {
        "channels": {"bmc": {"type": "simulated", "machines": {"m1": "on"}}},
        "nodes": {"n1": {"channels": [{"channel": "bmc", "target": "m1"}]}},
    }
    async with host_for(cfg) as host:
        assert host.offer_for("n1")[Verb.SHUTDOWN].offered
        sim = host.channel("bmc")
        broken = sim.config.model_copy(update={"faults": {"*": "unreachable"}})  # type: ignore[attr-defined]
        object.__setattr__(sim, "config", broken)
        await host.refresh()
        # a discovery failure is the channel's failure (exit 1), not the rule's refusal
        with pytest.raises(Unreachable, match="could not be discovered"):
            await host.invoke("n1", Verb.SHUTDOWN, reason="x")


async def test_reason_is_required(lab_host: PowerHost) -> None:
    with pytest.raises(ValueError, match="reason"):
        await lab_host.invoke("n1", Verb.REBOOT, reason="  ")
