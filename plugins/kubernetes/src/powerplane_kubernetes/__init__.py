"""powerplane-kubernetes: the lifecycle's ports on the Kubernetes API.

* cluster port ``kubernetes`` (:class:`KubernetesCluster`): cordon by ``spec.unschedulable``,
  drain through the ``policy/v1`` Eviction API with PodDisruptionBudgets honoured and named,
  readiness from the ``Ready`` condition, boot id from ``status.nodeInfo.bootID``;
* storage port ``longhorn`` (:class:`LonghornStorage`): ``nodes.longhorn.io`` and
  ``replicas.longhorn.io`` exactly as ADR 0025 settles them.

Every name below is imported on first use (:func:`powerplane.lazy_exports`), so plugin
discovery imports neither lightkube nor httpx2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_kubernetes.client import KubeApi
    from powerplane_kubernetes.cluster import KubernetesCluster
    from powerplane_kubernetes.config import ApiAccess, KubernetesClusterConfig, LonghornConfig
    from powerplane_kubernetes.errors import map_error
    from powerplane_kubernetes.longhorn import LonghornStorage

__version__ = "0.1.0"

__all__ = [
    "ApiAccess",
    "KubeApi",
    "KubernetesCluster",
    "KubernetesClusterConfig",
    "LonghornConfig",
    "LonghornStorage",
    "map_error",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ApiAccess": ".config",
    "KubeApi": ".client",
    "KubernetesCluster": ".cluster",
    "KubernetesClusterConfig": ".config",
    "LonghornConfig": ".config",
    "LonghornStorage": ".longhorn",
    "map_error": ".errors",
})
