"""The talos channel inside PowerHost: the recoverability rule withholds an unrecoverable shutdown.

Talos advertises shutdown but can never power on, so a Talos-only node is offered
shutdown only once its site is declared attended, or once a second channel that can
power on (core's ``simulated`` type here) is added to the node.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from powerplane import NotOffered, PowerHost, PowerOffConfirmed, PowerState, Verb, parse_config

pytestmark = pytest.mark.timeout(60)


def deployment(mock: Any, node: str, *, attended: bool = False, second: bool = False) -> Any:
    refs: list[dict[str, Any]] = [{"channel": "talos", "target": node}]
    channels: dict[str, Any] = {
        "talos": {"type": "talos", "talosconfig": str(mock.talosconfig),
                  "timeouts": {"connect_s": 5, "read_s": 5}},
    }
    if second:
        channels["lab"] = {"type": "simulated", "verbs": ["power-on"], "graceful": False,
                           "machines": {"m1": "on"}}
        refs.append({"channel": "lab", "target": "m1"})
    doc: dict[str, Any] = {
        "channels": channels,
        "nodes": {"node-1": {"site": "plant-a", "channels": refs}},
    }
    if attended:
        doc["recovery"] = {"sites": {"plant-a": {"attended": True}}}
    return parse_config(doc)


async def test_talos_only_node_withholds_shutdown_with_the_reason(
    ed_mock: Any, node: str
) -> None:
    async with PowerHost(deployment(ed_mock, node)) as host:
        offer = host.offer_for("node-1")
        shutdown = offer[Verb.SHUTDOWN]
        assert not shutdown.offered
        assert shutdown.reason == ("shutdown withheld: channel 'talos' cannot power on, "
                                   "and site 'plant-a' is not declared attended")
        assert offer[Verb.REBOOT].offered and offer[Verb.REBOOT].graceful
        assert not offer[Verb.POWER_ON].offered
        with pytest.raises(NotOffered, match="cannot power on"):
            await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")
        caps = host.capabilities("talos", node)
        assert not isinstance(caps, str) and caps.source.value == "intrinsic"
        assert not caps.sees_power_off
    assert all(d["node"] != node for d in ed_mock.control.dispatches())


async def test_shutdown_offered_once_the_site_is_declared_attended(
    ed_mock: Any, node: str
) -> None:
    async with PowerHost(deployment(ed_mock, node, attended=True)) as host:
        shutdown = host.offer_for("node-1")[Verb.SHUTDOWN]
        assert shutdown.offered and shutdown.channel == "talos" and shutdown.graceful
        assert shutdown.recovery == "site plant-a is declared attended"
        result = await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")
        assert result.accepted and result.channel == "talos"
        reading = await host.read_power_state("node-1")
        assert reading.state is PowerState.UNKNOWN  # a dark Talos machine proves nothing
        watch = host.confirm_power_off("node-1", dt.datetime.now(dt.UTC), window=5, cadence=1)
        assert await watch is PowerOffConfirmed.UNKNOWN
    assert ed_mock.control.dispatches()[-1] == {"node": node, "verb": "shutdown", "force": False}


async def test_shutdown_offered_once_a_channel_that_can_power_on_is_added(
    ed_mock: Any, node: str
) -> None:
    async with PowerHost(deployment(ed_mock, node, second=True)) as host:
        offer = host.offer_for("node-1")
        assert offer[Verb.SHUTDOWN].offered and offer[Verb.SHUTDOWN].channel == "talos"
        assert offer[Verb.SHUTDOWN].recovery == "channel lab can power on"
        assert offer[Verb.POWER_ON].offered and offer[Verb.POWER_ON].channel == "lab"
        await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")
    assert ed_mock.control.dispatches()[-1]["node"] == node


async def test_reboot_through_the_host_reads_back_on(ed_mock: Any, node: str) -> None:
    async with PowerHost(deployment(ed_mock, node)) as host:
        result = await host.invoke("node-1", Verb.REBOOT, reason="kernel", wait=20)
        assert result.readback is PowerState.ON
        assert "mode default" in result.detail


def test_the_talos_type_declares_that_every_verb_passes_the_send_gate() -> None:
    from powerplane.testing import process_registry

    talos = process_registry().get("talos")
    assert talos is not None and talos.gated_sends


async def test_a_reboot_sent_and_unanswered_is_outcome_unknown_through_the_host(
    ed_mock: Any, node: str
) -> None:
    from powerplane import OutcomeUnknown

    config = deployment(ed_mock, node)
    doc = dict(config.raw)
    doc["channels"] = {"talos": {**doc["channels"]["talos"],
                                 "timeouts": {"connect_s": 0.5, "read_s": 0.5}}}
    ed_mock.control.fault(node, "slow", seconds=30)
    try:
        async with PowerHost(parse_config(doc)) as host:
            with pytest.raises(OutcomeUnknown, match="may have been applied"):
                await host.invoke("node-1", Verb.REBOOT, reason="kernel")
    finally:
        ed_mock.control.clear(node)
    assert {"node": node, "rpc": "Reboot"} in ed_mock.control.received()
