"""The metal3 channel against the stand-in baremetal-operator: each verb read off the
requests and the host, readback, capabilities per state with reasons, refusals."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from metal3_peers import make_channel, metal3_cluster

from powerplane import NotSupported, PowerState, RefusedByDevice, Verb
from powerplane.testing import send_gate
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_metal3.channel import REBOOT_KEY_PREFIX
from powerplane_metal3.config import parse_target
from powerplane_metal3.testing.operator import BareMetalOperator

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> Iterator[tuple[KubeApiServer, BareMetalOperator]]:
    with metal3_cluster() as world:
        yield world


@pytest.fixture
def kubeconfig(cluster: tuple[KubeApiServer, BareMetalOperator], tmp_path: Path) -> Path:
    return cluster[0].write_kubeconfig(tmp_path / "kubeconfig")


async def _settle(channel: Any, target: Any, state: PowerState, within: float = 5) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while (await channel.read_power_state(target)).state is not state:
        assert loop.time() < end, f"never read {state}"
        await asyncio.sleep(0.05)


def _patches(api: KubeApiServer) -> list[dict[str, Any]]:
    return [r.body for r in api.requests_to("PATCH", "/apis/metal3.io/")]


async def test_shutdown_and_power_on_set_spec_online_naming_the_version_read(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    api, bmo = cluster
    bmo.add_host("metal3", "h0")
    channel = make_channel(kubeconfig)
    target = parse_target("metal3/h0")
    version = bmo.host("metal3", "h0")["metadata"]["resourceVersion"]  # type: ignore[index]
    with send_gate() as gate:
        done = await channel.shutdown(target)
    assert gate.sent and "spec.online set false" in done.detail
    assert _patches(api) == [{"metadata": {"resourceVersion": version},
                              "spec": {"online": False}}]
    await _settle(channel, target, PowerState.OFF)
    assert bmo.actions == ["metal3/h0: power off (soft)"]
    with send_gate():
        await channel.power_on(target)
    await _settle(channel, target, PowerState.ON)
    assert bmo.actions[-1] == "metal3/h0: power on"
    with send_gate() as gate:  # already online: accepted, nothing written
        again = await channel.power_on(target)
    assert "already" in again.detail and len(_patches(api)) == 2
    await channel.close()


async def test_reboot_is_a_phased_annotation_of_its_own_removed_once_off(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    api, bmo = cluster
    bmo.add_host("metal3", "h0", annotations={"reboot.metal3.io/someone-else": ""})
    bmo.add_host("metal3", "h1")
    channel = make_channel(kubeconfig, reboot="hard")
    with send_gate():
        done = await channel.reboot(parse_target("metal3/h1"))
    assert "powered it off (hard reboot" in done.detail
    added, removed = _patches(api)
    (key, value), = added["metadata"]["annotations"].items()
    assert key.startswith(REBOOT_KEY_PREFIX) and json.loads(value) == {"mode": "hard"}
    assert removed == {"metadata": {"annotations": {key: None}}}
    await _settle(channel, parse_target("metal3/h1"), PowerState.ON)
    assert bmo.actions[-2:] == ["metal3/h1: power off (hard)", "metal3/h1: power on"]
    # another requester's annotation keeps h0 off: the channel never touches it
    await _settle(channel, parse_target("metal3/h0"), PowerState.OFF)
    notes = bmo.host("metal3", "h0")["metadata"]["annotations"]  # type: ignore[index]
    assert notes == {"reboot.metal3.io/someone-else": ""}
    await channel.close()


async def test_the_operator_reapplies_online_and_removes_the_plain_annotation(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    api, bmo = cluster
    bmo.add_host("metal3", "h0")
    channel = make_channel(kubeconfig)
    target = parse_target("metal3/h0")
    bmo.power_behind_back("metal3", "h0", False)  # a person at the BMC
    await _settle(channel, target, PowerState.OFF)
    await _settle(channel, target, PowerState.ON)  # spec.online re-applied
    assert bmo.actions == ["metal3/h0: power on"]
    api._change("metal3.io/v1alpha1/baremetalhosts", "metal3", "h0",
                lambda o: o["metadata"].setdefault("annotations", {}).update(
                    {"reboot.metal3.io": ""}))
    await _settle(channel, target, PowerState.OFF)
    await _settle(channel, target, PowerState.ON)
    assert "metal3/h0: removed reboot.metal3.io" in bmo.actions
    assert bmo.host("metal3", "h0")["metadata"]["annotations"] == {}  # type: ignore[index]
    await channel.close()


@pytest.mark.parametrize(("host", "verbs", "reason"), [
    ({"state": "provisioned"}, {"reboot": "graceful", "shutdown": "graceful",
                                "power-on": "hard"}, "soft power-off, hard after"),
    ({"state": "externally provisioned"}, {"reboot": "graceful", "shutdown": "graceful",
                                           "power-on": "hard"}, "externally provisioned"),
    ({"state": "available"}, {"shutdown": "graceful", "power-on": "hard"}, "available"),
    ({"state": "provisioned", "error_count": 2}, {"reboot": "hard", "shutdown": "hard",
                                                 "power-on": "hard"}, "errorCount"),
    ({"state": "provisioned", "disablePowerOff": True}, {"reboot": "graceful",
                                                         "power-on": "hard"}, ""),
    ({"state": "provisioning"}, {}, "'provisioning': the baremetal-operator acts on "
                                    "spec.online only"),
    ({"state": "deprovisioning"}, {}, "'deprovisioning'"),
    ({"state": "inspecting"}, {}, "'inspecting'"),
    ({"state": "provisioned", "operational": "error"}, {}, "operational status error"),
    ({"state": "provisioned", "operational": "detached"}, {}, "is detached"),
    ({"state": "provisioned", "annotations": {"baremetalhost.metal3.io/detached": ""}}, {},
     "is detached"),
    ({"state": "provisioned", "annotations": {"baremetalhost.metal3.io/paused": "x"}}, {},
     "is paused"),
    ({"reported": False}, {}, "has no status.provisioning.state yet"),
])
async def test_capabilities_follow_what_the_operator_will_do(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path,
        host: dict[str, Any], verbs: dict[str, str], reason: str) -> None:
    _, bmo = cluster
    bmo.add_host("metal3", "h0", **host)
    channel = make_channel(kubeconfig)
    caps = await channel.capabilities(parse_target("metal3/h0"))
    assert caps.as_dict() == verbs
    assert reason in caps.detail
    if not verbs:
        reading = await channel.read_power_state(parse_target("metal3/h0"))
        assert reading.state is PowerState.UNKNOWN and reading.detail  # never off unseen
        with send_gate() as gate, pytest.raises(NotSupported, match="metal3/h0"):
            await channel.shutdown(parse_target("metal3/h0"))
        assert not gate.sent
    if host.get("state") == "available":
        assert "honours the reboot annotation only for provisioned" in \
            caps.withheld[Verb.REBOOT]
    if host.get("disablePowerOff"):
        assert "disablePowerOff" in caps.withheld[Verb.SHUTDOWN]
    await channel.close()


async def test_the_operator_refuses_in_the_wrong_state_and_says_why(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    _, bmo = cluster
    bmo.add_host("metal3", "h0", state="provisioning", online=True, powered=False)
    await asyncio.sleep(0.5)
    assert bmo.machines["metal3/h0"] is False and bmo.actions == []
    assert bmo.refused == ["metal3/h0: BareMetalHost metal3/h0 is 'provisioning': the "
                           "baremetal-operator acts on spec.online only in the states "
                           "provisioned, externally provisioned and available"]


async def test_a_missing_host_advertises_nothing_and_reads_as_an_error(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    channel = make_channel(kubeconfig)
    target = parse_target("absent")
    caps = await channel.capabilities(target)
    assert not caps and caps.detail == "no BareMetalHost metal3/absent"
    with pytest.raises(RefusedByDevice, match="no BareMetalHost metal3/absent"):
        await channel.read_power_state(target)
    await channel.close()


async def test_a_reboot_of_a_host_meant_off_is_refused_before_a_write(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    api, bmo = cluster
    bmo.add_host("metal3", "h0", online=False)
    channel = make_channel(kubeconfig)
    with send_gate() as gate, pytest.raises(RefusedByDevice, match=r"spec\.online false"):
        await channel.reboot(parse_target("metal3/h0"))
    assert not gate.sent and _patches(api) == []
    await channel.close()


async def test_a_write_on_a_changed_host_is_judged_again(
        cluster: tuple[KubeApiServer, BareMetalOperator], kubeconfig: Path) -> None:
    _, bmo = cluster
    bmo.add_host("metal3", "h0")
    channel = make_channel(kubeconfig)
    target = parse_target("metal3/h0")
    real = channel._patch
    moved = False

    async def racing(*args: Any) -> None:
        nonlocal moved
        if not moved:  # the host goes to deprovisioning between the read and the write
            moved = True
            bmo.set_state("metal3", "h0", "deprovisioning")
        await real(*args)

    channel._patch = racing  # type: ignore[method-assign,assignment]
    with send_gate(), pytest.raises(NotSupported, match="deprovisioning"):
        await channel.shutdown(target)
    assert (bmo.host("metal3", "h0") or {})["spec"]["online"] is True  # 409: not applied
    await channel.close()


def test_targets() -> None:
    assert str(parse_target("metal3/h0")) == "metal3/h0"
    assert parse_target("h0").namespace is None
    assert parse_target({"node": "w1"}).node == "w1"
    for bad in ("", "Metal3/h0", "ns/H0", {"node": ""}, {"name": "x"}, 3):
        with pytest.raises(ValueError, match="expected a BareMetalHost"):
            parse_target(bad)
