"""The objects that install the operator: ``powerplane operator manifests``.

:func:`manifests` returns, in apply order: the ``NodeMaintenance`` CRD (from
:func:`powerplane_kubernetes.crd.crd_manifest`, imported on use; when that module is
absent the CRD is left out and :func:`crd_missing` says why), a ServiceAccount, the
ClusterRole (:func:`cluster_role`), its ClusterRoleBinding, a namespaced Role for the
site leases and its RoleBinding, and a two-replica Deployment with ``/healthz`` and
``/readyz`` probes and the metrics port.

The ClusterRole grants exactly the verbs the operator's ports call and nothing else
(the least-privilege test checks every request of the lifecycle tests against it):
nodes get/list/watch/patch; pods list; pods/eviction create; poddisruptionbudgets list;
the ``powerplane.io`` resources get/list/watch/create/update/patch and their status
update/patch; events create; Longhorn nodes get/update and replicas list. Leases are
granted by a Role in the operator's own namespace only (get/create/update).

The Deployment reads its deployment file from a ConfigMap the operator's user writes
(:data:`CONFIG_MAP`, key ``powerplane.yaml``); it is not generated here because it names
the site's nodes and channels.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APP",
    "CONFIG_MAP",
    "HTTP_PORT",
    "LEASE_ROLE",
    "NAME",
    "cluster_role",
    "crd_missing",
    "crd_objects",
    "lease_role",
    "manifests",
]

NAME = "powerplane-operator"
"""The name of the ServiceAccount, ClusterRole, bindings and Deployment."""
LEASE_ROLE = "powerplane-operator-leases"
"""The namespaced Role (and RoleBinding) for the site leases."""
CONFIG_MAP = "powerplane-config"
"""The ConfigMap holding the deployment file (key ``powerplane.yaml``), written by the user."""
APP = "powerplane-operator"
"""The ``app.kubernetes.io/name`` label of the operator's objects and pods."""
HTTP_PORT = 8080
"""The port serving ``/metrics``, ``/healthz`` and ``/readyz``."""

GROUP = "powerplane.io"
"""The API group of the operator's own custom resources."""


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/part-of": "powerplane"}


def _crd_module() -> Any:
    """The CRD module of this distribution, or ``None`` when it is not there (yet)."""
    try:
        from powerplane_kubernetes import crd
    except ImportError:
        return None
    return crd


def crd_missing() -> str | None:
    """Why the CRD is not among the manifests, or ``None`` when it is."""
    if _crd_module() is None:
        return "the NodeMaintenance CRD is left out: powerplane_kubernetes.crd is not installed"
    return None


def crd_objects() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of ``powerplane.io`` (empty when the module is absent)."""
    module = _crd_module()
    if module is None:
        return []
    docs: list[dict[str, Any]] = [module.crd_manifest()]
    extra = getattr(module, "audit_crd_manifest", None)
    if callable(extra):
        docs.append(extra())
    return docs


def _own_resources() -> list[str]:
    """The plural names of the ``powerplane.io`` resources the operator reads and writes."""
    plurals = [str(doc["spec"]["names"]["plural"]) for doc in crd_objects()]
    return plurals or ["nodemaintenances"]


def cluster_role() -> dict[str, Any]:
    """The ClusterRole: exactly the verbs the operator uses, nothing else."""
    own = _own_resources()
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": _labels()},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"],
             "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
            {"apiGroups": [GROUP], "resources": own,
             "verbs": ["get", "list", "watch", "create", "update", "patch"]},
            {"apiGroups": [GROUP], "resources": [f"{r}/status" for r in own],
             "verbs": ["update", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
            {"apiGroups": ["longhorn.io"], "resources": ["nodes"], "verbs": ["get", "update"]},
            {"apiGroups": ["longhorn.io"], "resources": ["replicas"], "verbs": ["list"]},
        ],
    }


def lease_role(namespace: str) -> dict[str, Any]:
    """The Role for the site leases, in the operator's namespace only."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": LEASE_ROLE, "namespace": namespace, "labels": _labels()},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "create", "update"]},
        ],
    }


def _subject(namespace: str) -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]


def _deployment(namespace: str, image: str, replicas: int) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/healthz", "port": "http"},
             "periodSeconds": 10, "failureThreshold": 3}
    ready = {"httpGet": {"path": "/readyz", "port": "http"},
             "periodSeconds": 5, "failureThreshold": 2}
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POWERPLANE_CONFIG", "value": "/etc/powerplane/powerplane.yaml"},
    ]
    container = {
        "name": "operator",
        "image": image,
        "args": ["operator", "run", "--namespace", namespace,
                 "--http-port", str(HTTP_PORT)],
        "env": env,
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "livenessProbe": probe,
        "readinessProbe": ready,
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "config", "mountPath": "/etc/powerplane", "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": APP}},
            "template": {
                "metadata": {
                    "labels": _labels(),
                    "annotations": {"prometheus.io/scrape": "true",
                                    "prometheus.io/port": str(HTTP_PORT),
                                    "prometheus.io/path": "/metrics"},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": CONFIG_MAP}}],
                },
            },
        },
    }


def manifests(namespace: str, image: str, *, replicas: int = 2) -> list[dict[str, Any]]:
    """Every object that installs the operator into ``namespace``, in apply order."""
    return [
        *crd_objects(),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()}},
        cluster_role(),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": NAME, "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": NAME},
         "subjects": _subject(namespace)},
        lease_role(namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": LEASE_ROLE, "namespace": namespace, "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": LEASE_ROLE},
         "subjects": _subject(namespace)},
        _deployment(namespace, image, replicas),
    ]
