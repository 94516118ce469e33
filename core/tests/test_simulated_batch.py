"""The simulated channel's ``capabilities_batch``: many machines discovered in one call.

One session, one latency and one password check per batch; each machine's outcome is the
one ``capabilities(machine)`` gives (its fault, an unknown machine, a rejected password).
The host uses it for every channel and endpoint with two or more targets to discover; a
subclass with a ``capabilities`` of its own is asked per target, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    CapabilitySet,
    ChannelTimeout,
    PowerHost,
    PowerplaneError,
    RefusedByDevice,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane.channel import BatchDiscovery
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig

TIMEOUT = 30.0
"""An explicit bound on each operation of a test (never a timing threshold)."""


def _channel(**kw: Any) -> SimulatedChannel:
    machines = kw.pop("machines", {f"m{i}": "on" for i in range(6)})
    return SimulatedChannel("lab", SimulatedConfig(machines=machines, **kw))


async def _per_target(ch: SimulatedChannel, target: str) -> CapabilitySet | PowerplaneError:
    try:
        return await ch.capabilities(target)
    except PowerplaneError as exc:
        return exc


def _same(a: CapabilitySet | PowerplaneError, b: CapabilitySet | PowerplaneError) -> bool:
    if isinstance(a, CapabilitySet) or isinstance(b, CapabilitySet):
        return a == b
    return type(a) is type(b) and str(a) == str(b)


def test_it_is_a_batch_discovery_and_an_overriding_subclass_is_not() -> None:
    class Own(SimulatedChannel):
        async def capabilities(self, target: str) -> CapabilitySet:
            return await super().capabilities(target)

    class Both(Own):
        async def capabilities_batch(self, targets: Any) -> Any:
            return await SimulatedChannel.capabilities_batch(self, targets)

    config = SimulatedConfig(machines={"m": "on"})
    assert isinstance(SimulatedChannel("a", config), BatchDiscovery)
    assert not isinstance(Own("b", config), BatchDiscovery)
    assert isinstance(Both("c", config), BatchDiscovery)


@pytest.mark.parametrize("kw", [
    {"faults": {"m1": "unreachable", "m2": "auth", "m3": "timeout", "m4": "refused",
                "m5": "silent"}, "timeout_s": 0.05},
    {"faults": {"*": "lost-answer", "m1": "unreachable"}, "timeout_s": 0.05},
    {"password": {"env": "PP_SIM_GIVEN"}, "expect_password": {"env": "PP_SIM_WANTED"},
     "faults": {"m1": "unreachable"}},
    {"readback": "on-only", "graceful": False},
], ids=["faults", "star-fault", "password", "hard-blind"])
async def test_each_target_gets_what_capabilities_gives_it(
    kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PP_SIM_GIVEN", "one")
    monkeypatch.setenv("PP_SIM_WANTED", "another")
    ch = _channel(**kw)
    targets = [*(f"m{i}" for i in range(6)), "ghost"]
    async with asyncio.timeout(TIMEOUT):
        batch = await ch.capabilities_batch(targets)
        each = [await _per_target(ch, t) for t in targets]
    assert len(batch) == len(targets)
    for target, a, b in zip(targets, batch, each, strict=True):
        assert _same(a, b), (target, a, b)
    assert ch.calls["capabilities_batch"] == 1


async def test_the_fault_classes_per_target() -> None:
    ch = _channel(faults={"m1": "unreachable", "m2": "auth", "m3": "timeout"}, timeout_s=0.05)
    async with asyncio.timeout(TIMEOUT):
        out = await ch.capabilities_batch(["m0", "m1", "m2", "m3", "ghost"])
    assert isinstance(out[0], CapabilitySet)
    assert [type(o) for o in out[1:]] == [Unreachable, AuthenticationFailed, ChannelTimeout,
                                         RefusedByDevice]
    assert all(getattr(o, "target", None) == t
               for o, t in zip(out[1:], ["m1", "m2", "m3", "ghost"], strict=True))


async def test_one_session_and_one_latency_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    ch = _channel(latency_ms=5, session_limit=1,
                  machines={f"m{i}": "on" for i in range(100)})
    sleeps: list[None] = []
    real = SimulatedChannel._sleep

    def counted(self: SimulatedChannel) -> Any:
        sleeps.append(None)
        return real(self)

    monkeypatch.setattr(SimulatedChannel, "_sleep", counted)
    async with asyncio.timeout(TIMEOUT):
        out = await ch.capabilities_batch([f"m{i}" for i in range(100)])
    assert all(isinstance(o, CapabilitySet) for o in out)
    assert len(sleeps) == 1 and ch.peak_active == 1 and ch.active == 0
    assert dict(ch.calls) == {"capabilities_batch": 1}


async def test_the_host_discovers_a_simulated_endpoint_in_one_call() -> None:
    machines = {f"m{i}": "on" for i in range(500)}
    cfg = {
        "channels": {"lab": {"type": "simulated", "machines": machines, "latency_ms": 1,
                             "faults": {"m7": "unreachable"}}},
        "nodes": {f"n{i}": {"channels": [{"channel": "lab", "target": f"m{i}"}]}
                  for i in range(500)},
    }
    async with asyncio.timeout(TIMEOUT), PowerHost(parse_config(cfg)) as host:
        lab = host.channel("lab")
        assert isinstance(lab, SimulatedChannel)
        assert dict(lab.calls) == {"capabilities_batch": 1}
        assert host.offer_for("n0")[Verb.REBOOT].offered
        assert isinstance(host.discovery_error("n7"), Unreachable)
        assert not host.offer_for("n7")[Verb.REBOOT].offered
        # one node discovered again on its own: one capabilities call
        await host.refresh(["n3"])
        assert lab.calls["capabilities"] == 1
