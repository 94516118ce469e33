"""PowerHost: bounded fan-out, per-node results, readback and PowerOffConfirmed."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelType,
    InvokeResult,
    PowerHost,
    PowerOffConfirmed,
    PowerState,
    Reading,
    RefusedByDevice,
    UnknownNode,
    Verb,
    hookimpl,
    parse_config,
)
from powerplane.plugins import Registry, load_plugins
from powerplane.sim.channel import SimulatedChannel

HostFor = Callable[[dict[str, Any]], PowerHost]


def fleet(endpoints: int, per: int, **kw: Any) -> dict[str, Any]:
    channels = {
        f"ep{e}": {"type": "simulated",
                   "machines": {f"m{i}": "on" for i in range(per)}, **kw}
        for e in range(endpoints)
    }
    nodes = {
        f"n{e}-{i}": {"channels": [{"channel": f"ep{e}", "target": f"m{i}"}]}
        for e in range(endpoints)
        for i in range(per)
    }
    return {"channels": channels, "nodes": nodes}


async def test_invoke_many_is_bounded_per_endpoint(host_for: HostFor) -> None:
    cfg = fleet(3, 10, latency_ms=20)
    cfg["limits"] = {"per_endpoint": 2, "total": 100}
    async with host_for(cfg) as host:
        results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert all(isinstance(r, InvokeResult) and r.accepted for r in results.values())
        for e in range(3):
            chan = host.channel(f"ep{e}")
            assert isinstance(chan, SimulatedChannel)
            assert chan.peak_active == 2
            assert len(chan.dispatches) == 10


async def test_invoke_many_is_bounded_in_total(host_for: HostFor) -> None:
    cfg = fleet(10, 4, latency_ms=20)
    cfg["limits"] = {"per_endpoint": 4, "total": 3}
    async with host_for(cfg) as host:
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, sum(host.channel(f"ep{e}").active  # type: ignore[attr-defined]
                                     for e in range(10)))
                await asyncio.sleep(0.002)

        watcher = asyncio.create_task(watch())
        await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        watcher.cancel()
        assert 1 <= peak <= 3


async def test_one_nodes_failure_does_not_stop_the_others(host_for: HostFor) -> None:
    cfg = fleet(1, 5)
    cfg["channels"]["ep0"]["faults"] = {"m2": "refused"}
    cfg["nodes"]["lonely"] = {}
    async with host_for(cfg) as host:
        results = await host.invoke_many([*host.nodes, "ghost"], Verb.SHUTDOWN, reason="x")
    assert isinstance(results["n0-2"], RefusedByDevice)
    assert isinstance(results["ghost"], UnknownNode)
    assert "no channel configured" in str(results["lonely"])
    ok = [n for n, r in results.items() if isinstance(r, InvokeResult)]
    assert sorted(ok) == ["n0-0", "n0-1", "n0-3", "n0-4"]


async def test_verb_is_sent_once_and_never_retried(host_for: HostFor) -> None:
    cfg = fleet(1, 1)
    cfg["channels"]["ep0"]["faults"] = {"m0": "refused"}
    async with host_for(cfg) as host:
        with pytest.raises(Exception, match="refused"):
            await host.invoke("n0-0", Verb.REBOOT, reason="x")
        assert host.channel("ep0").calls["reboot"] == 1  # type: ignore[attr-defined]


async def test_invoke_with_wait_reads_back_the_state(host_for: HostFor) -> None:
    async with host_for(fleet(1, 1, transition_ms=300)) as host:
        result = await host.invoke("n0-0", Verb.SHUTDOWN, reason="x", wait=5)
    assert result.readback is PowerState.OFF


async def test_offer_for_unknown_node_names_the_known_ones(host_for: HostFor) -> None:
    async with host_for(fleet(1, 2)) as host:
        with pytest.raises(UnknownNode, match="known nodes: n0-0, n0-1"):
            host.offer_for("nope")


async def test_read_power_state_falls_through_to_a_channel_that_can_see(
    host_for: HostFor,
) -> None:
    cfg = {
        "channels": {
            "talos": {"type": "simulated", "verbs": ["reboot", "shutdown"],
                      "readback": "on-only", "machines": {"t": "off"}},
            "pdu": {"type": "simulated", "graceful": False, "machines": {"o": "off"}},
        },
        "nodes": {
            "both": {"channels": [{"channel": "talos", "target": "t"},
                                  {"channel": "pdu", "target": "o"}]},
            "blind": {"channels": [{"channel": "talos", "target": "t"}]},
        },
    }
    async with host_for(cfg) as host:
        both = await host.read_power_state("both")
        assert (both.state, both.channel) == (PowerState.OFF, "pdu")
        blind = await host.read_power_state("blind")
        assert blind.state is PowerState.UNKNOWN
        assert "cannot be told from one that is unreachable" in blind.detail


async def test_power_off_confirmed_true_when_observed(host_for: HostFor) -> None:
    async with host_for(fleet(1, 1, transition_ms=150)) as host:
        accepted = dt.datetime.now(dt.UTC)
        await host.invoke("n0-0", Verb.SHUTDOWN, reason="x")
        watch = host.confirm_power_off("n0-0", accepted, window=10, cadence=0.05)
        assert watch.status is PowerOffConfirmed.FALSE  # still reading
        assert await watch is PowerOffConfirmed.TRUE
        assert watch.readings >= 2  # it saw the transition first


async def test_power_off_confirmed_unknown_when_no_channel_can_see(host_for: HostFor) -> None:
    cfg = fleet(1, 1, verbs=["reboot", "shutdown"], readback="on-only")
    cfg["recovery"] = {"attendedRack": True}
    async with host_for(cfg) as host:
        accepted = dt.datetime.now(dt.UTC)
        await host.invoke("n0-0", Verb.SHUTDOWN, reason="x")
        watch = host.confirm_power_off("n0-0", accepted, window=10, cadence=0.05)
        assert await watch is PowerOffConfirmed.UNKNOWN
        assert watch.detail == "no channel of this node can observe power off"


async def test_power_off_confirmed_unknown_when_window_closes(host_for: HostFor) -> None:
    cfg = fleet(1, 1)
    cfg["channels"]["ep0"]["faults"] = {"m0": "silent"}
    async with host_for(cfg) as host:
        accepted = dt.datetime.now(dt.UTC)
        await host.invoke("n0-0", Verb.SHUTDOWN, reason="x")
        watch = host.confirm_power_off("n0-0", accepted, window=0.3, cadence=0.05)
        assert await watch is PowerOffConfirmed.UNKNOWN
        assert "window of 0.3 s closed; last reading on" in watch.detail


class SyncChannel:
    """A plain-def channel: the host must run it in worker threads."""

    def __init__(self, name: str, config: Any) -> None:
        self.threads: set[str] = set()

    def capabilities(self, target: str) -> CapabilitySet:
        self.threads.add(threading.current_thread().name)
        return CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON, Verb.SHUTDOWN])

    def reboot(self, target: str) -> Acceptance:
        self.threads.add(threading.current_thread().name)
        return Acceptance("cycled")

    def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    def shutdown(self, target: str) -> None: ...

    def power_on(self, target: str) -> None: ...

    def close(self) -> None: ...


@pytest.fixture
def sync_registry() -> Registry:
    from pydantic import BaseModel

    class Cfg(BaseModel):
        pass

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("syncy", Cfg, SyncChannel))

    reg = load_plugins()
    reg.add_module("sync-test", Plugin())
    return reg


async def test_plain_def_channel_methods_run_in_worker_threads(sync_registry: Registry) -> None:
    cfg = {"channels": {"s": {"type": "syncy"}},
           "nodes": {"n": {"channels": [{"channel": "s", "target": "x"}]}}}
    async with PowerHost(parse_config(cfg, registry=sync_registry)) as host:
        result = await host.invoke("n", Verb.REBOOT, reason="x")
        assert result.detail == "cycled"
        chan = host.channel("s")
        assert isinstance(chan, SyncChannel)
        assert chan.threads and all(t.startswith("powerplane") for t in chan.threads)


class BatchChannel(SimulatedChannel):
    batches: list[list[str]] = []

    async def invoke_batch(self, verb: Verb, targets: list[str]) -> list[Any]:
        BatchChannel.batches.append(list(targets))
        out: list[Any] = []
        for t in targets:
            try:
                out.append(await getattr(self, verb.method)(t))
            except Exception as exc:
                out.append(exc)
        return out


async def test_invoke_many_batches_where_the_channel_can() -> None:
    from powerplane.sim.channel import SimulatedConfig

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("batchy", SimulatedConfig, BatchChannel))

    reg = load_plugins()
    reg.add_module("batch-test", Plugin())
    cfg = fleet(1, 4)
    cfg["channels"]["ep0"]["type"] = "batchy"
    cfg["channels"]["ep0"]["faults"] = {"m3": "refused"}
    BatchChannel.batches = []
    async with PowerHost(parse_config(cfg, registry=reg)) as host:
        results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="x")
    assert BatchChannel.batches == [["m0", "m1", "m2", "m3"]]
    assert [type(r).__name__ for r in results.values()] == [
        "InvokeResult", "InvokeResult", "InvokeResult", "RefusedByDevice"]


async def test_state_file_keeps_dispatches_across_channel_instances(
    tmp_path: Any, host_for: HostFor
) -> None:
    cfg = fleet(1, 1, state_file=str(tmp_path / "sim.json"))
    async with host_for(cfg) as host:
        await host.invoke("n0-0", Verb.SHUTDOWN, reason="x")
    async with host_for(cfg) as host:
        chan = host.channel("ep0")
        assert chan.dispatches == [("shutdown", "m0")]  # type: ignore[attr-defined]
        assert (await host.read_power_state("n0-0")).state is PowerState.OFF


async def test_the_rule_at_dispatch_sees_what_discovery_found_last(host_for: HostFor) -> None:
    # the per-node verdict is kept only until discovery records anything new
    async with host_for(fleet(1, 3)) as host:
        assert all(isinstance(r, InvokeResult) for r in (await host.invoke_many(
            list(host.nodes), Verb.REBOOT, reason="before")).values())
        chan = host.channel("ep0")
        assert isinstance(chan, SimulatedChannel)
        chan._caps = CapabilitySet.empty("the BMC withdrew its reset actions")
        await host.refresh(["n0-1"])
        results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="after")
        # n0-1 was discovered again: the rule withholds it; n0-0 was not, so the host
        # still offers it and the channel's own check refuses it before any I/O
        assert type(results["n0-1"]).__name__ == "NotOffered"
        assert "withdrew" in str(results["n0-1"])
        assert type(results["n0-0"]).__name__ == "NotSupported"
        assert len(chan.dispatches) == 3  # only the first request's
