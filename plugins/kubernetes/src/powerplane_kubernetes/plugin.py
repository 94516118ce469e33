"""The plugin module: registers the ``kubernetes`` cluster port, the ``longhorn`` storage port,
the ``kubernetes`` store, the ``k8s`` secret reference kind, the ``kubernetes`` policy
type (RBAC verbs on ``servers.powerplane.io``, :mod:`powerplane_kubernetes.policy`) and the
``metal3`` channel type (power through Metal3's BareMetalHosts,
:mod:`powerplane_kubernetes.metal3`), and the deployment check ``metal3.guard`` (a
``redfish``, ``ipmi`` or ``pdu`` channel to a BMC a BareMetalHost manages is refused,
:mod:`powerplane_kubernetes.metal3.guard`).

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    kubernetes = "powerplane_kubernetes.plugin"

:data:`REGISTERS` names what the hooks register, so the registry calls a hook (importing
the config models and building :data:`KUBERNETES` and its siblings) only when a deployment
names one of its types or a ``k8s`` secret kind is looked up; the factories import the
client (lightkube, httpx2) only when a port is made, so plugin discovery imports neither.
``register_deployment_checks`` is not declared there: core calls it alone, on first use; the
check it registers imports the guard only for a deployment with a ``metal3`` channel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import (
        ChannelType,
        ConfigProblem,
        Deployment,
        DeploymentCheck,
        PolicyType,
        SecretKind,
    )
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
    from powerplane_kubernetes.metal3.channel import Metal3Channel
    from powerplane_kubernetes.metal3.config import Metal3ChannelConfig, Metal3Target
    from powerplane_kubernetes.policy import KubernetesPolicyConfig

    K8S: SecretKind
    KUBERNETES_POLICY: PolicyType[KubernetesPolicyConfig]
    KUBERNETES: ClusterType[KubernetesClusterConfig]
    KUBERNETES_STORE: StoreType[KubernetesStoreConfig]
    LONGHORN: StorageType[LonghornConfig]
    METAL3: ChannelType[Metal3ChannelConfig, Metal3Target]

__all__ = [
    "K8S",
    "KUBERNETES",
    "KUBERNETES_POLICY",
    "KUBERNETES_STORE",
    "LONGHORN",
    "METAL3",
    "REGISTERS",
    "metal3_unknown_target",
    "register_channel_types",
    "register_cluster_types",
    "register_deployment_checks",
    "register_policy_types",
    "register_secret_kinds",
    "register_storage_types",
    "register_store_types",
]

REGISTERS: Registers = {"cluster": ("kubernetes",), "storage": ("longhorn",),
                        "store": ("kubernetes",), "secret": ("k8s",),
                        "policy": ("kubernetes",), "channel": ("metal3",)}
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


def _metal3_factory(name: str, config: Metal3ChannelConfig) -> Metal3Channel:
    from powerplane_kubernetes.metal3.channel import Metal3Channel

    return Metal3Channel(name, config)


def metal3_unknown_target(target: Metal3Target) -> Any:
    """For the conformance suite: a BareMetalHost (or a node) of the same namespace that the
    cluster does not have."""
    suffix = "-powerplane-conformance-unknown"
    if target.node is not None:
        return {"node": f"{target.node}{suffix}"}
    name = f"{str(target.name)[:253 - len(suffix)]}{suffix}"
    return f"{target.namespace}/{name}" if target.namespace else name


def _metal3() -> ChannelType[Metal3ChannelConfig, Metal3Target]:
    from powerplane import ChannelType
    from powerplane_kubernetes.metal3.config import Metal3ChannelConfig, parse_target

    return ChannelType(
        name="metal3",
        config=Metal3ChannelConfig,
        factory=_metal3_factory,
        target=parse_target,
        description="Metal3 BareMetalHosts: spec.online and the reboot annotation, through "
        "the baremetal-operator; readback from status.poweredOn",
        gated_sends=True,  # every PATCH of a BareMetalHost passes about_to_send()
        unknown_target=metal3_unknown_target,
    )


def _policy_type() -> PolicyType[KubernetesPolicyConfig]:
    from powerplane_kubernetes.policy import KUBERNETES_POLICY

    return KUBERNETES_POLICY


__getattr__, __dir__ = lazy_exports(__name__, {
    "K8S": _k8s, "KUBERNETES": _kubernetes, "KUBERNETES_POLICY": _policy_type,
    "KUBERNETES_STORE": _store_type, "LONGHORN": _longhorn_type, "METAL3": _metal3,
})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``metal3`` channel type (BareMetalHosts through the baremetal-operator)."""
    register(__getattr__("METAL3"))


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


async def _metal3_guard(deployment: Deployment) -> list[ConfigProblem]:
    """The ``metal3.guard`` check: nothing imported, nothing asked, without a ``metal3``
    channel (no cluster named); else :func:`powerplane_kubernetes.metal3.guard.check_deployment`."""
    if not any(c.type.name == "metal3" for c in deployment.channels.values()):
        return []
    from powerplane_kubernetes.metal3.guard import check_deployment

    return await check_deployment(deployment)


@hookimpl
def register_deployment_checks(register: Callable[[DeploymentCheck], None]) -> None:
    """Register ``metal3.guard``: a redfish, ipmi or pdu channel to the BMC of a
    BareMetalHost (in the cluster a ``metal3`` channel names) is refused, naming it."""
    from powerplane import DeploymentCheck

    register(DeploymentCheck(
        name="metal3.guard", check=_metal3_guard,
        description="a redfish, ipmi or pdu channel to the BMC of a BareMetalHost is "
        "refused (asked of the cluster a metal3 channel names)"))
