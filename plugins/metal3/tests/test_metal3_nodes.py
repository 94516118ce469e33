"""Nodes from BareMetalHosts: a node's metal3 target ``{node: NAME}`` found by the host's
label or consumerRef, through the host as a deployment runs it; a generated nodes section."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from metal3_peers import channel_config, make_channel, metal3_cluster

from powerplane import PowerHost, PowerState, Verb, parse_config
from powerplane_metal3.nodes import list_hosts, nodes_from_hosts

pytestmark = pytest.mark.timeout(120)


async def test_nodes_find_their_host_by_label_or_consumer_ref(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo):
        bmo.add_host("metal3", "h0", consumer="worker-0")
        bmo.add_host("metal3", "h1", consumer="someone", labels={"powerplane.io/node":
                                                                  "worker-1"})
        bmo.add_host("metal3", "h2", consumer="worker-2")
        bmo.add_host("metal3", "h3", labels={"powerplane.io/node": "worker-2"})
        bmo.add_host("metal3", "h4", consumer="worker-4", state="inspecting")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        nodes = {n: {"channels": [{"channel": "m3", "target": {"node": n}}]}
                 for n in ("worker-0", "worker-1", "worker-2", "worker-3", "worker-4")}
        deployment = parse_config({"channels": {"m3": channel_config(kubeconfig)},
                                   "nodes": nodes, "recovery": {"attendedRack": False}})
        async with PowerHost(deployment) as host:
            await host.discover()
            for node in ("worker-0", "worker-1"):
                offer = host.offer_for(node)
                assert offer[Verb.REBOOT].offered and offer[Verb.REBOOT].channel == "m3"
                assert offer[Verb.SHUTDOWN].offered  # m3 powers it on again: recoverable
            assert "2 BareMetalHosts serve node worker-2: metal3/h2, metal3/h3" in \
                host.offer_for("worker-2")[Verb.REBOOT].reason
            assert "no BareMetalHost serves node worker-3" in \
                host.offer_for("worker-3")[Verb.REBOOT].reason
            assert "'inspecting'" in host.offer_for("worker-4")[Verb.REBOOT].reason
            result = await host.invoke("worker-1", Verb.SHUTDOWN, "test: maintenance")
            assert result is not None
            reading = await host.read_power_state("worker-1")
            for _ in range(100):
                if reading.state is PowerState.OFF:
                    break
                await asyncio.sleep(0.05)
                reading = await host.read_power_state("worker-1")
            assert reading.state is PowerState.OFF
        assert bmo.machines["metal3/h1"] is False and bmo.machines["metal3/h0"] is True


async def test_a_nodes_section_generated_from_the_cluster(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo):
        bmo.add_host("metal3", "h0", consumer="worker-0")
        bmo.add_host("metal3", "h1", labels={"powerplane.io/node": "worker-1"})
        bmo.add_host("metal3", "h2", consumer="worker-1")  # the label on h1 wins for h1 only
        bmo.add_host("metal3", "h3")  # serves no node
        channel = make_channel(api.write_kubeconfig(tmp_path / "kubeconfig"))
        nodes, problems = nodes_from_hosts(await list_hosts(channel), "m3")
        await channel.close()
    assert nodes == {"worker-0": {"channels": [{"channel": "m3", "target": "metal3/h0"}]}}
    assert problems == ["node worker-1 is served by 2 BareMetalHosts: metal3/h1, metal3/h2"]
