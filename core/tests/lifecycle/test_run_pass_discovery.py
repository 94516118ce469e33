"""``Lifecycle.run_pass`` discovers what the nodes under maintenance use, and nothing else.

A host started for no node (``PowerHost(..., nodes=())``, as the CLI starts one) knows no
capability set; each pass first discovers the nodes under maintenance together, from its
one read of the store: one ``capabilities_batch`` call at the simulated channel for two
nodes, none for the fleet's other nodes, none again on later passes. A request discovers
its own node (``preflight``) through the same host.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lifecycle_support import ceremony, make_config

from powerplane import PowerHost, parse_config
from powerplane.lifecycle.model import Phase
from powerplane.lifecycle.service import Lifecycle
from powerplane.sim.channel import SimulatedChannel

TIMEOUT = 60.0
"""An explicit bound on the run (never a timing threshold)."""

WORKERS = tuple(f"w{i}" for i in range(20))


def _discovery_calls(host: PowerHost) -> dict[str, int]:
    lab = host.channel("lab")
    assert isinstance(lab, SimulatedChannel)
    return {k: v for k, v in lab.calls.items() if k.startswith("capabilities")}


async def test_a_pass_discovers_the_nodes_under_maintenance_in_one_call(tmp_path: Path) -> None:
    deployment = parse_config(make_config(tmp_path, workers=WORKERS))
    async with asyncio.timeout(TIMEOUT):
        async with PowerHost(deployment, nodes=()) as host:
            lc = Lifecycle.for_host(host)
            try:
                for node in ("w3", "w5"):
                    await lc.request(node, "reboot", ceremony(node))
                # each request discovered its own node, one call each
                assert _discovery_calls(host) == {"capabilities": 2}
            finally:
                lc.close()
        async with PowerHost(deployment, nodes=()) as host:
            lc = Lifecycle.for_host(host)
            try:
                await lc.run(until_idle=True, max_passes=500)
                # w3 and w5 in one batch at the first pass; no pass discovered anything else
                assert _discovery_calls(host) == {"capabilities_batch": 1}
                assert host.capabilities("lab", "w3") != "not discovered"
                assert all(host.capabilities("lab", n) == "not discovered"
                           for n in (*WORKERS, "cp1", "cp2", "cp3") if n not in ("w3", "w5"))
                for node in ("w3", "w5"):
                    done = [x for x in lc.store.all() if x.spec.node == node]
                    assert [x.phase for x in done] == [Phase.COMPLETE], done
                    assert len(done[0].status.dispatches) == 1
            finally:
                lc.close()
