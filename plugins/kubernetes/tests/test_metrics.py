"""The channel call meter and the lease check before a verb, on a real host and channel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from powerplane import PowerHost, parse_config
from powerplane.sim.channel import SimulatedChannel
from powerplane_kubernetes.operator.metrics import OperatorMetrics, metered_deployment


def deployment(faults: dict[str, str] | None = None) -> Any:
    return parse_config({
        "channels": {"lab": {"type": "simulated", "machines": {"m1": "on", "m2": "on"},
                             "latency_ms": 20, "faults": faults or {}}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m1"}]},
                  "n2": {"channels": [{"channel": "lab", "target": "m2"}]}},
    })


def sample(m: OperatorMetrics, name: str, **labels: str) -> float:
    value = m.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_calls_are_timed_by_channel_type_and_method() -> None:
    m = OperatorMetrics()
    async with PowerHost(metered_deployment(deployment(), m)) as host:
        assert isinstance(host.channel("lab"), SimulatedChannel)  # its own type stays
        await host.invoke("n1", "reboot", reason="test")
    count = sample(m, "powerplane_channel_call_seconds_count", channel_type="simulated",
                   method="reboot")
    total = sample(m, "powerplane_channel_call_seconds_sum", channel_type="simulated",
                   method="reboot")
    assert count == 1
    assert total >= 0.02  # the channel's own latency is inside the measured call
    # Discovery is measured too: the two machines of one endpoint in one batch call.
    assert sample(m, "powerplane_channel_call_seconds_count", channel_type="simulated",
                  method="capabilities_batch") == 1
    assert sample(m, "powerplane_channel_call_seconds_count", channel_type="simulated",
                  method="capabilities") == 0
    assert sample(m, "powerplane_channel_calls_in_flight", channel_type="simulated") == 0


async def test_errors_are_counted_by_class() -> None:
    m = OperatorMetrics()
    async with PowerHost(metered_deployment(deployment({"m2": "refused"}), m)) as host:
        with pytest.raises(Exception, match="refused"):
            await host.invoke("n2", "reboot", reason="test")
    assert sample(m, "powerplane_channel_call_errors_total", channel_type="simulated",
                  method="reboot", error_class="RefusedByDevice") == 1


async def test_in_flight_counts_running_calls() -> None:
    m = OperatorMetrics()
    async with PowerHost(metered_deployment(deployment(), m)) as host:
        task = asyncio.gather(host.read_power_state("n1"), host.read_power_state("n2"))
        await asyncio.sleep(0.005)
        running = sample(m, "powerplane_channel_calls_in_flight", channel_type="simulated")
        await task
    assert running == 2


async def test_the_check_before_a_verb_stops_it_before_the_plugin() -> None:
    m = OperatorMetrics()
    seen: list[tuple[str, str, tuple[Any, ...]]] = []

    def refuse(channel: str, method: str, args: tuple[Any, ...]) -> None:
        seen.append((channel, method, args))
        raise asyncio.CancelledError("lease not held")

    async with PowerHost(metered_deployment(deployment(), m, refuse)) as host:
        await host.read_power_state("n1")  # reads are not checked
        with pytest.raises(asyncio.CancelledError):
            await host.invoke("n1", "reboot", reason="test")
        channel = host.channel("lab")
        assert isinstance(channel, SimulatedChannel)
        assert channel.dispatches == []  # nothing reached the machine
    assert seen == [("lab", "reboot", ("m1",))]


def test_phases_and_dispatch_outcomes_are_counted_once() -> None:
    from powerplane.lifecycle import NodeMaintenance
    from powerplane.lifecycle.model import (
        Dispatch,
        DispatchOutcome,
        MaintenanceSpec,
        Phase,
        utcnow,
    )

    def maintenance(name: str, phase: Phase, outcome: DispatchOutcome | None) -> Any:
        m = NodeMaintenance(name=name, spec=MaintenanceSpec(
            node=name, intent="reboot", reason="r", requested_by="alice"))
        m.status.phase = phase
        if outcome is not None:
            m.status.dispatches.append(Dispatch(verb="reboot", channel="lab",
                                                attempt_id=f"{name}-1", outcome=outcome,
                                                recorded_at=utcnow()))
        return m

    metrics = OperatorMetrics()
    old = maintenance("old", Phase.COMPLETE, DispatchOutcome.ACCEPTED)
    metrics.observe([old], count=False)  # history at start-up is not counted
    assert sample(metrics, "powerplane_dispatches_total", verb="reboot",
                  outcome="accepted") == 0
    new = maintenance("new", Phase.REBOOTING, DispatchOutcome.ACCEPTED)
    metrics.observe([old, new])
    metrics.observe([old, new])  # seen again: not counted again
    assert sample(metrics, "powerplane_dispatches_total", verb="reboot",
                  outcome="accepted") == 1
    assert sample(metrics, "powerplane_maintenances", phase="Rebooting") == 1
    new.status.phase = Phase.COMPLETE
    metrics.observe([old, new])
    assert sample(metrics, "powerplane_maintenances", phase="Rebooting") == 0
    assert sample(metrics, "powerplane_maintenances", phase="Complete") == 2
