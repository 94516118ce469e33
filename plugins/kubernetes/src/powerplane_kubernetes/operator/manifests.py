"""The objects that install the operator: ``powerplane operator manifests``.

:func:`manifests` returns, in apply order, so that one ``kubectl apply -f -`` installs it
on a clean cluster: the operator's ``Namespace`` (and the store's, when
``lifecycle.store.namespace`` is another), the ``NodeMaintenance`` CRD (from
:func:`powerplane_kubernetes.crd.crd_manifest`, imported on use; when that module is
absent the CRD is left out and :func:`crd_missing` says why), a ServiceAccount, the
ClusterRole (:func:`cluster_role`), its ClusterRoleBinding, a namespaced Role for the
site leases and its RoleBinding, a Role and RoleBinding per namespace holding Secrets the
deployment file references (:func:`secret_roles`), and a two-replica Deployment of
:data:`IMAGE` (what ``./dev image`` builds) with ``/healthz`` and ``/readyz`` probes and
the metrics port.

Secrets: the operator gets ``get`` on exactly the Secrets the deployment file names in
``{k8s: NAMESPACE/NAME/KEY}`` references (``resourceNames``, one Role per namespace), and
no Secret at all when it names none (:func:`referenced_secrets`).

In the cluster (:func:`in_cluster`): the image's root file system is read-only; ``/tmp``
is always an ``emptyDir``, and :data:`DATA_DIR` (the working directory) is one when a
``state_file`` is configured (a simulated world: per pod, gone with it). A SQLite
lifecycle store is refused (``ConfigError``, exit 2): its file would live inside one pod,
where ``maintenance request`` run anywhere else never reaches it, each replica would keep
its own, and an ``emptyDir`` loses every maintenance, its dispatch record and its audit
when the pod is replaced (a PVC keeps it for one pod at a time, not for two replicas, and
SQLite's locking is not safe on network file systems). The ``kubernetes`` store keeps
them in the API server.

The ClusterRole grants exactly the verbs the operator's run uses and nothing else (the
least-privilege tests check every request of the lifecycle tests and of a real ``operator
run`` against it, and that each verb granted is used): nodes get/list/patch; pods list;
pods/eviction create; poddisruptionbudgets list; nodemaintenances get/list/watch/update and
their status update (it alone writes status); maintenancedispatches create/get/list/watch
(the dispatch ledger: no role updates or deletes an entry); ``record`` on the virtual
``auditrecorders`` (a record of another identity: a request whose creator wrote none, a
deletion, a regression); maintenanceaudits watch/create (a request's record when its
creator wrote none; the watch tells which it did); Longhorn nodes get/update and replicas
list. The site Leases are granted by a Role in the operator's own namespace only
(get/create/update), the node locks it takes at admission by a Role in
``lifecycle.store.namespace`` (:func:`operator_lock_role`).

The operator creates no maintenance: the ``NodeMaintenance``, its ``MaintenanceAudit``
record and the record's Event are written by whoever runs ``powerplane maintenance
request`` (and return, abandon, resolve), a person or a pipeline. :func:`maintainer_role`
(ClusterRole :data:`MAINTAINER`) and :func:`maintainer_lock_role` (a Role in
``lifecycle.store.namespace``, ``--store-namespace``: Events only, no Lease) are what that
identity needs; they are printed unbound (bind them to your people or groups). No requester
role holds a status verb, a dispatch ledger verb or a Lease verb. ``powerplane maintenance
run`` acts as the operator does and needs the operator's roles.

**The admission policies** (:mod:`.admission`, printed here in apply order after the CRDs):
``powerplane-requester`` binds a NodeMaintenance's ``spec`` and ``requests`` to the API
server's authenticated requester (and a deletion to one who may abandon it), and keeps
its ``powerplane.io/*`` labels and annotations and its finalizer to the executor;
``powerplane-executor`` keeps its ``status`` and the dispatch ledger
(``maintenancedispatches``) to the executor and refuses a status that moves back;
``powerplane-audit`` binds a ``MaintenanceAudit``'s actor to its creator unless the creator
is a recorder (the operator, the Servers gateway), who then names itself as ``recordedBy``.

**Roles for people, printed unbound** (:func:`people_roles`): :data:`ADMIN` (every
``servers`` verb; nodemaintenances create/get/list/watch/update; maintenanceaudits
get/list/create), :data:`VIEWER` (``servers`` get; nodemaintenances and maintenanceaudits
get/list/watch) and the delegation example :data:`ENGINEER` (``servers`` cordon and
uncordon only, and what creating and updating a NodeMaintenance takes). A wildcard role
(``cluster-admin``) passes every ``servers`` verb too.

**The Servers surface in Kubernetes mode** (``powerplane serve`` with the ``kubernetes``
store, :mod:`powerplane_kubernetes.gateway`; ``operator manifests --server`` prints these,
:func:`server_manifests`): a ServiceAccount :data:`SERVER` and its ClusterRole
(:func:`server_role`), exactly what the gateway itself uses: ``create`` on
``tokenreviews`` (who a bearer token is) and ``subjectaccessreviews`` (the ``kubernetes``
policy's decision for each caller); ``get``/``list`` on nodes, ``list`` on pods and
poddisruptionbudgets, Longhorn's nodes ``get`` and replicas ``list`` (the pre-flight);
``get``/``list``/``watch`` on nodemaintenances (a maintenance and its live view; the
watch the pages' phases and each act's early refusal read);
``list``/``create`` on maintenanceaudits (the audit trail, and the denials it records),
``record`` on ``auditrecorders`` (those records name the identity it verified, and itself
as ``recordedBy``); and ``create`` on Events in ``lifecycle.store.namespace``
(:func:`server_events_role`, the denial record's notification). No Node write, no
NodeMaintenance write, no Lease: every act is the caller's own request, made with the
caller's token (passthrough), which the API server authenticates and the admission policy
binds. :func:`server_impersonation_role` (:data:`SERVER_IMPERSONATE`: ``impersonate`` on
``users``, ``groups`` and ``serviceaccounts``) is printed unbound: bind it to
:data:`SERVER` only for ``kubernetes: {credentials: impersonate}``,
where the gateway then can act as anyone.

The Deployment reads its deployment file from a ConfigMap the operator's user writes
(:data:`CONFIG_MAP`, key ``powerplane.yaml``); it is not generated here because it names
the site's nodes and channels.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from powerplane_kubernetes import __version__
from powerplane_kubernetes.operator.admission import RECORDERS, admission_name, policies

if TYPE_CHECKING:
    from powerplane import Deployment

__all__ = [
    "ADMIN",
    "APP",
    "CONFIG_MAP",
    "DATA_DIR",
    "ENGINEER",
    "HTTP_PORT",
    "IMAGE",
    "LEASE_ROLE",
    "MAINTAINER",
    "MAINTAINER_LOCKS",
    "NAME",
    "OPERATOR_LOCKS",
    "SECRETS_ROLE",
    "SERVER",
    "SERVER_EVENTS",
    "SERVER_IMPERSONATE",
    "SERVER_VERBS",
    "VIEWER",
    "InCluster",
    "cluster_role",
    "crd_missing",
    "crd_objects",
    "in_cluster",
    "lease_role",
    "maintainer_lock_role",
    "maintainer_role",
    "manifests",
    "namespace_object",
    "operator_lock_role",
    "people_roles",
    "referenced_secrets",
    "secret_roles",
    "server_events_role",
    "server_impersonation_role",
    "server_manifests",
    "server_role",
]

NAME = "powerplane-operator"
"""The name of the ServiceAccount, ClusterRole, bindings and Deployment."""
LEASE_ROLE = "powerplane-operator-leases"
"""The namespaced Role (and RoleBinding) for the site leases."""
OPERATOR_LOCKS = "powerplane-operator-locks"
"""The Role (and RoleBinding) of the node locks the operator takes when it admits a request,
in ``lifecycle.store.namespace``."""
MAINTAINER = "powerplane-maintainer"
"""The ClusterRole of ``powerplane maintenance request/status/list/return/abandon/resolve``."""
MAINTAINER_LOCKS = "powerplane-maintainer-locks"
"""The requester's Role in ``lifecycle.store.namespace``: the audit records' Events only (no
Lease: the executor takes the node locks; the name is kept for existing bindings)."""
CONFIG_MAP = "powerplane-config"
"""The ConfigMap holding the deployment file (key ``powerplane.yaml``), written by the user."""
APP = "powerplane-operator"
"""The ``app.kubernetes.io/name`` label of the operator's objects and pods."""
HTTP_PORT = 8080
"""The port serving ``/metrics``, ``/healthz`` and ``/readyz``."""
IMAGE = f"powerplane:{__version__}"
"""The operator's image as ``./dev image`` tags it (``plugins/kubernetes/image``)."""
SECRETS_ROLE = "powerplane-operator-secrets"
"""The Role (and RoleBinding) granting ``get`` on the referenced Secrets of one namespace."""
DATA_DIR = "/var/lib/powerplane"
"""The image's working directory: an ``emptyDir`` when a ``state_file`` is configured."""
RUN_AS = 65532
"""The image's user and group (``powerplane``; no root)."""

GROUP = "powerplane.io"
"""The API group of the operator's own custom resources."""
SERVER = "powerplane-server"
"""The ServiceAccount, ClusterRole and binding of ``powerplane serve`` in Kubernetes mode."""
SERVER_EVENTS = "powerplane-server-events"
"""The Role (and RoleBinding) of the Events of the denials the server records, in
``lifecycle.store.namespace``."""
SERVER_IMPERSONATE = "powerplane-server-impersonate"
"""The ClusterRole of ``kubernetes: {credentials: impersonate}`` (printed unbound)."""
ADMIN = "powerplane-admin"
"""The ClusterRole of every action (unbound)."""
VIEWER = "powerplane-viewer"
"""The ClusterRole of reading servers, maintenances and their audit (unbound)."""
ENGINEER = "powerplane-maintenance-engineer"
"""The delegation example: cordon and uncordon only (unbound)."""
SERVER_VERBS = ("get", "cordon", "uncordon", "drain", "reboot", "shutdown", "power-on",
                "terminate", "maintenance-abandon", "maintenance-resolve")
"""Every RBAC verb of ``servers.powerplane.io`` (``get`` is ``servers:read``):
:func:`powerplane_kubernetes.policy.rbac_verb` of each action."""


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
    docs: list[dict[str, Any]] = list(module.crd_manifests())
    return docs


def _plurals() -> tuple[str, str | None]:
    """The plural names of the maintenance resource and of the audit one (None: absent)."""
    names = [str(doc["spec"]["names"]["plural"]) for doc in crd_objects()]
    return (names[0] if names else "nodemaintenances"), (names[1] if len(names) > 1
                                                         else None)


def cluster_role() -> dict[str, Any]:
    """The operator's ClusterRole: exactly the verbs its run uses, nothing else."""
    maintenances, audits_or_none = _plurals()
    audits = audits_or_none or "maintenanceaudits"
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
            # the dispatch ledger: written before every send, read against every status
            # (created only: no role updates or deletes an entry)
            {"apiGroups": [GROUP], "resources": ["maintenancedispatches"],
             "verbs": ["create", "get", "list", "watch"]},
            # it records for others (a request whose creator wrote none, a deletion, a
            # regression), naming itself as recordedBy (the audit admission policy)
            {"apiGroups": [GROUP], "resources": [RECORDERS], "verbs": ["record"]},
            # admission by the operator: the request's audit record when its creator wrote
            # none (an act without its record is not admitted); the watch of the records
            # created since it started, which tells it which need no write
            {"apiGroups": [GROUP], "resources": [audits], "verbs": ["watch", "create"]},
            {"apiGroups": ["longhorn.io"], "resources": ["nodes"], "verbs": ["get", "update"]},
            {"apiGroups": ["longhorn.io"], "resources": ["replicas"], "verbs": ["list"]},
            # the policy's check of the requester before acting, and the look at the
            # admission policy binding that makes spec.requestedBy trustworthy
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
             "verbs": ["create"]},
            {"apiGroups": ["admissionregistration.k8s.io"],
             "resources": ["validatingadmissionpolicybindings"],
             "resourceNames": [admission_name()], "verbs": ["get"]},
        ],
    }


def maintainer_role() -> dict[str, Any]:
    """The ClusterRole of whoever requests, returns, abandons and resolves maintenances
    (``powerplane maintenance ...`` with the kubernetes store): the preflight's reads, the
    maintenances (``delete`` only of a pending object its own request could not finish;
    ``watch`` for a long-lived requester fed by :func:`powerplane_kubernetes.watch.following`),
    their status, and the audit records."""
    maintenances, audits = _plurals()
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
        {"apiGroups": [GROUP], "resources": [maintenances],
         "verbs": ["get", "list", "watch", "create", "update", "delete"]},
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
    """The Role of the audit records' Events, in ``lifecycle.store.namespace``: a requester
    takes no lock (the executor takes the node's as it admits a request) and writes no
    Lease, so it holds no ``leases`` verb (the namespace is the operator's by default,
    where its site Leases live). The name is kept from when requesters took the node
    locks, so that existing bindings keep working."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": MAINTAINER_LOCKS, "namespace": store_namespace,
                     "labels": _labels()},
        "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}],
    }


def server_role() -> dict[str, Any]:
    """The ClusterRole of ``powerplane serve`` in Kubernetes mode: exactly what the gateway
    itself uses (see the module docstring): no Node write, no NodeMaintenance write."""
    maintenances, audits_or_none = _plurals()
    audits = audits_or_none or "maintenanceaudits"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": SERVER, "labels": _labels()},
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
             "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
             "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
            {"apiGroups": [GROUP], "resources": [maintenances],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [GROUP], "resources": [audits], "verbs": ["list", "create"]},
            # the denials and acts of identities it verified itself, as their recorder
            {"apiGroups": [GROUP], "resources": [RECORDERS], "verbs": ["record"]},
            {"apiGroups": ["longhorn.io"], "resources": ["nodes"], "verbs": ["get"]},
            {"apiGroups": ["longhorn.io"], "resources": ["replicas"], "verbs": ["list"]},
        ],
    }


def server_events_role(store_namespace: str) -> dict[str, Any]:
    """The Role of the Events of the denials the server records, in
    ``lifecycle.store.namespace``."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": SERVER_EVENTS, "namespace": store_namespace,
                         "labels": _labels()},
            "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]}


def server_impersonation_role() -> dict[str, Any]:
    """The ClusterRole ``kubernetes: {credentials: impersonate}`` needs: ``impersonate`` on
    every user, group and service account (a caller whose token is a service account's
    is impersonated as one: the API server asks ``impersonate`` on ``serviceaccounts``
    for it, not on ``users``); printed unbound: passthrough needs none of it."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": SERVER_IMPERSONATE, "labels": _labels()},
            "rules": [{"apiGroups": [""], "resources": ["users", "groups", "serviceaccounts"],
                       "verbs": ["impersonate"]}]}


def server_manifests(namespace: str, store_namespace: str | None = None,
                     ) -> list[dict[str, Any]]:
    """The server's ServiceAccount (in ``namespace``), its ClusterRole and binding, the
    Events Role and binding in ``store_namespace`` (default ``namespace``), and the
    impersonation ClusterRole, unbound."""
    store_namespace = store_namespace or namespace
    subject = [{"kind": "ServiceAccount", "name": SERVER, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVER, "namespace": namespace, "labels": _labels()}},
        server_role(),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": SERVER, "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": SERVER},
         "subjects": subject},
        server_events_role(store_namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": SERVER_EVENTS, "namespace": store_namespace,
                      "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": SERVER_EVENTS},
         "subjects": subject},
        server_impersonation_role(),
    ]


def people_roles() -> list[dict[str, Any]]:
    """:data:`ADMIN`, :data:`VIEWER` and :data:`ENGINEER`, unbound (see the module
    docstring)."""
    maintenances, audits = _plurals()
    audits = audits or "maintenanceaudits"

    def role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": _labels()}, "rules": rules}

    def servers(*verbs: str) -> dict[str, Any]:
        return {"apiGroups": [GROUP], "resources": ["servers"], "verbs": list(verbs)}

    write = ["create", "get", "list", "watch", "update"]
    read = ["get", "list", "watch"]
    return [
        role(ADMIN, [servers(*SERVER_VERBS),
                     {"apiGroups": [GROUP], "resources": [maintenances], "verbs": write},
                     {"apiGroups": [GROUP], "resources": [audits],
                      "verbs": ["get", "list", "create"]}]),
        role(VIEWER, [servers("get"),
                      {"apiGroups": [GROUP], "resources": [maintenances, audits],
                       "verbs": read}]),
        role(ENGINEER, [servers("cordon", "uncordon"),
                        {"apiGroups": [GROUP], "resources": [maintenances],
                         "verbs": write}]),
    ]


def operator_lock_role(store_namespace: str) -> dict[str, Any]:
    """The Role of the per-node lock Leases the operator takes when it admits a request (as
    the store's lock protocol does: create, and the take-over of a finished holder's lock by
    a read and a ``PUT``), and of the Events of the records it writes itself (a deletion,
    a regression), in ``lifecycle.store.namespace``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": OPERATOR_LOCKS, "namespace": store_namespace,
                     "labels": _labels()},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": ["get", "create", "update"]},
                  {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}],
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


def namespace_object(namespace: str) -> dict[str, Any]:
    """The ``Namespace`` the operator's namespaced objects go into (first in the output)."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": _labels()}}


def _k8s_refs(value: Any) -> Iterator[str]:
    """Every ``{k8s: NAMESPACE/NAME/KEY}`` mapping in a raw document (any section)."""
    if isinstance(value, Mapping):
        given = {k: v for k, v in value.items() if v is not None}
        if list(given) == ["k8s"] and isinstance(given["k8s"], str):
            yield given["k8s"]
            return
        for item in value.values():
            yield from _k8s_refs(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _k8s_refs(item)


def referenced_secrets(deployment: Deployment) -> dict[str, list[str]]:
    """The Secrets the deployment file references with ``{k8s: ...}``: namespace -> names,
    sorted. Read from the file as written (every section) and from the validated channel
    configs (a deployment built in memory has no file)."""
    from powerplane_kubernetes.secrets import parse

    refs = set(_k8s_refs(deployment.raw or {}))
    for configured in deployment.channels.values():  # a reference dumps as {k8s: ...}
        refs |= set(_k8s_refs(configured.config.model_dump(mode="json", by_alias=True)))
    out: dict[str, set[str]] = {}
    for ref in refs:
        namespace, name, _ = parse(ref)
        out.setdefault(namespace, set()).add(name)
    return {ns: sorted(names) for ns, names in sorted(out.items())}


def secret_roles(namespace: str, secrets: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """Per namespace holding referenced Secrets: a Role granting ``get`` on those names only
    (``resourceNames``) and its RoleBinding to the operator's ServiceAccount. None when no
    Secret is referenced."""
    out: list[dict[str, Any]] = []
    for secret_ns, names in secrets.items():
        meta = {"name": SECRETS_ROLE, "namespace": secret_ns, "labels": _labels()}
        out += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
             "rules": [{"apiGroups": [""], "resources": ["secrets"],
                        "resourceNames": list(names), "verbs": ["get"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": dict(meta),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": SECRETS_ROLE},
             "subjects": _subject(namespace)},
        ]
    return out


@dataclass(frozen=True)
class InCluster:
    """What a deployment file needs of the operator's pod (:func:`in_cluster`)."""

    secrets: dict[str, list[str]] = field(default_factory=dict)
    """The referenced Secrets, namespace -> names."""
    data_volume: bool = False
    """A ``state_file`` is configured: :data:`DATA_DIR` is a writable ``emptyDir``."""
    store_namespace: str | None = None
    """``lifecycle.store.namespace`` (the node locks and Events)."""


def _state_files(deployment: Deployment) -> Iterator[tuple[str, str]]:
    """``(config path, state_file)`` of every channel and lifecycle port that has one."""
    for name, configured in deployment.channels.items():
        value = getattr(configured.config, "state_file", None)
        if isinstance(value, str):
            yield f"channels.{name}.state_file", value
    for port, section in (deployment.lifecycle or {}).items():
        value = section.get("state_file") if isinstance(section, Mapping) else None
        if isinstance(value, str):
            yield f"lifecycle.{port}.state_file", value


def in_cluster(deployment: Deployment) -> InCluster:
    """What running ``deployment`` in the operator's pod takes: the Secrets to grant, the
    writable volume, the store's namespace. Raises ``ConfigError`` (exit 2) for what cannot
    work there: a SQLite lifecycle store (the default when ``lifecycle.store`` is absent),
    and a ``state_file`` outside :data:`DATA_DIR` (the root file system is read-only)."""
    from powerplane import ConfigError, ConfigProblem
    from powerplane.lifecycle import lifecycle_config

    problems: list[ConfigProblem] = []
    settings = lifecycle_config(deployment.lifecycle or {}, deployment.source)
    store_namespace: str | None = None
    if getattr(settings.store, "type", None) == "sqlite":
        given = "store" in (deployment.lifecycle or {})
        problems.append(ConfigProblem("lifecycle.store", (
            "the SQLite store" + ("" if given else " (the default when lifecycle.store is "
                                  "absent)") +
            " cannot serve the operator in the cluster: its file lives inside one pod, "
            "where `maintenance request` run anywhere else never reaches it, each replica "
            "would keep its own, and a pod's emptyDir loses every maintenance, its dispatch "
            "record and its audit when the pod is replaced (a PersistentVolumeClaim keeps "
            "it for one pod at a time, not for two replicas, and SQLite's locking is not "
            "safe on network file systems); use lifecycle.store: {type: kubernetes}")))
    else:
        value = getattr(settings.store, "namespace", None)
        store_namespace = value if isinstance(value, str) else None
    data_volume = False
    for where, value in _state_files(deployment):
        data_volume = True
        path = PurePosixPath(value)
        if path.is_absolute() and not path.is_relative_to(DATA_DIR):
            problems.append(ConfigProblem(where, (
                f"{value!r} is outside {DATA_DIR}, the one writable directory of the "
                "operator's pod (its root file system is read-only; the manifests mount "
                f"an emptyDir there, the working directory): use a relative path or one "
                f"under {DATA_DIR}")))
    if problems:
        raise ConfigError(problems, source=deployment.source)
    return InCluster(secrets=referenced_secrets(deployment), data_volume=data_volume,
                     store_namespace=store_namespace)


def _deployment(namespace: str, image: str, replicas: int,
                data_volume: bool) -> dict[str, Any]:
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
    # the root file system is read-only: /tmp is always writable; the working directory
    # (DATA_DIR) only where a state_file is configured
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": "/etc/powerplane", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": CONFIG_MAP}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    if data_volume:
        mounts.append({"name": "data", "mountPath": DATA_DIR})
        volumes.append({"name": "data", "emptyDir": {"sizeLimit": "256Mi"}})
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
        "volumeMounts": mounts,
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
                    "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS,
                                        "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def manifests(namespace: str, image: str = IMAGE, *, replicas: int = 2,
              store_namespace: str | None = None,
              deployment: Deployment | None = None) -> list[dict[str, Any]]:
    """Every object that installs the operator into ``namespace``, in apply order (the
    Namespaces first), then the maintainer's roles (unbound; their Role in
    ``store_namespace``, default ``lifecycle.store.namespace``, else ``namespace``; a
    ``store_namespace`` the deployment's store does not use is a ``ConfigError``).

    With ``deployment`` (the file the ConfigMap will hold): ``get`` on the Secrets it
    references, the writable volume its ``state_file`` needs, and ``ConfigError`` for what
    cannot run in the cluster (:func:`in_cluster`). Without: no Secret, no data volume.
    """
    needs = in_cluster(deployment) if deployment is not None else InCluster()
    if store_namespace is not None and needs.store_namespace not in (None, store_namespace):
        from powerplane import ConfigError, ConfigProblem

        raise ConfigError([ConfigProblem("lifecycle.store.namespace", (
            f"is {needs.store_namespace!r}, but --store-namespace says {store_namespace!r}: "
            "the node locks' Role would be in a namespace the store does not use"))],
            source=deployment.source if deployment is not None else None)
    if store_namespace is None:
        store_namespace = needs.store_namespace or namespace
    namespaces = [namespace_object(namespace)]
    if store_namespace != namespace:
        namespaces.append(namespace_object(store_namespace))
    crds = crd_objects()
    admission = policies() if crds else []
    return [
        *namespaces,
        *crds,
        *admission,
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
        operator_lock_role(store_namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": OPERATOR_LOCKS, "namespace": store_namespace,
                      "labels": _labels()},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": OPERATOR_LOCKS},
         "subjects": _subject(namespace)},
        *secret_roles(namespace, needs.secrets),
        _deployment(namespace, image, replicas, needs.data_volume),
        maintainer_role(),
        maintainer_lock_role(store_namespace),
        *people_roles(),
    ]
