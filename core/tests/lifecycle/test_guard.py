"""The shared guard of a direct call (ADR 0034 § 5): one derivation, three callers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import ceremony, make_config

from powerplane import PowerHost
from powerplane.capabilities import Verb
from powerplane.config import parse_config
from powerplane.lifecycle import CeremonyRequired, Lifecycle, Phase
from powerplane.lifecycle import guard as guard_mod
from powerplane.lifecycle.direct import LifecycleGuard
from powerplane.lifecycle.guard import GuardRefused

GOOD = "replace the PSU in slot 2"


async def _one_member_powered_off(open_lifecycle: Any) -> Lifecycle:
    """Three control-plane members; cp1 taken to PoweredOff through the lifecycle."""
    lc: Lifecycle = await open_lifecycle()
    m = await lc.request("cp1", "shutdown", ceremony("cp1", hazard=True))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.POWERED_OFF
    return lc


async def test_the_reproduced_call_is_refused(open_lifecycle: Any) -> None:
    """`invoke cp2 reboot --reason x` with cp1 PoweredOff: bad reason, then below quorum."""
    lc = await _one_member_powered_off(open_lifecycle)
    guard = lc.host.guard
    assert guard is not None
    short = (await guard(["cp2"], Verb.REBOOT, "x"))["cp2"]
    assert isinstance(short, CeremonyRequired) and short.exit_code == 2
    assert "at least 8 characters" in str(short) and "reason_policy" in str(short)
    refused = (await guard(["cp2"], Verb.REBOOT, GOOD))["cp2"]
    assert isinstance(refused, GuardRefused) and refused.exit_code == 3
    assert "3 control-plane members, 2 ready, quorum 2, margin 0" in str(refused)
    assert refused.numbers is not None
    assert (refused.numbers.members, refused.numbers.quorum, refused.numbers.margin) == (3, 2, 0)
    assert lc.host.channel("lab").dispatches == [("shutdown", "cp1")]  # nothing else sent


async def test_the_guard_comes_with_the_host_and_reads_through_it(
    open_lifecycle: Any,
) -> None:
    """A host of a deployment with a lifecycle: section carries the lifecycle's guard by
    construction, reading readiness through that very host."""
    lc = await _one_member_powered_off(open_lifecycle)
    guard = lc.host.guard
    assert isinstance(guard, LifecycleGuard) and guard.host is lc.host
    refused = (await guard(["cp3"], Verb.SHUTDOWN, GOOD))["cp3"]
    assert isinstance(refused, GuardRefused)
    assert "quorum 2, margin 0" in str(refused)


async def test_a_node_under_maintenance_is_refused_naming_it(open_lifecycle: Any) -> None:
    lc = await _one_member_powered_off(open_lifecycle)
    guard = lc.host.guard
    assert guard is not None
    name = lc.store.active()[0].name
    refused = (await guard(["cp1"], Verb.REBOOT, GOOD))["cp1"]
    assert isinstance(refused, GuardRefused) and refused.exit_code == 3
    assert refused.maintenance == name and refused.phase is Phase.POWERED_OFF
    assert name in str(refused) and "PoweredOff" in str(refused)
    # power-on passes: it never takes a node out of service
    assert await guard(["cp1"], Verb.POWER_ON, "x") == {"cp1": None}


async def test_a_virtual_node_is_refused(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(labels={"w1": {"powerplane.io/virtual-node": "true"}})
    guard = lc.host.guard
    assert guard is not None
    for verb in (Verb.REBOOT, Verb.SHUTDOWN, Verb.TERMINATE):
        refused = (await guard(["w1"], verb, GOOD))["w1"]
        assert isinstance(refused, GuardRefused) and refused.exit_code == 3
        assert "virtual node" in str(refused)
    assert await guard(["w2"], Verb.REBOOT, GOOD) == {"w2": None}


async def test_nodes_of_one_call_count_against_quorum_together(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    guard = lc.host.guard
    assert guard is not None
    # cp1 consumes the last of the margin: a hazard, which needs its typed reason
    verdicts = await guard(["w1", "cp1", "cp2", "cp3", "w2"], Verb.REBOOT, GOOD,
                           hazard_reason="planned window CHG-1234")
    assert [n for n, v in verdicts.items() if v is None] == ["w1", "cp1", "w2"]
    for node in ("cp2", "cp3"):
        refused = verdicts[node]
        assert isinstance(refused, GuardRefused)
        assert "3 control-plane members, 2 ready, quorum 2, margin 0" in str(refused)


async def test_an_unlabelled_cluster_refuses_saying_what_to_set(open_lifecycle: Any) -> None:
    lc = await open_lifecycle(control_plane=())
    guard = lc.host.guard
    assert guard is not None
    refused = (await guard(["w1"], Verb.REBOOT, GOOD))["w1"]
    assert isinstance(refused, GuardRefused)
    assert "no_control_plane: true" in str(refused)
    assert "node-role.kubernetes.io/control-plane" in str(refused)


async def test_an_unknown_node_is_bad_input(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    guard = lc.host.guard
    assert guard is not None
    unknown = (await guard(["nope"], Verb.REBOOT, GOOD))["nope"]
    assert unknown is not None and unknown.exit_code == 2


def test_no_lifecycle_section_no_guard(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    del cfg["lifecycle"]
    assert PowerHost(parse_config(cfg)).guard is None
    cfg["lifecycle"] = {}
    assert isinstance(PowerHost(parse_config(cfg)).guard, LifecycleGuard)


async def test_one_derivation_three_callers(
    open_lifecycle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request path, the reconciler and a direct call all judge through guard.judge."""
    seen: list[str] = []
    real = guard_mod.judge

    def spy(view: Any, config: Any, node: str, taken: Any) -> Any:
        seen.append(node)
        return real(view, config, node, taken)

    monkeypatch.setattr(guard_mod, "judge", spy)
    lc = await open_lifecycle()
    m = await lc.request("w1", "cordon", ceremony("w1"))
    assert seen == ["w1"]
    await lc.reconcile(m.name)
    assert seen == ["w1", "w1"]
    guard = lc.host.guard
    assert guard is not None
    await guard(["w2"], Verb.REBOOT, GOOD)
    assert seen == ["w1", "w1", "w2"]


async def test_the_reconcilers_own_dispatch_passes_a_guarded_host(tmp_path: Path) -> None:
    """A host carrying the guard still lets a maintenance send its own verb, once."""
    deployment = parse_config(make_config(tmp_path))
    host = PowerHost(deployment)
    assert host.guard is not None
    await host.start()
    lc = Lifecycle.for_host(host)
    try:
        m = await lc.request("w1", "reboot", ceremony("w1"))
        await lc.run(until_idle=True)
        assert lc.store.get(m.name).phase is Phase.COMPLETE
        assert host.channel("lab").dispatches == [("reboot", "w1")]
        await lc.request("cp1", "reboot", ceremony("cp1", hazard=True))
        with pytest.raises(GuardRefused):  # while cp1 is Requested, cp2 may not also go
            await host.invoke("cp2", Verb.REBOOT, reason=GOOD)
        assert ("reboot", "cp2") not in host.channel("lab").dispatches
    finally:
        lc.close()
        await host.close()


async def test_a_direct_call_creates_no_store_and_a_broken_one_stops_it(tmp_path: Path) -> None:
    from powerplane.lifecycle import StoreError

    deployment = parse_config(make_config(tmp_path))
    async with PowerHost(deployment, nodes=()) as host:
        guard = host.guard
        assert guard is not None
        assert await guard(["w1"], Verb.REBOOT, GOOD) == {"w1": None}
        assert not (tmp_path / "lifecycle.db").exists()
        (tmp_path / "lifecycle.db").write_bytes(b"not a database at all" * 100)
        with pytest.raises(StoreError, match=r"lifecycle\.db"):
            await guard(["w1"], Verb.REBOOT, GOOD)
