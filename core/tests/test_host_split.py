"""The host's parts: one bounded call path (Calls.each) for every call, one rule cache with one
invalidate(), optional channel parts found once into one traits record, the send gate's
public seam."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from powerplane import (
    CapabilitySet,
    ChannelTimeout,
    InvokeResult,
    PowerHost,
    Verb,
    about_to_send,
    parse_config,
)
from powerplane.channel import ChannelTraits, SendGate, enter_gate, leave_gate
from powerplane.host.cache import RuleCache
from powerplane.host.calls import Calls
from powerplane.nodes import NodeSpec
from powerplane.recovery import ChannelView
from powerplane.sim.channel import SimulatedChannel

HostFor = Callable[[dict[str, Any]], PowerHost]


def fleet(endpoints: int, per: int) -> dict[str, Any]:
    return {
        "channels": {f"ep{e}": {"type": "simulated",
                                "machines": {f"m{i}": "on" for i in range(per)}}
                     for e in range(endpoints)},
        "nodes": {f"n{e}-{i}": {"channels": [{"channel": f"ep{e}", "target": f"m{i}"}]}
                  for e in range(endpoints) for i in range(per)},
    }


def record_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    """Every call made through Calls.each (the one call path), as (channel, method, target)."""
    seen: list[tuple[str, str, Any]] = []
    listed: list[Any] = []  # the workers of one fleet call share its queues (kept alive here)
    real = Calls.each

    async def each(self: Calls, slots: Any, queues: Mapping[Any, Iterable[Any]], method: str,
                   *args: Any, **kw: Any) -> None:
        if not any(q is queues for q in listed):
            listed.append(queues)
            seen.extend((job[1], method, job[2]) for q in queues.values() for job in q)
        await real(self, slots, queues, method, *args, **kw)

    monkeypatch.setattr(Calls, "each", each)
    return seen


async def test_a_fleet_call_sends_every_verb_through_the_one_bounded_call(
    host_for: HostFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_for(fleet(3, 4)) as host:
        seen = record_calls(monkeypatch)
        results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="kernel")
        assert all(isinstance(r, InvokeResult) for r in results.values())
        reboots = sorted((n, t) for n, m, t in seen if m == "reboot")
        assert reboots == sorted((f"ep{e}", f"m{i}") for e in range(3) for i in range(4))


async def test_discovery_a_single_invoke_and_a_readback_use_the_same_call(
    host_for: HostFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = record_calls(monkeypatch)
    async with host_for(fleet(1, 1)) as host:
        await host.invoke("n0-0", Verb.REBOOT, reason="kernel")
        await host.read_power_state("n0-0")
    methods = {m for _, m, _ in seen}
    assert {"capabilities", "reboot", "read_power_state"} <= methods


def test_invalidate_empties_the_offers_the_verdicts_and_the_memo_together() -> None:
    asked: list[str] = []
    caps: dict[str, CapabilitySet | str] = {"a": "not discovered"}

    def views(spec: NodeSpec) -> list[ChannelView]:
        asked.append("views")
        return [("a", caps["a"])]

    d = parse_config(fleet(1, 1))
    spec = d.nodes["n0-0"]
    cache = RuleCache(d.recovery, views)
    before = cache.verdicts("n0-0", spec)
    assert cache.verdicts("n0-0", spec) is before  # cached per node
    offer = cache.offer("n0-0", lambda: object())  # type: ignore[arg-type,return-value]
    assert cache.offer("n0-0", lambda: object()) is offer  # type: ignore[arg-type,return-value]
    assert not before[Verb.REBOOT].offered
    caps["a"] = CapabilitySet.of(graceful=[Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON])
    cache.invalidate()
    after = cache.verdicts("n0-0", spec)
    assert after[Verb.REBOOT].offered  # decided again, not from the memo
    assert cache.offer("n0-0", lambda: "new") == "new"  # type: ignore[arg-type,return-value,comparison-overlap]


async def test_a_partial_refresh_leaves_no_verdict_older_than_the_capabilities(
    host_for: HostFor,
) -> None:
    async with host_for(fleet(1, 2)) as host:
        assert host.offer_for("n0-0")[Verb.REBOOT].offered
        plan = await host.plan(["n0-0"], Verb.REBOOT, reason="kernel")
        assert not isinstance(plan["n0-0"], Exception)
        chan = host.channel("ep0")
        assert isinstance(chan, SimulatedChannel)
        chan._caps = CapabilitySet.empty("the BMC withdrew its reset actions")
        await host.refresh(["n0-0"])  # a refresh of one node only
        assert not host.offer_for("n0-0")[Verb.REBOOT].offered
        plan = await host.plan(["n0-0"], Verb.REBOOT, reason="kernel")
        assert isinstance(plan["n0-0"], Exception)


class _Plain:
    def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.empty("nothing")


class _Full(_Plain):
    def endpoint(self, target: str) -> str:
        return "dev"

    def invoke_batch(self, verb: Verb, targets: list[str]) -> list[None]:
        return [None for _ in targets]

    def capabilities_batch(self, targets: list[str]) -> list[CapabilitySet]:
        return [self.capabilities(t) for t in targets]

    def terminate(self, target: str) -> None: ...

    def boot_marker(self, target: str) -> str:
        return "1"

    def identity(self, target: str) -> dict[str, object]:
        return {}


class _Blocked(_Full):
    capabilities_batch = None  # type: ignore[assignment]


def test_optional_parts_are_one_traits_record_found_with_isinstance() -> None:
    plain = ChannelTraits.of(_Plain())
    assert plain == ChannelTraits(None, False, False, False, False, False)
    full = ChannelTraits.of(_Full())
    assert full.endpoint is not None and full.endpoint("x") == "dev"
    assert (full.batch_invoke, full.batch_discovery, full.terminates, full.boot_marker,
            full.identifies) == (True, True, True, True, True)
    assert not ChannelTraits.of(_Blocked()).batch_discovery  # None blocks a part


def test_the_send_gate_is_put_in_force_by_a_with_block() -> None:
    about_to_send()  # outside any gate: nothing to pass
    with SendGate() as gate:
        about_to_send()
    assert gate.sent
    closed = SendGate()
    closed.close()
    with closed, pytest.raises(ChannelTimeout, match="not sent"):
        about_to_send()
    about_to_send()  # the block ended: no gate in force again
    assert not closed.sent


def test_enter_and_leave_gate_are_the_with_block_as_two_calls() -> None:
    gate = SendGate()
    token = enter_gate(gate)
    try:
        about_to_send()
    finally:
        leave_gate(token)
    assert gate.sent
    about_to_send()  # left: no gate in force
