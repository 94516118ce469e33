"""The objects that install the operator: ``powerplane operator manifests``.

:func:`manifests` returns, in apply order: the ``NodeMaintenance`` CRD (from
:func:`powerplane_kubernetes.crd.crd_manifest`, imported on use; when that module is
absent the CRD is left out and :func:`crd_missing` says why), a ServiceAccount, the
ClusterRole (:func:`cluster_role`), its ClusterRoleBinding, a namespaced Role for the
site leases and its RoleBinding, and a two-replica Deployment with ``/healthz`` and
``/readyz`` probes and the metrics port.

The ClusterRole grants exactly the verbs the operator's run uses and nothing else (the
least-privilege tests check every request of the lifecycle tests and of a real ``operator
run`` against it, and that each verb granted is used): nodes get/list/patch; pods list;
pods/eviction create; poddisruptionbudgets list; nodemaintenances get/list/watch/update and
their status update; Longhorn nodes get/update and replicas list. The site Leases are
granted by a Role in the operator's own namespace only (get/create/update).

The operator creates no maintenance: the node's lock Lease, the ``MaintenanceAudit``
record and its Event are written by whoever runs ``powerplane maintenance request`` (and
return, abandon, resolve), a person or a pipeline. :func:`maintainer_role` (ClusterRole
:data:`MAINTAINER`) and :func:`maintainer_lock_role` (a Role in
``lifecycle.store.namespace``, ``--store-namespace``) are what that identity needs; they are
printed unbound (bind them to your people or groups). ``powerplane maintenance run`` acts as
the operator does and needs the operator's roles.

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
    "MAINTAINER",
    "MAINTAINER_LOCKS",
    "NAME",
    "cluster_role",
    "crd_missing",
    "crd_objects",
    "lease_role",
    "maintainer_lock_role",
    "maintainer_role",
    "manifests",
]

NAME = "powerplane-operator"
"""The name of the ServiceAccount, ClusterRole, bindings and Deployment."""
LEASE_ROLE = "powerplane-operator-leases"
"""The namespaced Role (and RoleBinding) for the site leases."""
MAINTAINER = "powerplane-maintainer"
"""The ClusterRole of ``powerplane maintenance request/status/list/return/abandon/resolve``."""
MAINTAINER_LOCKS = "powerplane-maintainer-locks"
"""The Role of the node locks and Events in ``lifecycle.store.namespace``."""
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


def _plurals() -> tuple[str, str | None]:
    """The plural names of the maintenance resource and of the audit one (None: absent)."""
    names = [str(doc["spec"]["names"]["plural"]) for doc in crd_objects()]
    return (names[0] if names else "nodemaintenances"), (names[1] if len(names) > 1
                                                         else None)


def cluster_role() -> dict[str, Any]:
    """The operator's ClusterRole: exactly the verbs its run uses, nothing else."""
    maintenances, _ = _plurals()
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": _labels()},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
            {"apiGroups": [GROUP], "resources": [maintenances],
             "verbs": ["get", "list", "watch", "update"]},
            {"apiGroups": [GROUP], "resources": [f"{maintenances}/status"],
             "verbs": ["update"]},
            {"apiGroups": ["longhorn.io"], "resources": ["nodes"], "verbs": ["get", "update"]},
            {"apiGroups": ["longhorn.io"], "resources": ["replicas"], "verbs": ["list"]},
        ],
    }


def maintainer_role() -> dict[str, Any]:
    """The ClusterRole of whoever requests, returns, abandons and resolves maintenances
    (``powerplane maintenance ...`` with the kubernetes store): the preflight's reads, the
    maintenances (``delete`` only of a pending object its own request could not finish),
    their status, and the audit records."""
    maintenances, audits = _plurals()
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
        {"apiGroups": [GROUP], "resources": [maintenances],
         "verbs": ["get", "list", "create", "update", "delete"]},
        {"apiGroups": [GROUP], "resources": [f"{maintenances}/status"], "verbs": ["update"]},
    ]
    if audits is not None:
        rules.append({"apiGroups": [GROUP], "resources": [audits],
                      "verbs": ["list", "create"]})
    rules += [
        {"apiGroups": ["longhorn.io"], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["longhorn.io"], "resources": ["replicas"], "verbs": ["list"]},
    ]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": MAINTAINER, "labels": _labels()}, "rules": rules}


def maintainer_lock_role(store_namespace: str) -> dict[str, Any]:
    """The Role of the per-node lock Leases and the audit Events, in
    ``lifecycle.store.namespace``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": MAINTAINER_LOCKS, "namespace": store_namespace,
                     "labels": _labels()},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "create", "update"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
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


def manifests(namespace: str, image: str, *, replicas: int = 2,
              store_namespace: str | None = None) -> list[dict[str, Any]]:
    """Every object that installs the operator into ``namespace``, in apply order, then the
    maintainer's roles (unbound; their Role in ``store_namespace``, default ``namespace``)."""
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
        maintainer_role(),
        maintainer_lock_role(store_namespace or namespace),
    ]
