"""The entry point registers both port types, their configs validate the deployment's keys,
and the factories build the ports from a PortContext-shaped context."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from powerplane.errors import ConfigError
from powerplane.testing import plugin_registry
from powerplane_kubernetes import plugin
from powerplane_kubernetes.cluster import KubernetesCluster
from powerplane_kubernetes.config import KubernetesClusterConfig, LonghornConfig
from powerplane_kubernetes.longhorn import LonghornStorage


def test_the_entry_point_registers_kubernetes_and_longhorn() -> None:
    registry = plugin_registry()
    assert registry.port_types("cluster")["kubernetes"] is plugin.KUBERNETES
    assert registry.port_types("storage")["longhorn"] is plugin.LONGHORN


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="kubeconf"):
        KubernetesClusterConfig.model_validate({"type": "kubernetes", "kubeconf": "x"})


def test_a_missing_kubeconfig_is_bad_input_naming_the_path(tmp_path: Path) -> None:
    config = KubernetesClusterConfig(type="kubernetes", kubeconfig="nope")
    context = SimpleNamespace(labels={}, config_dir=tmp_path, lifecycle=None)
    with pytest.raises(ConfigError) as caught:
        plugin.KUBERNETES.factory(config, context)  # type: ignore[arg-type]
    assert "lifecycle.cluster.kubeconfig" in str(caught.value)
    assert str(tmp_path / "nope") in str(caught.value)


def test_longhorn_takes_the_cluster_ports_access(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text(  # a usable kubeconfig: it is read when the port is made
        "{clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}], users: [{name: u, "
        "user: {}}], contexts: [{name: prod, context: {cluster: c, user: u}}]}")
    cluster = KubernetesClusterConfig(type="kubernetes", kubeconfig="kc", context="prod")
    context = SimpleNamespace(labels={"n1": {"a": "b"}}, config_dir=tmp_path,
                              lifecycle=SimpleNamespace(cluster=cluster))
    storage = plugin.LONGHORN.factory(LonghornConfig(type="longhorn"), context)  # type: ignore[arg-type]
    assert isinstance(storage, LonghornStorage)
    assert storage.api.kubeconfig == tmp_path / "kc"
    assert storage.api.access.context == "prod"
    built = plugin.KUBERNETES.factory(cluster, context)  # type: ignore[arg-type]
    assert isinstance(built, KubernetesCluster)


@pytest.mark.perf
def test_discovery_imports_no_client() -> None:
    import subprocess
    import sys

    code = ("import sys, powerplane_kubernetes.plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('lightkube', 'httpx2', 'kmock')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]", f"perf (plugin load): imported {out.stdout.strip()}"


async def test_the_peer_points_both_ports_at_one_api_server(tmp_path: Path) -> None:
    from powerplane_kubernetes.peer import start

    started = start(tmp_path)
    try:
        started.server.add_node("n1", boot_id="b-7")
        config = KubernetesClusterConfig.model_validate(started.lifecycle["cluster"])
        port = KubernetesCluster(config)
        try:
            assert await port.boot_id("n1") == "b-7"
        finally:
            await port.aclose()
        assert LonghornConfig.model_validate(started.lifecycle["storage"]).type == "longhorn"
    finally:
        started.stop()
