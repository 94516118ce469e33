"""The simulated cluster finds each node's simulated machine once, and reads it every time.

:class:`~powerplane.sim.machines.SimulatedMachines` remembers *where* a node's machine
is (which channel object, which target), never its state: every readiness and boot read
asks the machine's model again. What it remembers is used only while the host's
deployment is the same object and the host gives the very same channel objects; a host
closed and used again (new channel objects) or a new deployment makes it look again.
Counted, never timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifecycle_support import ceremony, make_config

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.lifecycle import Phase, guard
from powerplane.sim.machines import SimulatedMachines, machine_boots, machine_model_state


def _machines(lc: Any) -> SimulatedMachines:
    found = lc.ports.cluster._model_of.__self__
    assert isinstance(found, SimulatedMachines)
    return found


async def test_a_maintenance_looks_each_node_up_once_and_reads_its_machine_every_time(
        open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    machines = _machines(lc)
    reads = {"n": 0}
    state = machines.state

    def counted(node: str) -> str | None:
        reads["n"] += 1
        return state(node)

    lc.ports.cluster._model_of = counted
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    # three members read before every step, and the node itself: four lookups in all
    assert machines.lookups == 4 and reads["n"] > 4 * 3, (machines.lookups, reads)
    # the state is read live: a member that goes off is seen at once, by the guard too
    lc.host.channel("lab").set_state("cp1", "off")
    assert await lc.ports.cluster.is_ready("cp1") is False
    view = await guard.observe(lc.ports.cluster, lc.config)
    assert view.ready["cp1"] is False
    lc.host.channel("lab").set_state("cp1", "on")
    assert await lc.ports.cluster.is_ready("cp1") is True
    assert machines.lookups == 4


async def test_a_host_closed_and_used_again_is_looked_up_again(open_lifecycle: Any) -> None:
    lc = await open_lifecycle()
    machines = _machines(lc)
    assert machines.state("cp1") == "on"
    old = lc.host.channel("lab")
    old.set_state("cp1", "off")
    assert machines.state("cp1") == "off" and machines.lookups == 1
    await lc.host.close()  # its channels go; the next use creates new ones (all on again)
    assert lc.host.channel("lab") is not old
    assert machines.state("cp1") == "on" == machine_model_state(lc.host, "cp1")
    assert machines.boots("cp1") == machine_boots(lc.host, "cp1")
    assert machines.lookups == 2
    assert await lc.ports.cluster.is_ready("cp1") is True


async def test_a_new_deployment_is_looked_up_again(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    host = PowerHost(parse_config(cfg))
    await host.start()
    try:
        machines = SimulatedMachines(host)
        assert machines.state("w1") == "on"
        moved = make_config(tmp_path)
        moved["channels"]["lab2"] = {"type": "simulated", "machines": {"w1": "off"}}
        moved["nodes"]["w1"]["channels"] = [{"channel": "lab2", "target": "w1"}]
        host.deployment = parse_config(moved)
        assert machines.state("w1") == "off" == machine_model_state(host, "w1")
        assert machines.lookups == 2
    finally:
        await host.close()


async def test_what_it_finds_is_what_a_fresh_lookup_finds(tmp_path: Path) -> None:
    """Every kind of node: its machine on the first channel, behind a channel that does
    not carry the target (the next one answers), and on no simulated machine at all."""
    cfg = make_config(tmp_path)
    cfg["channels"]["spare"] = {"type": "simulated", "machines": {"far": "off"}}
    cfg["nodes"]["far"] = {"channels": [{"channel": "lab", "target": "far"},
                                        {"channel": "spare", "target": "far"}]}
    cfg["nodes"]["ghost"] = {"channels": [{"channel": "lab", "target": "ghost"}]}
    cfg["nodes"]["bare"] = {"channels": []}
    host = PowerHost(parse_config(cfg))
    await host.start()
    try:
        machines = SimulatedMachines(host)
        host.channel("lab").set_state("w2", "off")
        for _ in range(2):  # looked up, then remembered
            for node in host.nodes:
                assert machines.state(node) == machine_model_state(host, node), node
                assert machines.boots(node) == machine_boots(host, node), node
        assert machines.state("far") == "off"
        assert machines.state("ghost") is None and machines.state("bare") is None
        assert machines.lookups == len(host.nodes)
    finally:
        await host.close()
