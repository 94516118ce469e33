"""Fixtures: one kmock API server per test (its own world), a kubeconfig that reaches it,
and the two ports built on it the way a deployment builds them (kubeconfig file)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from powerplane_kubernetes.cluster import KubernetesCluster
from powerplane_kubernetes.config import KubernetesClusterConfig, LonghornConfig
from powerplane_kubernetes.longhorn import LonghornStorage
from powerplane_kubernetes.testing.apiserver import KubeApiServer

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(api: KubeApiServer, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def cluster_config(kubeconfig: Path) -> KubernetesClusterConfig:
    return KubernetesClusterConfig(type="kubernetes", kubeconfig=kubeconfig.name,
                                   timeouts={"connect_s": 2, "read_s": 5})


@pytest.fixture
async def cluster(cluster_config: KubernetesClusterConfig,
                  kubeconfig: Path) -> AsyncIterator[KubernetesCluster]:
    port = KubernetesCluster(cluster_config, config_dir=kubeconfig.parent)
    yield port
    await port.aclose()


@pytest.fixture
async def longhorn(cluster_config: KubernetesClusterConfig,
                   kubeconfig: Path) -> AsyncIterator[LonghornStorage]:
    port = LonghornStorage(LonghornConfig(type="longhorn"), cluster=cluster_config,
                           config_dir=kubeconfig.parent)
    yield port
    await port.aclose()
