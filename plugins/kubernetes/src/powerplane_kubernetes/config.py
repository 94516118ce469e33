"""The configs of the ``kubernetes`` cluster port, the ``longhorn`` storage port and the
``kubernetes`` store.

::

    lifecycle:
      cluster:
        type: kubernetes
        kubeconfig: ./kubeconfig     # absent: the pod's service account (in-cluster)
        context: admin@prod          # absent: the kubeconfig's current context
        timeouts: {connect_s: 5, read_s: 30}
      storage:
        type: longhorn
        namespace: longhorn-system   # where Longhorn keeps nodes.longhorn.io and replicas
        # kubeconfig / context / timeouts: absent means the cluster port's
      store:
        type: kubernetes             # NodeMaintenance custom resources (.store)
        namespace: powerplane-system # its per-node lock Leases and its Events
        lock_duration_s: 30          # a creator's lock older than this, status unwritten,
                                     # is taken over (the creator stopped)
        # kubeconfig / context / timeouts: absent means the cluster port's when it is
        # ``kubernetes``, else the pod's service account (in-cluster)

A relative ``kubeconfig`` is relative to the deployment file's directory. Node names are
the deployment's node names: each must be the name of a Kubernetes ``Node``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from powerplane import StrictInt, Timeouts

__all__ = [
    "LONGHORN_NAMESPACE",
    "STORE_NAMESPACE",
    "ApiAccess",
    "KubernetesClusterConfig",
    "KubernetesStoreConfig",
    "LonghornConfig",
]

LONGHORN_NAMESPACE = "longhorn-system"
"""The namespace Longhorn is installed into by default."""

STORE_NAMESPACE = "powerplane-system"
"""The namespace of the store's lock Leases and Events by default (the operator's own)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiAccess(_Strict):
    """How to reach the API server: a kubeconfig (and a context in it), or in-cluster."""

    kubeconfig: str | None = None
    """A kubeconfig file; absent: the pod's service account (token, CA and
    ``KUBERNETES_SERVICE_HOST``), as an operator running in the cluster has."""
    context: str | None = Field(None, min_length=1)
    """The kubeconfig context to use; absent: its ``current-context``."""
    timeouts: Timeouts = Field(default_factory=lambda: Timeouts(connect_s=5, read_s=30))
    """Bounds on each API request."""

    def kubeconfig_path(self, config_dir: Path | None) -> Path | None:
        """The kubeconfig file, a relative path taken from ``config_dir``."""
        if self.kubeconfig is None:
            return None
        path = Path(self.kubeconfig).expanduser()
        if not path.is_absolute() and config_dir is not None:
            path = config_dir / path
        return path


class KubernetesClusterConfig(ApiAccess):
    """``lifecycle.cluster: {type: kubernetes}``: nodes, pods and budgets of a real cluster."""

    type: Literal["kubernetes"]


class LonghornConfig(_Strict):
    """``lifecycle.storage: {type: longhorn}``: Longhorn's ``nodes.longhorn.io`` (ADR 0025)."""

    type: Literal["longhorn"]
    namespace: str = Field(LONGHORN_NAMESPACE, min_length=1)
    """The namespace of Longhorn's objects."""
    kubeconfig: str | None = None
    """Absent: the ``kubernetes`` cluster port's kubeconfig (in-cluster when it has none)."""
    context: str | None = Field(None, min_length=1)
    """Absent: the cluster port's context."""
    timeouts: Timeouts | None = None
    """Absent: the cluster port's timeouts."""

    def access(self, cluster: ApiAccess | None) -> ApiAccess:
        """This port's API access: its own keys, the rest from the cluster port's config."""
        base = cluster if cluster is not None else ApiAccess()
        return ApiAccess(
            kubeconfig=self.kubeconfig if self.kubeconfig is not None else base.kubeconfig,
            context=self.context if self.context is not None else base.context,
            timeouts=self.timeouts if self.timeouts is not None else base.timeouts,
        )


class KubernetesStoreConfig(_Strict):
    """``lifecycle.store: {type: kubernetes}``: NodeMaintenance objects on the API server."""

    type: Literal["kubernetes"]
    namespace: str = Field(STORE_NAMESPACE, min_length=1, max_length=63,
                           pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Where the per-node lock Leases and the audit Events are kept (it must exist)."""
    lock_duration_s: StrictInt = Field(30, ge=1, le=3600)
    """How long a creator holds a node's lock Lease before the maintenance's status is
    written; a pending holder's lock older than this is taken over (its creator stopped)."""
    kubeconfig: str | None = None
    """Absent: the ``kubernetes`` cluster port's kubeconfig (in-cluster when it has none)."""
    context: str | None = Field(None, min_length=1)
    """Absent: the cluster port's context."""
    timeouts: Timeouts | None = None
    """Absent: the cluster port's timeouts."""

    def access(self, cluster: ApiAccess | None) -> ApiAccess:
        """This store's API access: its own keys, the rest from the cluster port's config."""
        base = cluster if cluster is not None else ApiAccess()
        return ApiAccess(
            kubeconfig=self.kubeconfig if self.kubeconfig is not None else base.kubeconfig,
            context=self.context if self.context is not None else base.context,
            timeouts=self.timeouts if self.timeouts is not None else base.timeouts,
        )
