"""Through PowerHost: A/B feeds switched as one, a feed down, offers beside an in-band channel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pdu_peers import SnmpSim

from powerplane import (
    InvokeResult,
    OutcomeUnknown,
    PowerHost,
    PowerState,
    RefusedByDevice,
    Verb,
    parse_config,
)
from powerplane.testing import free_port
from powerplane_pdu import PduChannel, parse_target


def _feeds_config(
    snmp_config: Callable[..., dict[str, Any]], a: str, b_port: int | None, b: str = "feed-b"
) -> dict[str, Any]:
    main = snmp_config(a)
    feed_b = snmp_config(b)
    for key in ("reboot_delay_s",):
        feed_b.pop(key)
    if b_port is not None:
        feed_b["port"] = b_port
    return {
        "channels": {"rack": {"type": "pdu", **main, "feeds": {"b": feed_b}}},
        "nodes": {
            "n1": {"site": "plant-a",
                   "channels": [{"channel": "rack", "target": {"outlets": [1],
                                                               "feeds": {"b": [1]}}}]},
        },
    }


async def test_two_feed_node_switches_both_outlets_as_one(
    snmp_config: Callable[..., dict[str, Any]],
) -> None:
    cfg = _feeds_config(snmp_config, "feed-a", None)
    async with PowerHost(parse_config(cfg)) as host:
        offer = host.offer_for("n1")
        assert offer[Verb.SHUTDOWN].offered and offer[Verb.SHUTDOWN].graceful is False
        assert offer[Verb.SHUTDOWN].recovery == "channel rack can power on"

        done = await host.invoke("n1", Verb.SHUTDOWN, reason="PSU swap")
        assert "rack/1: switched off" in done.detail
        assert "rack.b/1: switched off" in done.detail
        reading = await host.read_power_state("n1")
        assert reading.state is PowerState.OFF and reading.channel == "rack"

        await host.invoke("n1", Verb.POWER_ON, reason="PSU swapped")
        reading = await host.read_power_state("n1")
        assert reading.state is PowerState.ON
        assert "rack/1 150 W" in reading.detail and "rack.b/1 150 W" in reading.detail

        done = await host.invoke("n1", Verb.REBOOT, reason="kernel")
        assert done.detail.count("switched off and on again") == 2


async def test_one_feed_unreachable_reports_the_failed_outlet_and_the_other_outcome(
    snmpsim: SnmpSim,
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    dead = free_port("udp")
    cfg = _feeds_config(snmp_config, "feed-a2", dead)
    async with PowerHost(parse_config(cfg)) as host:
        caps = host.capabilities("rack", parse_target({"outlets": [1], "feeds": {"b": [1]}}))
        assert not isinstance(caps, str)
        assert "not answering now: rack.b/1" in caps.detail
        assert host.offer_for("n1")[Verb.SHUTDOWN].offered

        # a SET into silence left the process: its outcome is unknown, not a plain timeout
        with pytest.raises(OutcomeUnknown) as info:
            await host.invoke("n1", Verb.SHUTDOWN, reason="PSU swap")
        err = info.value
        text = str(err)
        assert "shutdown failed on 1 of 2 outlet(s)" in text
        assert "rack/1: switched off" in text
        assert "rack.b/1: FAILED (OutcomeUnknown" in text
        assert "no SNMP response to the SET" in text
        outcomes = err.outcomes  # type: ignore[attr-defined]
        assert outcomes["rack/1"] == "switched off"
        assert outcomes["rack.b/1"].startswith("failed: ")

        # the reachable feed really went off; the node reads unknown, naming the silent feed
        reading = await host.read_power_state("n1")
        assert reading.state is PowerState.UNKNOWN
        assert "rack.b/1" in reading.detail

        with pytest.raises(OutcomeUnknown) as info:
            await host.invoke("n1", Verb.REBOOT, reason="kernel")
        text = str(info.value)
        assert "rack/1: switched off and on again" in text
        assert "rack.b/1: FAILED (OutcomeUnknown: switching off failed, on not sent" in text

    only_a = channel_for(snmp_config("feed-a2"))
    assert (await only_a.read_power_state(parse_target({"outlets": [1]}))).state is PowerState.ON


async def test_offers_shutdown_in_band_and_power_on_through_the_pdu(
    snmp_config: Callable[..., dict[str, Any]],
) -> None:
    cfg = {
        "channels": {
            # stands in for Talos: graceful reboot and shutdown, cannot power on or see off
            "talos": {"type": "simulated", "verbs": ["reboot", "shutdown"], "graceful": True,
                      "readback": "on-only", "machines": {"n1": "on"}},
            "rack-a": {"type": "pdu", **snmp_config("offers")},
        },
        "nodes": {
            "node-1": {"site": "plant-a", "channels": [
                {"channel": "talos", "target": "n1"},
                {"channel": "rack-a", "target": {"outlets": [1, 2]}},
            ]},
        },
    }
    async with PowerHost(parse_config(cfg)) as host:
        offer = host.offer_for("node-1").as_dict()["verbs"]
        assert offer["shutdown"] == {"offered": True, "channel": "talos", "graceful": True,
                                     "recovery": "channel rack-a can power on"}
        assert offer["reboot"] == {"offered": True, "channel": "talos", "graceful": True}
        assert offer["power-on"] == {"offered": True, "channel": "rack-a", "graceful": False}
        assert offer["terminate"]["offered"] is False

        # the machine shut itself down through Talos; its outlets are still energized,
        # so the PDU cannot tell whether it is off: unknown, never off
        await host.invoke("node-1", Verb.SHUTDOWN, reason="maintenance")
        reading = await host.read_power_state("node-1")
        assert reading.state is PowerState.UNKNOWN
        assert "outlet energized; machine not visible" in reading.detail
        # switching on outlets that are on cannot boot it: refused, saying why
        with pytest.raises(RefusedByDevice, match="restore-on-AC"):
            await host.invoke("node-1", Verb.POWER_ON, reason="back to service")


async def test_power_on_through_the_pdu_cycles_when_configured(
    snmp_config: Callable[..., dict[str, Any]],
) -> None:
    cfg = {
        "channels": {
            "talos": {"type": "simulated", "verbs": ["reboot", "shutdown"], "graceful": True,
                      "readback": "on-only", "machines": {"n1": "on"}},
            "rack-a": {"type": "pdu", **snmp_config("offers-cycle", on_when_already_on="cycle")},
        },
        "nodes": {"node-1": {"channels": [
            {"channel": "talos", "target": "n1"},
            {"channel": "rack-a", "target": {"outlets": [3]}},
        ]}},
    }
    async with PowerHost(parse_config(cfg)) as host:
        done = await host.invoke("node-1", Verb.POWER_ON, reason="back to service")
        assert done.channel == "rack-a" and done.detail == "rack-a/3: switched on"
        done = await host.invoke("node-1", Verb.POWER_ON, reason="again")
        assert done.detail == "rack-a/3: already on; switched off and on again"


async def test_invoke_many_batches_every_outlet_into_one_set_per_step(
    snmp_config: Callable[..., dict[str, Any]],
) -> None:
    nodes = {f"n{i}": {"channels": [{"channel": "rack", "target": {"outlets": [i]}}]}
             for i in range(1, 9)}
    cfg = {"channels": {"rack": {"type": "pdu", **snmp_config("batch")}}, "nodes": nodes}
    async with PowerHost(parse_config(cfg)) as host:
        channel = host.channel("rack")
        assert isinstance(channel, PduChannel)
        before = channel.requests()
        results = await host.invoke_many(list(nodes), Verb.REBOOT, reason="kernel")
        assert all(getattr(r, "accepted", False) for r in results.values()), results
        assert channel.requests() - before == 4, (
            "one SET off, one readback GET, one SET on, one readback GET for 8 outlets"
        )

        results = await host.invoke_many(list(nodes), Verb.SHUTDOWN, reason="PSU")
        assert all(getattr(r, "accepted", False) for r in results.values()), results
        for node in nodes:
            assert (await host.read_power_state(node)).state is PowerState.OFF

        results = await host.invoke_many(list(nodes), Verb.POWER_ON, reason="back")
        assert all(getattr(r, "accepted", False) for r in results.values()), results
        again = await host.invoke_many(["n1"], Verb.POWER_ON, reason="again")
        # the PDU refuses a power-on of an outlet that is on; read back on: done, saying so
        assert isinstance(again["n1"], InvokeResult), again["n1"]
        assert again["n1"].readback is PowerState.ON and "already" in again["n1"].detail


async def test_metered_outlet_below_standby_reads_unknown_not_on(
    snmp_config: Callable[..., dict[str, Any]],
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(snmp_config("readback", standby_watts=200))
    reading = await ch.read_power_state(parse_target({"outlets": [1]}))
    assert reading.state is PowerState.UNKNOWN
    assert reading.detail.startswith("outlet energized; machine not visible: draw at or below")
    assert "rack/1 150 W" in reading.detail


async def test_demo_peer_starts_a_pdu_the_host_can_switch(tmp_path: Path) -> None:
    from powerplane.testing import plugin_registry

    peer = plugin_registry().demo_peers["pdu"]
    assert peer.role == "pdu"
    started = peer.start(tmp_path)
    try:
        cfg = {
            "channels": {"demo-pdu": started.config},
            "nodes": {"n1": {"channels": [{"channel": "demo-pdu",
                                           "target": started.targets[0]}]}},
        }
        async with PowerHost(parse_config(cfg)) as host:
            assert (await host.read_power_state("n1")).state is PowerState.ON
            await host.invoke("n1", Verb.SHUTDOWN, reason="demo")
            assert (await host.read_power_state("n1")).state is PowerState.OFF
    finally:
        started.stop()
