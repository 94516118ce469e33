"""The plugin module: registers the ``kubernetes`` cluster port, the ``longhorn`` storage port,
the ``kubernetes`` store and the ``k8s`` secret reference kind.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    kubernetes = "powerplane_kubernetes.plugin"

The factories import the client (lightkube, httpx2) only when a deployment names the
type (or a secret reference of kind ``k8s`` is resolved), so plugin discovery imports
neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from powerplane import (
    ClusterPort,
    ClusterType,
    MaintenanceStore,
    PortContext,
    SecretKind,
    StoragePort,
    StorageType,
    StoreContext,
    StoreType,
    hookimpl,
)
from powerplane_kubernetes.config import (
    KubernetesClusterConfig,
    KubernetesStoreConfig,
    LonghornConfig,
)
from powerplane_kubernetes.secrets import K8S

__all__ = [
    "K8S",
    "KUBERNETES",
    "KUBERNETES_STORE",
    "LONGHORN",
    "register_cluster_types",
    "register_secret_kinds",
    "register_storage_types",
    "register_store_types",
]


def _cluster(config: KubernetesClusterConfig, context: PortContext) -> ClusterPort:
    from powerplane_kubernetes.cluster import KubernetesCluster

    return KubernetesCluster(config, node_labels=context.labels, config_dir=context.config_dir)


def _longhorn(config: LonghornConfig, context: PortContext) -> StoragePort:
    from powerplane_kubernetes.longhorn import LonghornStorage

    cluster = context.lifecycle.cluster
    access = cluster if isinstance(cluster, KubernetesClusterConfig) else None
    return LonghornStorage(config, cluster=access, config_dir=context.config_dir)


def _store(config: KubernetesStoreConfig, context: StoreContext) -> MaintenanceStore:
    from powerplane_kubernetes.store import KubernetesStore

    cluster = context.lifecycle.cluster
    access = config.access(cluster if isinstance(cluster, KubernetesClusterConfig) else None)
    return KubernetesStore(access, context.config_dir, namespace=config.namespace,
                           create=context.create, lock_duration_s=config.lock_duration_s)


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

KUBERNETES_STORE: StoreType[KubernetesStoreConfig] = StoreType(
    name="kubernetes",
    config=KubernetesStoreConfig,
    factory=_store,
    description="NodeMaintenance custom resources on the API server (resourceVersion "
    "concurrency, one lock Lease per node, audit as MaintenanceAudit objects and Events)",
)


@hookimpl
def register_cluster_types(register: Callable[[ClusterType[Any]], None]) -> None:
    """Register the ``kubernetes`` cluster port type."""
    register(KUBERNETES)


@hookimpl
def register_storage_types(register: Callable[[StorageType[Any]], None]) -> None:
    """Register the ``longhorn`` storage port type."""
    register(LONGHORN)


@hookimpl
def register_store_types(register: Callable[[StoreType[Any]], None]) -> None:
    """Register the ``kubernetes`` store type."""
    register(KUBERNETES_STORE)


@hookimpl
def register_secret_kinds(register: Callable[[SecretKind], None]) -> None:
    """Register the ``k8s`` secret reference kind (``{k8s: NAMESPACE/NAME/KEY}``)."""
    register(K8S)
