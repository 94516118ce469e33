"""The plugin module: registers the ``kubernetes`` cluster port, the ``longhorn`` storage port,
the ``kubernetes`` store, the ``k8s`` secret reference kind, the ``kubernetes`` policy
type (RBAC verbs on ``servers.powerplane.io``, :mod:`powerplane_kubernetes.policy`). The
``metal3`` channel type and its ``metal3.guard`` check are a distribution of their own,
powerplane-metal3 (``powerplane_metal3``), which uses this one's API client.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    kubernetes = "powerplane_kubernetes.plugin"

:data:`REGISTERS` names what the hooks register, so the registry calls a hook (importing
the config models and building :data:`KUBERNETES` and its siblings) only when a deployment
names one of its types or a ``k8s`` secret kind is looked up; the factories import the
client (lightkube, httpx2) only when a port is made, so plugin discovery imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import PolicyType, SecretKind
    from powerplane.lifecycle import (
        ClusterPort,
        ClusterType,
        MaintenanceStore,
        PortContext,
        StoragePort,
        StorageType,
        StoreContext,
        StoreType,
    )
    from powerplane_kubernetes.config import (
        KubernetesClusterConfig,
        KubernetesStoreConfig,
        LonghornConfig,
    )
    from powerplane_kubernetes.policy import KubernetesPolicyConfig

    K8S: SecretKind
    KUBERNETES_POLICY: PolicyType[KubernetesPolicyConfig]
    KUBERNETES: ClusterType[KubernetesClusterConfig]
    KUBERNETES_STORE: StoreType[KubernetesStoreConfig]
    LONGHORN: StorageType[LonghornConfig]

__all__ = [
    "K8S",
    "KUBERNETES",
    "KUBERNETES_POLICY",
    "KUBERNETES_STORE",
    "LONGHORN",
    "REGISTERS",
    "register_cluster_types",
    "register_policy_types",
    "register_secret_kinds",
    "register_storage_types",
    "register_store_types",
]

REGISTERS: Registers = {"cluster": ("kubernetes",), "storage": ("longhorn",),
                        "store": ("kubernetes",), "secret": ("k8s",),
                        "policy": ("kubernetes",)}
"""What the hooks register, read by the registry without calling them."""


def _cluster(config: KubernetesClusterConfig, context: PortContext) -> ClusterPort:
    from powerplane_kubernetes.cluster import KubernetesCluster

    return KubernetesCluster(config, node_labels=context.labels, config_dir=context.config_dir)


def _longhorn(config: LonghornConfig, context: PortContext) -> StoragePort:
    from powerplane_kubernetes.config import KubernetesClusterConfig
    from powerplane_kubernetes.longhorn import LonghornStorage

    cluster = context.lifecycle.cluster
    access = cluster if isinstance(cluster, KubernetesClusterConfig) else None
    return LonghornStorage(config, cluster=access, config_dir=context.config_dir)


def _store(config: KubernetesStoreConfig, context: StoreContext) -> MaintenanceStore:
    from powerplane_kubernetes.config import KubernetesClusterConfig
    from powerplane_kubernetes.store import KubernetesStore

    cluster = context.lifecycle.cluster
    access = config.access(cluster if isinstance(cluster, KubernetesClusterConfig) else None)
    return KubernetesStore(access, context.config_dir, namespace=config.namespace,
                           create=context.create, lock_duration_s=config.lock_duration_s,
                           crashpoint=context.crashpoint, signer=context.signer)


def _kubernetes() -> ClusterType[KubernetesClusterConfig]:
    from powerplane.lifecycle import ClusterType
    from powerplane_kubernetes.config import KubernetesClusterConfig

    return ClusterType(
        name="kubernetes",
        config=KubernetesClusterConfig,
        factory=_cluster,
        description="a Kubernetes cluster: cordon by spec.unschedulable, drain by the "
        "Eviction API (PDBs honoured), readiness and boot id from the Node",
    )


def _longhorn_type() -> StorageType[LonghornConfig]:
    from powerplane.lifecycle import StorageType
    from powerplane_kubernetes.config import LonghornConfig

    return StorageType(
        name="longhorn",
        config=LonghornConfig,
        factory=_longhorn,
        description="Longhorn (nodes.longhorn.io / replicas.longhorn.io, ADR 0025 write order)",
    )


def _store_type() -> StoreType[KubernetesStoreConfig]:
    from powerplane.lifecycle import StoreType
    from powerplane_kubernetes.config import KubernetesStoreConfig

    return StoreType(
        name="kubernetes",
        config=KubernetesStoreConfig,
        factory=_store,
        description="NodeMaintenance custom resources on the API server (resourceVersion "
        "concurrency, one lock Lease per node, audit as MaintenanceAudit objects and Events)",
    )


def _k8s() -> SecretKind:
    from powerplane_kubernetes.secrets import K8S

    return K8S


def _policy_type() -> PolicyType[KubernetesPolicyConfig]:
    from powerplane_kubernetes.policy import KUBERNETES_POLICY

    return KUBERNETES_POLICY


__getattr__, __dir__ = lazy_exports(__name__, {
    "K8S": _k8s, "KUBERNETES": _kubernetes, "KUBERNETES_POLICY": _policy_type,
    "KUBERNETES_STORE": _store_type, "LONGHORN": _longhorn_type,
})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_cluster_types(register: Callable[[ClusterType[Any]], None]) -> None:
    """Register the ``kubernetes`` cluster port type."""
    register(__getattr__("KUBERNETES"))


@hookimpl
def register_storage_types(register: Callable[[StorageType[Any]], None]) -> None:
    """Register the ``longhorn`` storage port type."""
    register(__getattr__("LONGHORN"))


@hookimpl
def register_store_types(register: Callable[[StoreType[Any]], None]) -> None:
    """Register the ``kubernetes`` store type."""
    register(__getattr__("KUBERNETES_STORE"))


@hookimpl
def register_secret_kinds(register: Callable[[SecretKind], None]) -> None:
    """Register the ``k8s`` secret reference kind (``{k8s: NAMESPACE/NAME/KEY}``)."""
    register(__getattr__("K8S"))


@hookimpl
def register_policy_types(register: Callable[[PolicyType[Any]], None]) -> None:
    """Register the ``kubernetes`` policy type (a SubjectAccessReview per node)."""
    register(__getattr__("KUBERNETES_POLICY"))
