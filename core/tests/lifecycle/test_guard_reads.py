"""How the guard reads the cluster: the simulated cluster's readiness from its own machine
model (no channel request), the members' readiness in one concurrent round, and
control-plane membership derived once per labels mapping."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import CP_LABEL, ceremony, make_config

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.lifecycle import Lifecycle, MaintenanceRefused, Phase
from powerplane.lifecycle.cluster import DrainProgress
from powerplane.lifecycle.guard import observe
from powerplane.lifecycle.quorum import derive_membership
from powerplane.settings.lifecycle import SimulatedClusterConfig, lifecycle_config
from powerplane.sim.cluster import SimulatedCluster

CPS = ("cp1", "cp2", "cp3")


def _split_config(tmp: Path, **cp_channel: Any) -> dict[str, Any]:
    """make_config's deployment with the control-plane members on a channel of their own."""
    cfg = make_config(tmp)
    cfg["channels"]["cp"] = {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {n: "on" for n in CPS}, **cp_channel}
    for n in CPS:
        del cfg["channels"]["lab"]["machines"][n]
        cfg["nodes"][n]["channels"] = [{"channel": "cp", "target": n}]
    return cfg


async def _started(cfg: dict[str, Any]) -> tuple[PowerHost, Lifecycle]:
    host = PowerHost(parse_config(cfg))
    await host.start()
    return host, Lifecycle.for_host(host)


async def test_a_maintenance_reads_no_member_power_through_the_channel(tmp_path: Path) -> None:
    """A worker's whole reboot maintenance: the guard judged quorum every step, and the
    members' channel saw no power readback (readiness comes from the machine model)."""
    host, lc = await _started(_split_config(tmp_path, latency_ms=5))
    try:
        cp = host.channel("cp")
        before = cp.calls["read_power_state"]
        m = await lc.request("w1", "reboot", ceremony("w1"))
        await lc.run(until_idle=True)
        assert lc.store.get(m.name).phase is Phase.COMPLETE
        assert host.channel("lab").dispatches == [("reboot", "w1")]
        assert cp.calls["read_power_state"] - before == 0
        assert cp.dispatches == []
    finally:
        lc.close()
        await host.close()


async def test_a_member_whose_machine_is_off_is_not_ready_and_quorum_holds(
    tmp_path: Path,
) -> None:
    """cp1's machine switched off at the rack (no maintenance): cp2 may not be rebooted."""
    host, lc = await _started(_split_config(tmp_path))
    try:
        host.channel("cp").set_state("cp1", "off")
        view = await observe(lc.ports.cluster, lc.config)
        assert view.ready == {"cp1": False, "cp2": True, "cp3": True}
        with pytest.raises(MaintenanceRefused, match="3 control-plane members, 2 ready"):
            await lc.request("cp2", "reboot", ceremony("cp2", hazard=True))
        assert host.channel("cp").dispatches == []
    finally:
        lc.close()
        await host.close()


async def test_a_blind_channel_does_not_hide_a_ready_member(tmp_path: Path) -> None:
    """Readback none cannot see power, but the node's own state can: on is ready, off not."""
    host, lc = await _started(_split_config(tmp_path, readback="none"))
    try:
        host.channel("cp").set_state("cp3", "off")
        view = await observe(lc.ports.cluster, lc.config)
        assert view.ready == {"cp1": True, "cp2": True, "cp3": False}
    finally:
        lc.close()
        await host.close()


# -- one concurrent round ------------------------------------------------------------------------
class _Members:
    """A cluster port whose readiness reads log their start and end; each read waits until
    every member's read has started (reads one after another would never get there)."""

    applicable = True

    def __init__(self, members: int, failing: set[str] | None = None) -> None:
        self.names = [f"cp{i}" for i in range(members)]
        self.log: list[tuple[str, str]] = []
        self.failing = failing or set()
        self._all_started = asyncio.Event()

    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        return {n: {CP_LABEL: ""} for n in self.names} | {"w1": {}}

    async def is_ready(self, node: str) -> bool | None:
        self.log.append(("start", node))
        if sum(1 for what, _ in self.log if what == "start") == len(self.names):
            self._all_started.set()
        await self._all_started.wait()
        self.log.append(("end", node))
        if node in self.failing:
            raise RuntimeError(f"cannot read {node}")
        return node != self.names[-1]

    async def boot_id(self, node: str) -> str | None:
        return None

    async def cordon(self, node: str) -> None: ...

    async def uncordon(self, node: str) -> None: ...

    async def is_cordoned(self, node: str) -> bool:
        return False

    async def pods_on(self, node: str) -> list[str]:
        return []

    async def pdbs_for(self, pods: list[str]) -> list[str]:
        return []

    async def drain(self, node: str) -> DrainProgress:
        return DrainProgress()


@pytest.mark.parametrize("members", [3, 5, 7])
async def test_the_members_readiness_is_read_in_one_round(members: int) -> None:
    cluster = _Members(members)
    config = lifecycle_config({"store": ":memory:"}, "<test>")
    async with asyncio.timeout(10):
        view = await observe(cluster, config)
    starts = [i for i, (what, _) in enumerate(cluster.log) if what == "start"]
    ends = [i for i, (what, _) in enumerate(cluster.log) if what == "end"]
    assert len(starts) == len(ends) == members
    assert max(starts) < min(ends)  # every read started before any finished
    assert view.members == sorted(cluster.names)
    assert view.ready == {n: n != cluster.names[-1] for n in cluster.names}


async def test_a_failed_read_fails_the_view_after_every_read_ended() -> None:
    """The first failure in member order is raised; no read is left running."""
    cluster = _Members(4, failing={"cp1", "cp3"})
    config = lifecycle_config({"store": ":memory:"}, "<test>")
    with pytest.raises(RuntimeError, match="cannot read cp1"):
        async with asyncio.timeout(10):
            await observe(cluster, config)
    assert sorted(n for what, n in cluster.log if what == "end") == cluster.names


# -- membership derived once per labels mapping --------------------------------------------------
class _CountingLabels(Mapping[str, Mapping[str, str]]):
    """A labels mapping that counts how often it is walked."""

    def __init__(self, data: dict[str, dict[str, str]]) -> None:
        self._data = data
        self.walks = 0

    def __getitem__(self, key: str) -> Mapping[str, str]:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_membership_is_derived_once_per_labels_mapping() -> None:
    data = {f"n{i}": {} for i in range(100)} | {"cp2": {CP_LABEL: ""}, "cp1": {CP_LABEL: ""}}
    labels = _CountingLabels(data)
    first = derive_membership(labels, CP_LABEL)
    walks = labels.walks
    assert first == ["cp1", "cp2"] and walks >= 1
    for _ in range(50):
        assert derive_membership(labels, CP_LABEL) == ["cp1", "cp2"]
    assert labels.walks == walks
    assert first is not None
    first.append("changed by a caller")  # a caller's list is its own
    assert derive_membership(labels, CP_LABEL) == ["cp1", "cp2"]
    # another mapping, another label: derived afresh, with the same results as before
    other = _CountingLabels({"a": {"x": ""}, "b": {}})
    assert derive_membership(other, "x") == ["a"]
    assert derive_membership(labels, "x") is None
    assert derive_membership({"w1": {}, "w2": {"x": "y"}}, CP_LABEL) is None


# -- the simulated cluster reads every member in one call ----------------------------------------
async def test_ready_many_agrees_with_is_ready_node_by_node() -> None:
    """Forced not ready, off, in transition, modelled on, not modelled (the readback answers,
    ``none`` counts as ready), the readback failing: the same answer either way."""
    models = {"on": "on", "off": "off", "moving": "rebooting", "forced": "on"}
    power = {"rb-on": "on", "rb-off": "off", "rb-unknown": "unknown", "bare": "none"}
    asked: list[str] = []

    async def power_of(node: str) -> str:
        asked.append(node)
        return power[node]

    names = [*models, *power]
    cluster = SimulatedCluster(SimulatedClusterConfig(type="simulated"),
                               {n: {} for n in names}, power_of, None, models.get)
    cluster.set_ready("forced", False)
    single = {n: await cluster.is_ready(n) for n in names}
    assert single == {"on": True, "off": False, "moving": False, "forced": False,
                      "rb-on": True, "rb-off": False, "rb-unknown": False, "bare": True}
    asked.clear()
    assert dict(await cluster.ready_many(names)) == single
    assert sorted(asked) == sorted(power)  # only nodes the model does not carry are read back

    async def failing(node: str) -> str:
        raise RuntimeError(f"cannot read {node}")

    broken = SimulatedCluster(SimulatedClusterConfig(type="simulated"),
                              {n: {} for n in names}, failing, None, models.get)
    with pytest.raises(RuntimeError, match="cannot read rb-on"):
        await broken.ready_many(names)


async def test_observe_of_a_simulated_cluster_uses_one_call(tmp_path: Path) -> None:
    host, lc = await _started(_split_config(tmp_path))
    try:
        cluster = lc.ports.cluster
        assert isinstance(cluster, SimulatedCluster)
        calls: list[tuple[str, ...]] = []
        many = cluster.ready_many

        async def counted(nodes: Sequence[str]) -> Mapping[str, bool | None]:
            calls.append(tuple(nodes))
            return await many(nodes)

        cluster.ready_many = counted  # type: ignore[method-assign]
        view = await observe(cluster, lc.config)
        assert calls == [CPS]
        assert view.ready == dict.fromkeys(CPS, True)
    finally:
        lc.close()
        await host.close()
