"""The plugin module: registers the ``kubernetes`` cluster port and the ``longhorn`` storage port.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    kubernetes = "powerplane_kubernetes.plugin"

The factories import the client (lightkube, httpx2) only when a deployment names the
type, so plugin discovery imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from powerplane import ClusterPort, ClusterType, PortContext, StoragePort, StorageType, hookimpl
from powerplane_kubernetes.config import KubernetesClusterConfig, LonghornConfig

__all__ = ["KUBERNETES", "LONGHORN", "register_cluster_types", "register_storage_types"]


def _cluster(config: KubernetesClusterConfig, context: PortContext) -> ClusterPort:
    from powerplane_kubernetes.cluster import KubernetesCluster

    return KubernetesCluster(config, node_labels=context.labels, config_dir=context.config_dir)


def _longhorn(config: LonghornConfig, context: PortContext) -> StoragePort:
    from powerplane_kubernetes.longhorn import LonghornStorage

    cluster = context.lifecycle.cluster
    access = cluster if isinstance(cluster, KubernetesClusterConfig) else None
    return LonghornStorage(config, cluster=access, config_dir=context.config_dir)


KUBERNETES: ClusterType[KubernetesClusterConfig] = ClusterType(
    name="kubernetes",
    config=KubernetesClusterConfig,
    factory=_cluster,
    description="a Kubernetes cluster: cordon by spec.unschedulable, drain by the "
    "Eviction API (PDBs honoured), readiness and boot id from the Node",
)

LONGHORN: StorageType[LonghornConfig] = StorageType(
    name="longhorn",
    config=LonghornConfig,
    factory=_longhorn,
    description="Longhorn (nodes.longhorn.io / replicas.longhorn.io, ADR 0025 write order)",
)


@hookimpl
def register_cluster_types(register: Callable[[ClusterType[Any]], None]) -> None:
    """Register the ``kubernetes`` cluster port type."""
    register(KUBERNETES)


@hookimpl
def register_storage_types(register: Callable[[StorageType[Any]], None]) -> None:
    """Register the ``longhorn`` storage port type."""
    register(LONGHORN)
