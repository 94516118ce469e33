"""The cluster port against the kmock API server: every claim read off the requests it got."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerplane.lifecycle.ports import PermanentPortError, TemporaryPortError
from powerplane.lifecycle.quorum import derive_membership
from powerplane.testing import closed_port
from powerplane_kubernetes.cluster import KubernetesCluster
from powerplane_kubernetes.config import KubernetesClusterConfig
from powerplane_kubernetes.testing.apiserver import NODES, PODS, KubeApiServer
from powerplane_kubernetes.testing.schemas import validate_written

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"

EVICT = "/api/v1/namespaces/default/pods/"


def patches(api: KubeApiServer) -> list[tuple[str, object]]:
    return [(r.path, r.body) for r in api.requests_to("PATCH")]


async def test_cordon_writes_once_and_uncordon_once(api: KubeApiServer,
                                                    cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    await cluster.cordon("n1")
    await cluster.cordon("n1")  # already unschedulable: read, no write
    assert patches(api) == [("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})]
    assert await cluster.is_cordoned("n1")
    node = api.object(NODES, None, "n1")
    assert node is not None and node["spec"]["unschedulable"] is True
    await cluster.uncordon("n1")
    await cluster.uncordon("n1")
    assert patches(api)[1:] == [("/api/v1/nodes/n1", {"spec": {"unschedulable": False}})]
    assert not await cluster.is_cordoned("n1")


async def test_a_cordoned_node_gets_no_write(api: KubeApiServer,
                                             cluster: KubernetesCluster) -> None:
    api.add_node("n1", unschedulable=True)
    await cluster.cordon("n1")
    assert patches(api) == []


async def test_cordon_of_an_absent_node_is_permanent(api: KubeApiServer,
                                                     cluster: KubernetesCluster) -> None:
    with pytest.raises(PermanentPortError, match='cordoning node ghost: HTTP 404 NotFound'):
        await cluster.cordon("ghost")


async def test_drain_refused_by_a_pdb_names_it_then_proceeds(api: KubeApiServer,
                                                             cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    api.add_pod("default", "web-1", "n1", labels={"app": "web"})
    api.add_pod("default", "batch-1", "n1", labels={"app": "batch"})
    api.add_pdb("default", "web-pdb", {"app": "web"}, allowed=0)
    first = await cluster.drain("n1")
    assert not first.done
    assert first.remaining == ("default/web-1",)
    assert dict(first.blocked) == {"default/web-1": "web-pdb"}
    assert "blocked by PDB web-pdb (default/web-1)" in first.describe()
    assert api.object(PODS, "default", "web-1") is not None  # refused: still there
    assert sorted(r.path for r in api.requests_to("POST", EVICT)) == [
        EVICT + "batch-1/eviction", EVICT + "web-1/eviction"]
    again = await cluster.drain("n1")  # tried again, refused again: never swallowed
    assert dict(again.blocked) == {"default/web-1": "web-pdb"}
    api.set_pdb_allowed("default", "web-pdb", 1)
    last = await cluster.drain("n1")
    assert last.done and last.describe() == "no pods left"
    assert api.object(PODS, "default", "web-1") is None


async def test_a_bare_429_is_attributed_to_the_covering_pdb(api: KubeApiServer,
                                                            cluster: KubernetesCluster) -> None:
    api.budget_cause = False
    api.add_node("n1")
    api.add_pod("default", "db-0", "n1", labels={"app": "db", "tier": "data"})
    api.add_pdb("default", "db-budget", {"app": "db"}, allowed=0)
    api.add_pdb("other", "db-budget-elsewhere", {"app": "db"}, allowed=0)
    progress = await cluster.drain("n1")
    assert dict(progress.blocked) == {"default/db-0": "db-budget"}
    assert api.requests_to("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets")


async def test_a_429_no_budget_explains_is_a_temporary_error(
        api: KubeApiServer, cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    api.add_pod("default", "lone", "n1", labels={"app": "lone"})
    api.add_pdb("kube-system", "x", {"app": "lone"}, allowed=0)  # another namespace: not it
    api.throttle_evictions = True  # the API server's own rate limit, no budget involved
    with pytest.raises(TemporaryPortError, match="no PodDisruptionBudget covers the pod"):
        await cluster.drain("n1")


async def test_daemonset_and_mirror_pods_are_left(api: KubeApiServer,
                                                  cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    api.add_pod("kube-system", "fluentd-x", "n1", owner_kind="DaemonSet")
    api.add_pod("kube-system", "kube-apiserver-n1", "n1", owner_kind="Node", mirror=True)
    api.add_pod("default", "web-1", "n1")
    api.add_pod("default", "elsewhere", "n2")
    assert await cluster.pods_on("n1") == ["default/web-1"]
    progress = await cluster.drain("n1")
    assert progress.done
    assert [r.path for r in api.requests_to("POST")] == [EVICT + "web-1/eviction"]
    assert api.object(PODS, "kube-system", "fluentd-x") is not None
    assert api.object(PODS, "kube-system", "kube-apiserver-n1") is not None
    lists = api.requests_to("GET", "/api/v1/pods")
    assert lists and all(r.query.get("fieldSelector") == "spec.nodeName=n1" for r in lists)


async def test_drain_waits_for_terminating_pods_without_evicting_again(
        cluster_config: KubernetesClusterConfig, tmp_path: Path) -> None:
    with KubeApiServer(linger=True) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kc")
        port = KubernetesCluster(cluster_config.model_copy(update={"kubeconfig": str(kubeconfig)}))
        try:
            api.add_node("n1")
            api.add_pod("default", "web-1", "n1")
            first = await port.drain("n1")
            assert first.remaining == ("default/web-1",) and not first.blocked
            second = await port.drain("n1")
            assert second.remaining == ("default/web-1",)
            assert len(api.requests_to("POST")) == 1  # terminating: not evicted again
            assert api.finish_terminating() == ["default/web-1"]
            assert (await port.drain("n1")).done
        finally:
            await port.aclose()


async def test_pdbs_for_names_the_budgets_covering_the_pods(api: KubeApiServer,
                                                            cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    api.add_pod("default", "web-1", "n1", labels={"app": "web"})
    api.add_pod("default", "db-0", "n1", labels={"app": "db"})
    api.add_pdb("default", "web-pdb", {"app": "web"}, allowed=1)
    api.add_pdb("default", "cache-pdb", {"app": "cache"}, allowed=1)
    pods = await cluster.pods_on("n1")
    assert await cluster.pdbs_for(pods) == ["web-pdb"]


async def test_readiness_boot_id_and_labels(api: KubeApiServer,
                                            cluster: KubernetesCluster) -> None:
    api.add_node("cp1", labels={CONTROL_PLANE: ""}, boot_id="b-1")
    api.add_node("cp2", labels={CONTROL_PLANE: ""}, ready=False)
    api.add_node("w1", ready=None, boot_id=None)
    assert await cluster.is_ready("cp1") is True
    assert await cluster.is_ready("cp2") is False
    assert await cluster.is_ready("w1") is None  # no Ready condition: cannot tell
    assert await cluster.is_ready("ghost") is None
    assert await cluster.boot_id("cp1") == "b-1"
    assert await cluster.boot_id("w1") is None
    api.set_boot_id("cp1", "b-2")
    api.set_ready("cp2", True)
    assert await cluster.boot_id("cp1") == "b-2"
    assert await cluster.is_ready("cp2") is True
    labels = await cluster.labels()
    assert derive_membership(labels, CONTROL_PLANE) == ["cp1", "cp2"]


async def test_deployment_labels_sit_under_the_cluster_labels(
        api: KubeApiServer, cluster_config: KubernetesClusterConfig, kubeconfig: Path) -> None:
    api.add_node("n1", labels={"zone": "a"})
    port = KubernetesCluster(cluster_config, config_dir=kubeconfig.parent,
                             node_labels={"n1": {"zone": "b", "powerplane.io/virtual-node": ""},
                                          "bare": {"rack": "r1"}})
    try:
        assert await port.labels() == {
            "n1": {"zone": "a", "powerplane.io/virtual-node": ""}, "bare": {"rack": "r1"}}
    finally:
        await port.aclose()


async def test_an_unreachable_api_server_is_temporary(
        cluster_config: KubernetesClusterConfig, tmp_path: Path) -> None:
    dead = KubeApiServer()
    dead.url = f"http://127.0.0.1:{closed_port()}"
    path = dead.write_kubeconfig(tmp_path / "dead")
    port = KubernetesCluster(cluster_config.model_copy(update={"kubeconfig": str(path)}))
    try:
        with pytest.raises(TemporaryPortError, match="cannot be reached"):
            await port.cordon("n1")
    finally:
        await port.aclose()


async def test_every_written_object_passes_the_kubernetes_schema(
        api: KubeApiServer, cluster: KubernetesCluster) -> None:
    api.add_node("n1")
    api.add_pod("default", "web-1", "n1", labels={"app": "web"})
    api.add_pdb("default", "web-pdb", {"app": "web"}, allowed=1)
    await cluster.cordon("n1")
    await cluster.drain("n1")
    await cluster.uncordon("n1")
    checked, unchecked = validate_written(api.writes())
    assert checked == 3 and unchecked == []
