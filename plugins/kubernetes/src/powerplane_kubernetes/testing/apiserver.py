"""A Kubernetes API server for tests: kmock's emulator, with handlers for what it does not do.

kmock (``KubernetesEmulator``, by the author of kopf) serves the HTTP API on a loopback
port, keeps the objects in memory (``kmock.objects``), applies ``PATCH`` bodies as JSON
merge patches or JSON patches, creates and deletes objects, streams watches and records
every request. It does not emulate what this distribution depends on, so
:class:`KubeApiServer` adds reactions of its own, each answering as a real API server does
(``Status`` objects with the API server's reasons and wording):

* **resourceVersion**: every object carries one (one counter for the server), stamped on
  every write; a ``PUT`` whose ``metadata.resourceVersion`` is stale is ``409 Conflict``
  ("the object has been modified; please apply your changes to the latest version and try
  again"), one without it ``422 Invalid``; a ``PATCH`` naming a stale one is undone and
  answered 409. ``uid`` and ``creationTimestamp`` are stamped on create.
* **PUT** (replace): kmock has no update by ``PUT``.
* **lists with selectors**: ``fieldSelector`` (``spec.nodeName``, ``metadata.name``,
  ``metadata.namespace``, ``status.phase``; ``=``, ``==``, ``!=``) and ``labelSelector``
  (``=``, ``==``, ``!=``, ``key``, ``!key``, ``in``, ``notin``); an unsupported field is
  ``400 BadRequest`` ("field label not supported"). Lists carry ``kind`` and ``apiVersion``.
  A list walks only the objects of its resource (kmock's object dict is replaced by one
  that keeps each resource's keys apart; :attr:`KubeApiServer.list_walked` counts them).
* **reads**: a missing object is ``404 NotFound`` (``nodes "n1" not found``).
* **the Eviction subresource** (``POST /api/v1/namespaces/{ns}/pods/{name}/eviction``,
  ``policy/v1``): the PodDisruptionBudgets of the pod's namespace whose selector matches
  the pod decide; none allows it; two are ``500`` ("This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support."); one with
  ``status.disruptionsAllowed`` at 0 is ``429 TooManyRequests``, "Cannot evict pod as it
  would violate the pod's disruption budget.", with a ``details.causes`` entry of reason
  ``DisruptionBudget`` naming the budget ("The disruption budget web-pdb needs 2 healthy
  pods and has 2 currently"), as the API server's eviction REST handler words it;
  otherwise the budget's ``disruptionsAllowed`` drops by one and the pod goes (at once,
  or with ``linger=True`` it stays terminating, with a ``deletionTimestamp``, until
  :meth:`KubeApiServer.finish_terminating`).
* **admission**: Longhorn's node webhook refuses a node left with ``allowScheduling`` and
  ``evictionRequested`` both true (its own sentence) with ``422 Invalid``.
* **an API group not installed** (``longhorn=False``): every path under
  ``/apis/longhorn.io`` is the API server's plain-text ``404 page not found``.
* **CustomResourceDefinitions** (:meth:`KubeApiServer.install_crd`; powerplane's
  ``NodeMaintenance`` and ``MaintenanceAudit`` by default, ``crds=()`` for a cluster
  without them): the resource is served with its scope; a write is *pruned* of fields its
  ``openAPIV3Schema`` does not have (as a structural schema prunes: the dropped paths are
  kept in :attr:`KubeApiServer.pruned`) and then validated against it (``422 Invalid``
  naming the field, through ``jsonschema``); with the ``status`` subresource, ``POST`` and
  ``PUT`` of the main resource leave ``status`` as it was, ``PUT …/status`` changes only
  ``status`` (both keep ``resourceVersion`` semantics), ``GET …/status`` reads the object;
  ``metadata.generation`` starts at 1 and grows when anything but metadata and status
  changes; an update that changes nothing keeps the ``resourceVersion``, as the API
  server's no-op detection does. kmock runs no CEL: the one rule these CRDs use,
  ``self == oldSelf`` on a top-level field (``spec`` immutable), is emulated with the
  API server's wording (``422``, ``spec: Invalid value: "object": <message>``); a CRD with
  any other ``x-kubernetes-validations`` rule is refused at install, never passed silently.
* **Secrets** (:meth:`KubeApiServer.add_secret`) and **Events** are stored objects.
* **RBAC and SubjectAccessReview**: ClusterRoles, ClusterRoleBindings, Roles and
  RoleBindings (``rbac.authorization.k8s.io/v1``) are stored objects
  (:meth:`KubeApiServer.add_rbac`, or created through the API); a ``POST
  /apis/authorization.k8s.io/v1/subjectaccessreviews`` is answered (``201``) by
  :func:`rbac_authorize` over them with the semantics of Kubernetes' RBAC authorizer
  (``plugin/pkg/auth/authorizer/rbac/rbac.go`` and ``pkg/registry/rbac/validation/rule.go``):
  the cluster role bindings first, then, for a namespaced request, the role bindings of that
  namespace (a cluster-scoped request uses the cluster role bindings only); a binding
  applies through its first subject matching the user (``User`` by name, ``Group`` among
  the groups, ``ServiceAccount`` as ``system:serviceaccount:NS:NAME``, its namespace
  defaulting to the binding's); a rule matches by ``apiGroups``, ``resources``
  (``resource/subresource``, ``*``, ``*/subresource``), ``verbs`` and ``resourceNames``
  (empty: every name), ``*`` a wildcard in each; ``nonResourceURLs`` for a
  non-resource request. The answer is ``status.allowed`` and, when allowed, the reason the
  authorizer gives (``RBAC: allowed by ClusterRoleBinding "ops" of ClusterRole "admin" to
  User "alice"``); a denial has no reason (RBAC has no opinion; ``denied`` stays unset)
  unless a binding named a role that does not exist (``RBAC: clusterrole... not found``).
* **SelfSubjectReview** (``POST /apis/authentication.k8s.io/v1/selfsubjectreviews``):
  the user of the request's bearer token (:meth:`KubeApiServer.write_kubeconfig` ``user=``,
  ``groups=``) with ``system:authenticated`` among its groups, as the API server's
  authenticator adds it; a request with no known token is ``system:anonymous`` in
  ``system:unauthenticated``.
* **TokenReview** (``POST /apis/authentication.k8s.io/v1/tokenreviews``): a token the
  server issued (:meth:`KubeApiServer.issue_token`, or a kubeconfig's) is ``authenticated``
  as its user and groups (``system:authenticated`` among them), with ``spec.audiences``
  echoed; an expired one (``expires_in=``) or one it never issued is not, with the
  authenticator's words in ``status.error``. Any request carrying an expired token is
  ``401 Unauthorized``; a token it never issued stays anonymous (kmock checks no
  credentials), as before.
* **impersonation** (``Impersonate-User``, ``Impersonate-Group``): the request acts as
  the user and groups named (``system:authenticated`` added, as the API server's
  impersonation filter does), once the requester's RBAC allows ``impersonate`` on
  ``users`` named by the user and on ``groups`` named by each group (:func:`rbac_authorize`
  over the stored RBAC objects); else ``403 Forbidden`` in the API server's words, and
  nothing is done. :attr:`RecordedRequest.user` is who the request acted as.
* **the requester rules** (``bind_requesters=True``): the identity rules of ``operator
  manifests``' ValidatingAdmissionPolicy, in Python (kmock runs no CEL; the CEL itself is
  evaluated in ``tests/test_admission_policy.py``), on ``CREATE`` and ``UPDATE`` of
  ``nodemaintenances`` against the user the request acts as: ``spec.requestedBy`` is that
  user, ``spec.requesterGroups`` exactly its groups, the intent's verb on
  ``servers.powerplane.io`` granted by RBAC for the node, and a new return, abandon or
  resolution names that user as its actor and is granted its verb; a refusal is ``403
  Forbidden`` naming the policy and the rule, as the API server words a policy's denial.
* **watches**: kmock streams them (every stored object as ``ADDED`` first, whatever the
  ``resourceVersion``); :meth:`KubeApiServer.answer_watches` makes the next ones end at
  once or answer ``410`` (an ``ERROR`` event in the stream, or the HTTP status).
* **faults** (:meth:`KubeApiServer.fail_requests`): the next requests of a verb and
  resource (``list`` of ``powerplane.io/v1alpha1/nodemaintenances``, ``get`` of
  ``v1/secrets``, ...) are answered ``500 InternalError``, ``429 TooManyRequests`` (API
  Priority and Fairness' words, ``Retry-After: 1``) or dropped (``disconnect``: the
  connection closed with no answer), one each, before anything else answers them;
  :attr:`KubeApiServer.faults_served` lists what was injected, in order. A refused
  connection is an API server not listening yet: a kubeconfig for a :func:`free_port`,
  and ``KubeApiServer(port=...)`` started on it later.

Requests the ports make are kept in :attr:`KubeApiServer.requests` (method, path, query,
body, the client) for tests to assert on, and counted by client, method and resource in
:meth:`KubeApiServer.request_counts` (``record=False`` keeps the counts only: a benchmark's
tens of thousands of requests then cost no memory). kmock itself keeps every request it
received and matches each new one against every reaction by walking that whole history (a
reaction's filter is a view over it, and membership is tested by iterating it), so its
cost per request grows with the requests before it; here its history holds only the
requests being served (each is removed when answered), which changes no match (the
reactions here filter by method, or action, never by a slice of the history). Each filter
tried costs about as much as the rest of the request, so there is one reaction per method
(``PUT``, the most frequent, first), which routes by action and resource in Python: no
request is tried against more than four.
A client is told apart by the bearer token of the kubeconfig it was given
(:meth:`KubeApiServer.write_kubeconfig` ``client=``, or ``user=``); the token is never
recorded.

The server runs its own event loop in a thread, so async and sync tests, and other
processes, reach it like any API server; world changes (:meth:`~KubeApiServer.add_node`,
:meth:`~KubeApiServer.set_pdb_allowed`, ...) run in that loop. Watches of objects changed
by the handlers here (``PUT``, evictions) get their events through kmock's internal bus.

kmock's names this module relies on, and why (kmock 0.8; the range is pinned in this
distribution's ``test`` extra, ``kmock>=0.8,<0.9``, and ``tests/test_kmock_shape.py`` fails
on a kmock whose shape differs, naming what moved):

* public: ``KubernetesEmulator``, ``Server``, ``Request``, ``ResourceInfo``, ``resource``,
  the ``objects`` and ``resources`` arrays and the ``<<`` reactions.
* ``kmock.Response`` (a reaction's answer with its own status): kmock's package namespace
  holds it (its ``__init__`` imports it) but leaves it out of ``__all__``; a callable
  reaction has no other way to choose its status per request.
* private, with no public counterpart: ``RawHandler._handle`` (overridden to see each
  request and trim the history after it, and called past ``KubernetesEmulator._handle``
  for the reviews, which that would store as objects), ``Root._requests``,
  ``Reaction._requests`` and ``RawHandler._errors`` (the history that makes each match
  cost as much as the requests before it), ``ObjectsArray._objects`` (the object dict,
  indexed by resource), and ``KubernetesEmulator._buses`` (the watch bus, for objects the
  handlers here change).
  Each use stays guarded at run time (an absent name degrades to kmock's own behaviour),
  and the shape test makes an upgrade that drops one fail loudly instead.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import jsonschema_rs
import kmock
from kmock import Response  # type: ignore[attr-defined]  # kmock's namespace, not its __all__

__all__ = [
    "ADMISSION_KINDS",
    "FAULTS",
    "LONGHORN_NODES",
    "LONGHORN_REPLICAS",
    "NODES",
    "PDBS",
    "PODS",
    "RBAC_KINDS",
    "REVIEWS",
    "SECRETS",
    "SELF_REVIEWS",
    "TOKEN_REVIEWS",
    "CrdInfo",
    "KubeApiServer",
    "RecordedRequest",
    "Validator",
    "free_port",
    "rbac_authorize",
]

T = TypeVar("T")

NODES = "v1/nodes"
PODS = "v1/pods"
PDBS = "policy/v1/poddisruptionbudgets"
LONGHORN_NODES = "longhorn.io/v1beta2/nodes"
LONGHORN_REPLICAS = "longhorn.io/v1beta2/replicas"
SECRETS = "v1/secrets"
REVIEWS = "authorization.k8s.io/v1/subjectaccessreviews"
SELF_REVIEWS = "authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "authentication.k8s.io/v1/tokenreviews"
MAINTENANCES = "powerplane.io/v1alpha1/nodemaintenances"
RBAC_KINDS = {
    "ClusterRole": "rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "rbac.authorization.k8s.io/v1/roles",
    "RoleBinding": "rbac.authorization.k8s.io/v1/rolebindings",
}
"""The RBAC kinds the server stores, by kind: their resource keys."""
ADMISSION_KINDS = {
    "ValidatingAdmissionPolicy": "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding":
        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
}
"""The admission policy kinds the server stores (and never runs: kmock runs no CEL)."""

_KINDS: dict[str, tuple[str, str, bool]] = {
    # resource key: (apiVersion, kind, namespaced)
    NODES: ("v1", "Node", False),
    PODS: ("v1", "Pod", True),
    PDBS: ("policy/v1", "PodDisruptionBudget", True),
    "coordination.k8s.io/v1/leases": ("coordination.k8s.io/v1", "Lease", True),
    "v1/events": ("v1", "Event", True),
    SECRETS: ("v1", "Secret", True),
    LONGHORN_NODES: ("longhorn.io/v1beta2", "Node", True),
    LONGHORN_REPLICAS: ("longhorn.io/v1beta2", "Replica", True),
    RBAC_KINDS["ClusterRole"]: ("rbac.authorization.k8s.io/v1", "ClusterRole", False),
    RBAC_KINDS["ClusterRoleBinding"]: ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding",
                                       False),
    RBAC_KINDS["Role"]: ("rbac.authorization.k8s.io/v1", "Role", True),
    RBAC_KINDS["RoleBinding"]: ("rbac.authorization.k8s.io/v1", "RoleBinding", True),
    ADMISSION_KINDS["ValidatingAdmissionPolicy"]: (
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", False),
    ADMISSION_KINDS["ValidatingAdmissionPolicyBinding"]: (
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", False),
}

_FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}

FAULTS = ("500", "429", "disconnect")
"""The answers :meth:`KubeApiServer.fail_requests` injects."""

Validator = Callable[[dict[str, Any] | None, dict[str, Any]], str | None]
"""An admission check: (old object or None, new object) -> a refusal sentence or None."""


def _longhorn_node_webhook(old: dict[str, Any] | None, new: dict[str, Any]) -> str | None:
    spec = new.get("spec") or {}
    if spec.get("evictionRequested") and spec.get("allowScheduling"):
        name = new.get("metadata", {}).get("name", "")
        return ('admission webhook "validator.longhorn.io" denied the request: need to disable '
                f"scheduling on node {name} for node eviction, or cancel eviction to enable "
                "scheduling on this node")
    return None


def openapi_to_jsonschema(node: Any) -> Any:
    """An OpenAPI v3 (Kubernetes structural) schema as JSON Schema: ``nullable`` as a
    ``null`` type, the ``x-kubernetes-*`` extensions dropped (after pruning, unknown fields
    are gone, so what is left must match exactly)."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: openapi_to_jsonschema(v) for k, v in node.items()
           if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if node.get("type") == "object" and "properties" in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def prune(obj: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Drop the fields of ``obj`` that ``schema`` does not know (a structural schema's
    pruning), in place; returns the dropped paths. ``metadata`` at the root is the API
    server's own and is left alone."""
    dropped: list[str] = []
    if not isinstance(obj, dict) and not isinstance(obj, list):
        return dropped
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return dropped
    if isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(obj):
                dropped += prune(item, items, f"{path}[{i}]")
        return dropped
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key in list(obj):
        where = f"{path}.{key}" if path else key
        if not path and key in ("apiVersion", "kind", "metadata"):
            continue
        if isinstance(props, Mapping):
            if key not in props:
                del obj[key]
                dropped.append(where)
                continue
            dropped += prune(obj[key], props[key], where)
        elif isinstance(extra, Mapping):
            dropped += prune(obj[key], extra, where)
    return dropped


@dataclass
class CrdInfo:
    """What the server knows of an installed CustomResourceDefinition's served version."""

    resource: str
    """``group/version/plural``."""
    kind: str
    namespaced: bool
    schema: dict[str, Any]
    """The version's ``openAPIV3Schema``."""
    status: bool
    """Whether the ``status`` subresource is enabled."""
    immutable: dict[str, str]
    """Top-level fields with the CEL rule ``self == oldSelf``: field -> its message."""
    _validator: list[Any] = field(default_factory=list, repr=False, compare=False)

    def validator(self) -> jsonschema_rs.Draft7Validator:
        """The JSON Schema validator of :attr:`schema` (``metadata`` the API server's),
        made at its first use and kept: a CRD applied again is a new :class:`CrdInfo`.
        ``jsonschema-rs`` (compiled; the same Draft 7 semantics as ``jsonschema``, at a
        hundredth of its time per object): the server's own cost per write stays small
        beside its clients' (a benchmark measures them apart)."""
        if not self._validator:
            schema = openapi_to_jsonschema(self.schema)
            schema["properties"]["metadata"] = {"type": "object"}
            self._validator.append(jsonschema_rs.Draft7Validator(schema))
        validator: jsonschema_rs.Draft7Validator = self._validator[0]
        return validator

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> list[CrdInfo]:
        spec = manifest["spec"]
        out = []
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = version["schema"]["openAPIV3Schema"]
            immutable: dict[str, str] = {}
            for where, node in _validations(schema):
                for rule in node.get("x-kubernetes-validations") or []:
                    top = where.count(".") == 0 and where != ""
                    if rule.get("rule") != "self == oldSelf" or not top:
                        raise ValueError(
                            f"kmock emulates no CEL but 'self == oldSelf' on a top-level "
                            f"field; {spec['names']['plural']}.{spec['group']} has "
                            f"{rule.get('rule')!r} at {where or '(root)'}")
                    immutable[where] = str(rule.get("message") or "Invalid value")
            out.append(cls(
                resource=f"{spec['group']}/{version['name']}/{spec['names']['plural']}",
                kind=spec["names"]["kind"], namespaced=spec["scope"] == "Namespaced",
                schema=schema, status="status" in (version.get("subresources") or {}),
                immutable=immutable))
        return out


def _validations(schema: Mapping[str, Any], path: str = "") -> Iterator[
        tuple[str, Mapping[str, Any]]]:
    if schema.get("x-kubernetes-validations"):
        yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _validations(sub, f"{path}.{key}" if path else key)
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from _validations(sub, f"{path}[]")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    client: str = ""
    """Who sent it: the ``client`` of the kubeconfig it used ("" for an anonymous one)."""
    user: str = ""
    """Who it acted as: the token's user, or the user it impersonated ("" anonymous)."""

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.query.items())
        return f"{self.method} {self.path}" + (f"?{query}" if query else "")


def _status(code: int, reason: str, message: str,
            details: dict[str, Any] | None = None,
            headers: Mapping[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details is not None:
        body["details"] = details
    if headers:
        return Response(status=code, payload=body, headers=dict(headers))
    return Response(status=code, payload=body)


def _page_not_found() -> Response:
    return Response(status=404, payload=b"404 page not found\n",
                          headers={"Content-Type": "text/plain; charset=utf-8"})


def _answer(handler: Callable[[kmock.Request], Any]) -> Callable[[kmock.Request], Any]:
    """Every answer with its own status: kmock keeps the status a reaction's callable last
    returned in a ``Response`` on the reaction itself, so a 409 would stick to the next 200."""
    def answer(request: kmock.Request) -> Response:
        out = handler(request)
        return out if isinstance(out, Response) else Response(status=200, payload=out)
    return answer


def _passing(gate: Callable[[kmock.Request], Any]) -> Callable[[kmock.Request], Any]:
    """``gate`` as a kmock reaction: its answer, or the request passed on to the next
    reaction when it answers ``NotImplemented`` (kmock takes a reaction that answers
    ``NotImplemented`` as spent and never asks it again; one that raises
    ``NotImplementedError`` is asked again by the next request)."""
    def react(request: kmock.Request) -> Any:
        found = gate(request)
        if found is NotImplemented:
            raise NotImplementedError
        return found
    return react


def _key(resource: Any) -> str:
    group = resource.group or ""
    return f"{group + '/' if group else ''}{resource.version}/{resource.plural}"


def _match_labels(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` (matchLabels, matchExpressions) against labels; empty selects all."""
    if selector is None:
        return False  # a PDB without a selector selects nothing (policy/v1 semantics: {} = all)
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _label_test(part: str) -> Callable[[Mapping[str, str]], bool]:
    m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", part)
    if m:
        key, negate = m.group(1), m.group(2) == "notin"
        values = {v.strip() for v in m.group(3).split(",")}
        return lambda labels: (labels.get(key) in values) != negate
    m = re.fullmatch(r"([\w./-]+)\s*(!=|==|=)\s*([\w./-]*)", part)
    if m:
        key, op, value = m.groups()
        return lambda labels: (labels.get(key) == value) != (op == "!=")
    if part.startswith("!"):
        return lambda labels: part[1:] not in labels
    return lambda labels: part in labels


def _label_query(query: str) -> Callable[[Mapping[str, str]], bool]:
    """A ``labelSelector`` query string as a predicate."""
    tests = [_label_test(p.strip()) for p in re.split(r",(?![^(]*\))", query) if p.strip()]
    return lambda labels: all(t(labels) for t in tests)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return "" if cur is None else str(cur)


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update changes nothing but what the server stamps."""
    def strip(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields", "generation")}
        return {**obj, "metadata": meta}
    return strip(old) == strip(new)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- RBAC: the authorizer's semantics (plugin/pkg/auth/authorizer/rbac, pkg/apis/rbac/v1) ------
def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    """A subject as the authorizer's reason names it (``User "alice"``, ``ServiceAccount
    "name/namespace"``)."""
    kind, name = str(subject.get("kind", "")), str(subject.get("name", ""))
    if kind == "ServiceAccount":
        return f"{kind} {json.dumps(name + '/' + (subject.get('namespace') or binding_namespace))}"
    return f"{kind} {json.dumps(name)}"


def _applies(subject: Mapping[str, Any], user: str, groups: Sequence[str],
             namespace: str) -> bool:
    """``appliesToUser``: a User by name, a Group among the groups, a ServiceAccount as
    ``system:serviceaccount:NS:NAME`` (NS defaulting to ``namespace``; none: no match)."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(user == name)
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return bool(ns) and user == f"system:serviceaccount:{ns}:{name}"
    return False


def _rule_allows(rule: Mapping[str, Any], resource: Mapping[str, Any] | None,
                 non_resource: Mapping[str, Any] | None) -> bool:
    """``RuleAllows``: verbs, API groups, resources (``*``, ``resource/subresource``,
    ``*/subresource``) and resource names (empty: every name); or verbs and
    ``nonResourceURLs`` (exact, or a prefix ending in ``*``)."""
    verbs = rule.get("verbs") or []
    if resource is not None:
        verb = resource.get("verb") or ""
        if "*" not in verbs and verb not in verbs:
            return False
        groups = rule.get("apiGroups") or []
        if "*" not in groups and (resource.get("group") or "") not in groups:
            return False
        sub = resource.get("subresource") or ""
        combined = f"{resource.get('resource') or ''}/{sub}" if sub else \
            (resource.get("resource") or "")
        if not any(r == "*" or r == combined or (sub and r == f"*/{sub}")
                   for r in rule.get("resources") or []):
            return False
        names = rule.get("resourceNames") or []
        return not names or (resource.get("name") or "") in names
    if non_resource is None:
        return False
    verb, path = non_resource.get("verb") or "", non_resource.get("path") or ""
    if "*" not in verbs and verb not in verbs:
        return False
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rbac_authorize(user: str, groups: Sequence[str], objects: Mapping[str, Sequence[
        Mapping[str, Any]]], *, resource: Mapping[str, Any] | None = None,
                   non_resource: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """Kubernetes' RBAC authorizer over ``objects`` (kind -> stored objects of
    :data:`RBAC_KINDS`): ``(allowed, reason)`` for a SubjectAccessReview's user, groups and
    ``resourceAttributes`` (or ``nonResourceAttributes``).

    As ``VisitRulesFor`` walks them: every ClusterRoleBinding, then, when the request names
    a namespace, the RoleBindings of that namespace; each binding through its first subject
    that applies; the first rule that allows ends the walk with "RBAC: allowed by <the
    binding, its role and that subject>". No rule: not allowed, no reason (no opinion),
    unless a binding's role could not be found (its error is the reason, as the authorizer
    aggregates them)."""
    roles = {("", r["metadata"]["name"]): r for r in objects.get("ClusterRole", ())}
    roles.update({(r["metadata"].get("namespace", ""), "Role:" + r["metadata"]["name"]): r
                  for r in objects.get("Role", ())})
    errors: list[str] = []

    def rules_of(ref: Mapping[str, Any], namespace: str) -> list[Mapping[str, Any]] | None:
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "ClusterRole":
            found = roles.get(("", name))
            what = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        elif kind == "Role":
            found = roles.get((namespace, "Role:" + name))
            what = f'role.rbac.authorization.k8s.io "{name}" not found'
        else:
            errors.append(f"unsupported role reference kind: {json.dumps(kind)}")
            return None
        if found is None:
            errors.append(what)
            return None
        return list(found.get("rules") or [])

    def visit(binding: Mapping[str, Any], label: str, namespace: str,
              subject_ns: str) -> str | None:
        subject = next((sub for sub in binding.get("subjects") or []
                        if _applies(sub, user, groups, subject_ns)), None)
        if subject is None:
            return None
        ref = binding.get("roleRef") or {}
        for rule in rules_of(ref, namespace) or []:
            if _rule_allows(rule, resource, non_resource):
                return (f"RBAC: allowed by {label} of {ref.get('kind')} "
                        f"{json.dumps(ref.get('name'))} to "
                        f"{_describe_subject(subject, namespace)}")
        return None

    for crb in objects.get("ClusterRoleBinding", ()):
        name = crb["metadata"]["name"]
        found = visit(crb, f"ClusterRoleBinding {json.dumps(name)}", "", "")
        if found:
            return True, found
    namespace = (resource or {}).get("namespace") or ""
    if namespace:
        for rb in objects.get("RoleBinding", ()):
            meta = rb["metadata"]
            if meta.get("namespace") != namespace:
                continue
            label = f"RoleBinding {json.dumps(meta['name'] + '/' + namespace)}"
            found = visit(rb, label, namespace, namespace)
            if found:
                return True, found
    if not errors:
        return False, ""
    return False, "RBAC: " + (errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")


_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}

_ERRORS_KEPT = 100
"""kmock keeps every exception a request raised (for ``strict`` handlers, which these are
not); the last ones are kept, the rest dropped."""


class _ByResource(dict[Any, Any]):
    """kmock's object dict (``ObjectsArray._objects``, keyed ``(resource, namespace,
    name)``) that also keeps the keys of each resource apart (by resource key, in insertion
    order, as the dict iterates), so a list walks only its own resource's objects."""

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[str, dict[Any, None]] = {}

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.index.setdefault(_key(key[0]), {})[key] = None

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        keys = self.index.get(_key(key[0]))
        if keys is not None:
            keys.pop(key, None)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        super().clear()
        self.index.clear()

    def of(self, resource: str) -> list[tuple[Any, Any]]:
        """``(key, object)`` of one resource, in insertion order."""
        return [(key, self[key]) for key in self.index.get(resource, ())]


class _Emulator(kmock.KubernetesEmulator):
    """kmock's emulator whose request history holds only the requests being served.

    ``on_request`` sees each request as it arrives (in arrival order); when it has been
    answered it leaves kmock's history (``Root._requests``, which every reaction's filter
    walks to match a request) and the reaction that served it forgets it too."""

    on_request: Callable[[kmock.Request], None] | None = None
    refused: Callable[[kmock.Request], bool] | None = None
    """Whether the API server's authentication refuses the request before anything is
    stored: a refused create then skips kmock's object store, which would otherwise store
    it, and tell every watcher it was ADDED, before the reaction refuses it."""
    unstored: frozenset[str] = frozenset({REVIEWS, SELF_REVIEWS, TOKEN_REVIEWS})
    """Resources whose ``POST`` is answered and never stored (the reviews): kmock's
    emulator stores every create before its reactions answer, so these skip it."""

    async def _handle(self, request: kmock.Request) -> Any:
        if self.on_request is not None:
            self.on_request(request)
        try:
            if request.resource is not None and (
                    _key(request.resource) in self.unstored
                    or (self.refused is not None and self.refused(request))):
                # kmock's emulator's parent: the reactions, without the object store
                return await super(kmock.KubernetesEmulator, self)._handle(request)
            return await super()._handle(request)
        finally:
            self._forget(request)

    def _forget(self, request: kmock.Request) -> None:
        history = getattr(self, "_requests", None)  # kmock 0.8's names, each guarded
        if isinstance(history, list):
            for i in range(len(history) - 1, -1, -1):
                if history[i] is request:  # by identity: requests compare by content
                    del history[i]
                    break
        for reaction in getattr(self, "_payloads", ()):
            served = getattr(reaction, "_requests", None)
            if isinstance(served, list):
                served.clear()  # read only by assertions on a reaction, none here
        errors = getattr(self, "_errors", None)
        if isinstance(errors, list) and errors and len(errors[-1]) > _ERRORS_KEPT:
            del errors[-1][:-_ERRORS_KEPT]

    def index_objects(self) -> _ByResource | None:
        """Put :class:`_ByResource` in place of kmock's object dict (kmock 0.8's names,
        guarded: None, and lists walk every object, if they are not there)."""
        array = getattr(self, "_objects", None)
        stored = getattr(array, "_objects", None)
        if not isinstance(stored, dict):
            return None
        indexed = _ByResource()
        indexed.update(stored)
        object.__setattr__(array, "_objects", indexed)  # a frozen attrs class
        return indexed

    def history_size(self) -> int:
        """How many requests kmock's own history holds (those being served)."""
        history = getattr(self, "_requests", None)
        return len(history) if isinstance(history, list) else 0


class KubeApiServer:
    """kmock's Kubernetes emulator on a loopback port, with the handlers listed above.

    ::

        with KubeApiServer() as api:
            api.add_node("n1", labels={"node-role.kubernetes.io/control-plane": ""})
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
            ...
            assert [str(r) for r in api.requests_to("PATCH")] == ["PATCH /api/v1/nodes/n1"]
    """

    def __init__(self, *, longhorn: bool = True, linger: bool = False,
                 host: str = "127.0.0.1", port: int | None = None,
                 crds: Iterable[Mapping[str, Any]] | None = None,
                 record: bool = True, admission: bool = True,
                 bind_requesters: bool = False) -> None:
        self.longhorn = longhorn
        """Whether Longhorn's API group is installed (False: its CRDs are absent)."""
        self.admission = admission
        """Whether ``operator manifests``' ValidatingAdmissionPolicy and its binding are
        stored when the server starts (as on a cluster they were applied to; stored to be
        read, never run: the operator refuses every request while the binding is missing)."""
        self.bind_requesters = bind_requesters
        """Run the requester rules of the admission policy on ``nodemaintenances`` writes
        (see the module docstring)."""
        self.linger = linger
        """Evicted pods stay terminating until :meth:`finish_terminating`."""
        self.budget_cause = True
        """A PDB's 429 names the budget in ``details.causes`` (False: a bare 429, as an
        older API server or a proxy in between may answer)."""
        self.throttle_evictions = False
        """Answer every eviction with API Priority and Fairness' 429 ("Too many requests,
        please try again later."), whatever the budgets say."""
        self.host = host
        self.port = port
        """The port to serve on (None: one the OS picks)."""
        self.url = ""
        """``http://127.0.0.1:PORT`` once started."""
        self.validators: dict[str, list[Validator]] = {}
        """Admission checks by resource key (``longhorn.io/v1beta2/nodes``)."""
        if longhorn:
            self.validators[LONGHORN_NODES] = [_longhorn_node_webhook]
        self._kinds: dict[str, tuple[str, str, bool]] = dict(_KINDS)
        self.crds: dict[str, CrdInfo] = {}
        """The installed CustomResourceDefinitions by resource key."""
        self.pruned: list[tuple[str, str]] = []
        """``(request, field path)`` of every field a CRD's schema pruned from a write."""
        self.record = record
        """Keep every request (:attr:`requests`); False: only :meth:`request_counts`."""
        self._log: list[RecordedRequest] = []
        self._counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._clients: dict[str, str] = {}  # "Bearer <token>" -> client name
        self._users: dict[str, tuple[str, tuple[str, ...]]] = {}  # token -> user, groups
        self._expiry: dict[str, float] = {}  # "Bearer <token>" -> wall-clock expiry
        self._rv = itertools.count(1)
        self._kmock: _Emulator | None = None
        self._index: _ByResource | None = None
        self.list_walked = 0
        """Stored objects the list handler has looked at (each list: its resource's own)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        if crds is None:
            from powerplane_kubernetes.crd import crd_manifests

            crds = crd_manifests()
        for manifest in crds:
            self.install_crd(manifest)
        self._watch_answers: list[str] = []
        self._faults: list[tuple[str, str, collections.deque[str]]] = []
        self.faults_served: list[str] = []
        """Every fault injected, in order (``"500 list v1/secrets"``)."""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._tasks: set[asyncio.Future[Any]] = set()

    def install_crd(self, manifest: Mapping[str, Any]) -> None:
        """Serve a CustomResourceDefinition's resource (before :meth:`start`)."""
        if self._thread is not None:
            raise RuntimeError("install CRDs before the API server starts")
        for info in CrdInfo.of(manifest):
            self.crds[info.resource] = info
            group, version, _ = info.resource.split("/")
            self._kinds[info.resource] = (f"{group}/{version}", info.kind, info.namespaced)

    # -- start and stop --------------------------------------------------------------------
    def start(self) -> KubeApiServer:
        """Serve on ``port``, else on a port the OS picks (the server reports it; no
        free-port race)."""
        if self._thread is not None:
            raise RuntimeError("the API server was started already")
        self._thread = threading.Thread(target=self._run, name="kmock-apiserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the kmock API server did not start within 30 s")
        if self._failure is not None:
            raise RuntimeError(f"the kmock API server failed to start: {self._failure!r}")
        if self.admission:
            from powerplane_kubernetes.operator.admission import policies

            self.add_rbac(*policies())
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
        self._thread = None

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by start()
            self._failure = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with _Emulator() as emulator, \
                kmock.Server(emulator, host=self.host, port=self.port) as server:
            emulator.on_request = self._received
            emulator.refused = self._refused_create
            self._kmock = emulator
            self._index = emulator.index_objects()
            self._install(emulator)
            self.url = f"http://{server.host}:{server.port}"
            self._ready.set()
            await self._stop.wait()

    def write_kubeconfig(self, path: Path, *, context: str = "kmock",
                         client: str | None = None, user: str | None = None,
                         groups: Sequence[str] = ()) -> Path:
        """A kubeconfig file that reaches this server (kmock checks no credentials). With
        ``client`` (or ``user``), its user carries a bearer token of its own, so the
        requests made with it are recorded as that client's (:attr:`RecordedRequest.client`,
        ``user`` when no ``client`` is given); the token authenticates as ``user`` (default:
        the client's name) in ``groups`` (and ``system:authenticated``), as a
        SelfSubjectReview answers."""
        kc_user: dict[str, Any] = {}
        name = client if client is not None else user
        if name is not None:
            kc_user["token"] = self.issue_token(user if user is not None else name, groups,
                                                client=name)
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "kmock", "user": kc_user}],
            "contexts": [{"name": context, "context": {"cluster": "kmock", "user": "kmock"}}],
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    def issue_token(self, user: str, groups: Sequence[str] = (), *,
                    client: str | None = None, expires_in: float | None = None) -> str:
        """A bearer token that authenticates as ``user`` in ``groups`` (and
        ``system:authenticated``), as a service account token or an OIDC token the API
        server trusts would; its requests are recorded as ``client`` (default: ``user``).
        With ``expires_in`` (seconds, may be negative) it stops authenticating then."""
        token = uuid.uuid4().hex
        bearer = f"Bearer {token}"
        self._clients[bearer] = client if client is not None else user
        self._users[bearer] = (user, tuple(dict.fromkeys([*groups, "system:authenticated"])))
        if expires_in is not None:
            self._expiry[bearer] = time.time() + expires_in
        return token

    # -- who is asking -----------------------------------------------------------------------
    @staticmethod
    def _header(request: kmock.Request, name: str) -> list[str]:
        """Every value of one request header (kmock's dict keeps one; aiohttp's has all)."""
        raw = getattr(getattr(request, "_raw_request", None), "headers", None)
        if raw is not None and hasattr(raw, "getall"):
            return [str(v) for v in raw.getall(name, [])]
        return [str(v) for k, v in request.headers.items() if k.lower() == name.lower()]

    def _token_user(self, bearer: str) -> tuple[str, tuple[str, ...]] | None:
        """The user of a bearer token the server issued and that has not expired."""
        found = self._users.get(bearer)
        expiry = self._expiry.get(bearer)
        if found is None or (expiry is not None and time.time() >= expiry):
            return None
        return found

    def _acting(self, request: kmock.Request) -> tuple[str, tuple[str, ...]] | Response:
        """Who the request acts as (its token's user, or the one it impersonates), or the
        API server's refusal: 401 for an expired token, 403 where RBAC does not allow the
        impersonation."""
        bearer = next((v for k, v in request.headers.items()
                       if k.lower() == "authorization"), "")
        if bearer in self._expiry and self._token_user(bearer) is None:
            return _status(401, "Unauthorized", "Unauthorized")
        user, groups = self._users.get(bearer, ("system:anonymous",
                                                ("system:unauthenticated",)))
        as_user = self._header(request, "Impersonate-User")
        as_groups = self._header(request, "Impersonate-Group")
        if not as_user and not as_groups:
            return user, groups
        if not as_user:
            return _status(500, "InternalError", "Internal error occurred: requested "
                           f"{as_groups} without impersonating a user")
        objects = {kind: [obj.raw for _, obj in self._iter(res, None)]
                   for kind, res in RBAC_KINDS.items()}
        for resource, name in [("users", as_user[0]), *(("groups", g) for g in as_groups)]:
            allowed, _ = rbac_authorize(user, groups, objects, resource={
                "group": "", "resource": resource, "verb": "impersonate", "name": name})
            if not allowed:
                return _status(403, "Forbidden", (
                    f'{resource} "{name}" is forbidden: User "{user}" cannot impersonate '
                    f'resource "{resource}" in API group "" at the cluster scope'),
                    {"name": name, "kind": resource})
        every = tuple(dict.fromkeys([*as_groups, "system:authenticated"]))
        return as_user[0], every

    def _who(self, request: kmock.Request) -> tuple[str, tuple[str, ...]]:
        """Who an admitted request acts as (:meth:`_acting` passed it)."""
        found = self._acting(request)
        if isinstance(found, Response):
            return "system:anonymous", ("system:unauthenticated",)
        return found

    def _refused_create(self, request: kmock.Request) -> bool:
        """A create the authentication or impersonation filters refuse (:meth:`_acting`)."""
        return request.action == kmock.action.CREATE and \
            isinstance(self._acting(request), Response)

    def _auth_gate(self, request: kmock.Request) -> Any:
        """The API server's authentication and impersonation filters: a refusal, or
        NotImplemented (the request goes on). A refused create takes back the object kmock
        stored before its reactions answer."""
        found = self._acting(request)
        if not isinstance(found, Response):
            return NotImplemented
        if request.action == kmock.action.CREATE and request.resource is not None \
                and _key(request.resource) not in _Emulator.unstored:
            data = request.data if isinstance(request.data, dict) else {}
            name = (data.get("metadata") or {}).get("name")
            stored = self._find(_key(request.resource), request.namespace, name) \
                if name else None
            if stored is not None:
                stored.delete()
        return found

    # -- the request log -------------------------------------------------------------------
    def _classify(self, request: kmock.Request) -> tuple[str, str, str]:
        """``(client, verb, resource)`` of a request, as :meth:`request_counts` keys it."""
        auth = next((v for k, v in request.headers.items() if k.lower() == "authorization"),
                    "")
        client = self._clients.get(auth, "")
        method = str(request.method.value)
        what = request.url.path
        verb = _VERBS.get(method, method.lower())
        if request.resource is not None:
            what = _key(request.resource) + (f"/{request.subresource}"
                                             if request.subresource else "")
            if verb == "get" and request.name is None:
                watch = str(request.params.get("watch", "")).lower()
                verb = "watch" if watch not in ("", "false", "0") else "list"
        return client, verb, what

    def _received(self, request: kmock.Request) -> None:
        client, verb, what = self._classify(request)
        self._counts[client, verb, what] += 1
        if self.record:
            user = self._who(request)[0]
            self._log.append(RecordedRequest(str(request.method.value), request.url.path,
                                             dict(request.params),
                                             request.data if request.body else None, client,
                                             "" if user == "system:anonymous" else user))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (empty with ``record=False``)."""
        return self._call(lambda: list(self._log))

    def request_counts(self) -> collections.Counter[tuple[str, str, str]]:
        """Requests received by ``(client, verb, resource)``: the verb as the API server
        authorizes it (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
        ``delete``), the resource key and subresource
        (``powerplane.io/v1alpha1/nodemaintenances/status``), or the path of a request that
        names none (``/version``). Kept with ``record=False`` too."""
        return self._call(lambda: collections.Counter(self._counts))

    def cpu_seconds(self) -> float:
        """The CPU time the server's own thread has used since it started (every request
        it answered, its watches and its stores): a benchmark's measure of what the
        fake itself costs, apart from its clients in the same process."""
        return self._call(time.thread_time)

    def kmock_history(self) -> int:
        """How many requests kmock's own history holds now: only those being answered."""
        emulator = self._emulator
        return self._call(emulator.history_size)

    def requests_to(self, method: str, path_prefix: str = "") -> list[RecordedRequest]:
        """The requests of one method whose path starts with ``path_prefix``."""
        return [r for r in self.requests
                if r.method == method.upper() and r.path.startswith(path_prefix)]

    def writes(self) -> list[RecordedRequest]:
        """Every request that may change something (``POST``, ``PUT``, ``PATCH``, ``DELETE``)."""
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    # -- the world -------------------------------------------------------------------------
    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None,
                 ready: bool | None = True, boot_id: str | None = "boot-1",
                 unschedulable: bool = False) -> None:
        """A ``Node`` with a Ready condition (None: no condition) and a boot id."""
        status: dict[str, Any] = {"nodeInfo": {"bootID": boot_id or "", "machineID": name,
                                               "kernelVersion": "6.6", "osImage": "kmock",
                                               "containerRuntimeVersion": "none",
                                               "kubeletVersion": "v1.33.0",
                                               "kubeProxyVersion": "", "systemUUID": name,
                                               "operatingSystem": "linux",
                                               "architecture": "amd64"}}
        if ready is not None:
            status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                     "reason": "KubeletReady" if ready else "KubeletNotReady",
                                     "message": "", "lastHeartbeatTime": _now(),
                                     "lastTransitionTime": _now()}]
        spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
        self._put(NODES, None, {"metadata": {"name": name, "labels": dict(labels or {})},
                                "spec": spec, "status": status})

    def set_ready(self, name: str, ready: bool) -> None:
        def change(obj: dict[str, Any]) -> None:
            for cond in obj["status"].get("conditions", []):
                if cond["type"] == "Ready":
                    cond["status"] = "True" if ready else "False"
        self._change(NODES, None, name, change)

    def set_boot_id(self, name: str, boot_id: str) -> None:
        self._change(NODES, None, name,
                     lambda obj: obj["status"]["nodeInfo"].update(bootID=boot_id))

    def add_pod(self, namespace: str, name: str, node: str, *,
                labels: Mapping[str, str] | None = None, owner_kind: str | None = "ReplicaSet",
                mirror: bool = False) -> None:
        """A running pod on ``node``, owned by a controller of ``owner_kind`` (None: bare)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": dict(labels or {})}
        if owner_kind is not None:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind,
                                        "name": f"{name}-owner", "uid": str(uuid.uuid4()),
                                        "controller": True}]
        if mirror:
            meta["annotations"] = {"kubernetes.io/config.mirror": uuid.uuid4().hex}
        self._put(PODS, namespace, {
            "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "pause"}]},
            "status": {"phase": "Running"},
        })

    def add_pdb(self, namespace: str, name: str, match_labels: Mapping[str, str], *,
                allowed: int = 0, min_available: int = 1) -> None:
        """A PodDisruptionBudget; ``allowed`` is its ``status.disruptionsAllowed``."""
        self._put(PDBS, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available,
                     "selector": {"matchLabels": dict(match_labels)}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": min_available,
                       "desiredHealthy": min_available, "expectedPods": min_available,
                       "observedGeneration": 1},
        })

    def set_pdb_allowed(self, namespace: str, name: str, allowed: int) -> None:
        self._change(PDBS, namespace, name,
                     lambda obj: obj["status"].update(disruptionsAllowed=allowed))

    def finish_terminating(self, only: Collection[str] | None = None) -> list[str]:
        """Remove every terminating pod (their grace period is over), or only those of
        ``only`` (``ns/name``) still terminating; returns ``ns/name`` of those removed."""
        def finish() -> list[str]:
            gone = []
            for (res, ns, name), obj in list(self._emulator.objects.items()):
                if _key(res) == PODS and not obj.deleted and \
                        obj.raw.get("metadata", {}).get("deletionTimestamp") and \
                        (only is None or f"{ns}/{name}" in only):
                    obj.delete()
                    self._publish(PODS, "DELETED", obj.last.raw)
                    gone.append(f"{ns}/{name}")
            return sorted(gone)
        return self._call(finish)

    def terminating(self) -> list[str]:
        """``ns/name`` of every pod terminating now (evicted, not yet removed)."""
        def read() -> list[str]:
            return sorted(f"{ns}/{name}" for (res, ns, name), obj
                          in list(self._emulator.objects.items())
                          if _key(res) == PODS and not obj.deleted
                          and obj.raw.get("metadata", {}).get("deletionTimestamp"))
        return self._call(read)

    def add_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """A Secret whose ``data`` holds ``data``'s values base64-encoded."""
        import base64

        encoded = {k: base64.b64encode(v.encode("utf-8")).decode("ascii")
                   for k, v in data.items()}
        self._put(SECRETS, namespace, {"metadata": {"name": name, "namespace": namespace},
                                       "type": "Opaque", "data": encoded})

    def add_rbac(self, *docs: Mapping[str, Any]) -> None:
        """Store ClusterRoles, ClusterRoleBindings, Roles and RoleBindings (manifests as
        ``operator manifests`` prints them) for the SubjectAccessReviews to evaluate, and
        ValidatingAdmissionPolicies and their bindings (stored to be read, never run);
        other kinds are skipped."""
        for doc in docs:
            kind = str(doc.get("kind"))
            resource = RBAC_KINDS.get(kind) or ADMISSION_KINDS.get(kind)
            if resource is None:
                continue
            body = json.loads(json.dumps(doc))
            namespace = body["metadata"].get("namespace") if _KINDS[resource][2] else None
            self._put(resource, namespace, body)

    def delete_object(self, resource: str, namespace: str | None, name: str) -> bool:
        """Delete a stored object (a grant taken away); False when it was not there."""
        def delete() -> bool:
            obj = self._find(resource, namespace, name)
            if obj is None:
                return False
            obj.delete()
            self._publish(resource, "DELETED", obj.last.raw)
            return True
        return self._call(delete)

    def rbac_objects(self) -> dict[str, list[dict[str, Any]]]:
        """The stored RBAC objects by kind, in storage order."""
        return self._call(lambda: {
            kind: [obj.raw for _, obj in self._iter(resource, None)]
            for kind, resource in RBAC_KINDS.items()})

    def add_lease(self, namespace: str, name: str, holder: str, *,
                  duration_s: int = 15) -> None:
        """A ``coordination.k8s.io/v1`` Lease held by ``holder`` (another replica)."""
        self._put("coordination.k8s.io/v1/leases", namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
                     "renewTime": _now(), "acquireTime": _now(), "leaseTransitions": 0},
        })

    def add_longhorn_node(self, name: str, *, allow_scheduling: bool = True,
                          eviction_requested: bool = False,
                          namespace: str = "longhorn-system") -> None:
        self._put(LONGHORN_NODES, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"name": name, "allowScheduling": allow_scheduling,
                     "evictionRequested": eviction_requested, "disks": {}, "tags": []},
        })

    def add_replica(self, name: str, node: str, *, namespace: str = "longhorn-system") -> None:
        self._put(LONGHORN_REPLICAS, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeID": node, "volumeName": name.rsplit("-r-", 1)[0],
                     "evictionRequested": False},
        })

    def remove_replicas(self, node: str, *, namespace: str = "longhorn-system") -> int:
        """Longhorn's volume controller deleting the evicted replicas of ``node``."""
        def remove() -> int:
            n = 0
            for (res, ns, _), obj in list(self._emulator.objects.items()):
                if _key(res) == LONGHORN_REPLICAS and ns == namespace and not obj.deleted \
                        and obj.raw["spec"].get("nodeID") == node:
                    obj.delete()
                    n += 1
            return n
        return self._call(remove)

    def object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object (None: absent)."""
        def read() -> dict[str, Any] | None:
            obj = self._find(resource, namespace, name)
            return None if obj is None else json.loads(json.dumps(obj.raw))
        return self._call(read)

    def phases(self, resource: str, names: Iterable[str]) -> dict[str, str | None]:
        """``status.phase`` of each cluster-scoped object named (None: absent, or no phase
        yet), read in one call without copying the objects (a benchmark's poll)."""
        wanted = list(names)

        def read() -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for name in wanted:
                obj = self._find(resource, None, name)
                status = obj.raw.get("status") if obj is not None else None
                phase = status.get("phase") if isinstance(status, dict) else None
                out[name] = str(phase) if phase is not None else None
            return out
        return self._call(read)

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Copies of every stored object of ``resource``."""
        def read() -> list[dict[str, Any]]:
            return [json.loads(json.dumps(obj.raw))
                    for (res, _, _), obj in self._emulator.objects.items()
                    if _key(res) == resource and not obj.deleted]
        return self._call(read)

    def answer_watches(self, *answers: str) -> None:
        """How the next watch requests are answered, one each, before kmock serves the rest:
        ``"end"``: ``200`` and the stream ends at once (the server closed the watch);
        ``"gone"``: ``200``, then a watch ``ERROR`` event carrying a ``410 Expired`` Status,
        as the API server answers a watch from a resourceVersion it no longer keeps;
        ``"gone-http"``: a plain ``410 Gone`` answer."""
        unknown = set(answers) - {"end", "gone", "gone-http"}
        if unknown:
            raise ValueError(f"unknown watch answers: {sorted(unknown)}")

        def add() -> None:
            self._watch_answers.extend(answers)
        self._call(add)

    def fail_requests(self, verb: str, resource: str, *answers: str) -> None:
        """Answer the next requests of ``verb`` (``get``, ``list``, ``watch``, ``create``,
        ``update``, ``patch``, ``delete``) on ``resource`` (a key of
        :meth:`request_counts`: ``powerplane.io/v1alpha1/nodemaintenances``,
        ``v1/secrets``) with ``answers``, one each in order: ``"500"`` (``InternalError``),
        ``"429"`` (``TooManyRequests``) or ``"disconnect"`` (the connection is closed
        with no answer). The requests after them are served as usual."""
        unknown = set(answers) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults: {sorted(unknown)} (known: {FAULTS})")

        def add() -> None:
            self._faults.append((verb, resource, collections.deque(answers)))
        self._call(add)

    def clear_faults(self) -> None:
        """Drop the injected faults not served yet."""
        self._call(self._faults.clear)

    def faults_left(self) -> int:
        """How many injected faults have not been served yet."""
        return self._call(lambda: sum(len(q) for _, _, q in self._faults))

    def _fault_gate(self, request: kmock.Request) -> Any:
        refused = self._auth_gate(request)  # every path asks this gate first
        if refused is not NotImplemented:
            return refused
        if not self._faults:
            return NotImplemented
        _, verb, what = self._classify(request)
        for want_verb, want, queue in self._faults:
            if queue and want_verb == verb and want == what:
                answer = queue.popleft()
                break
        else:
            return NotImplemented
        self.faults_served.append(f"{answer} {verb} {what}")
        if answer == "500":
            return _status(500, "InternalError",
                           "Internal error occurred: injected by the test API server")
        if answer == "429":
            return _status(429, "TooManyRequests", "Too many requests, please try again later.",
                           headers={"Retry-After": "1"})
        raw = getattr(request, "_raw_request", None)  # kmock's request keeps aiohttp's
        transport = getattr(raw, "transport", None)
        if transport is not None:
            transport.abort()  # no answer: the client sees the connection dropped
        return Response(status=500, payload=b"")

    def _faulty(self, handler: Callable[[kmock.Request], Any]) -> Callable[[kmock.Request], Any]:
        """``handler``, after an injected fault (kmock matches its filtered reactions before
        an unfiltered one, so each reaction asks :meth:`_fault_gate` first)."""
        def answer(request: kmock.Request) -> Any:
            fault = self._fault_gate(request)
            return handler(request) if fault is NotImplemented else fault
        return answer

    def _watch_gate(self, request: kmock.Request) -> Any:
        fault = self._fault_gate(request)  # kmock matches a watch here before the catch-all
        if fault is not NotImplemented:
            return fault
        if not self._watch_answers:
            return NotImplemented  # kmock's own watch stream
        answer = self._watch_answers.pop(0)
        expired = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "too old resource version: 1 (2)", "reason": "Expired",
                   "code": 410}
        if answer == "end":
            return Response(status=200, payload=b"")
        if answer == "gone":
            line = json.dumps({"type": "ERROR", "object": expired}) + "\n"
            return Response(status=200, payload=line.encode())
        return Response(status=410, payload=expired)

    # -- plumbing --------------------------------------------------------------------------
    @property
    def _emulator(self) -> _Emulator:
        if self._kmock is None:
            raise RuntimeError("the API server is not started")
        return self._kmock

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the server's loop (so it never races a request) and return its value."""
        if self._loop is None:
            raise RuntimeError("the API server is not started")
        if threading.current_thread() is self._thread:
            return fn()

        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def _stamp(self, obj: dict[str, Any], resource: str, *, new: bool) -> None:
        api_version, kind, _ = self._kinds.get(resource, ("", "", True))
        if api_version:
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._rv))
        if new or "uid" not in meta:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())

    def _put(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> None:
        def put() -> None:
            self._stamp(obj, resource, new=True)
            self._emulator.objects[resource, namespace, obj["metadata"]["name"]] = obj
            self._publish(resource, "ADDED", obj)
        self._call(put)

    def _change(self, resource: str, namespace: str | None, name: str,
                fn: Callable[[dict[str, Any]], None]) -> None:
        def change() -> None:
            stored = self._emulator.objects[resource, namespace, name]
            body = json.loads(json.dumps(stored.raw))
            fn(body)
            self._stamp(body, resource, new=False)
            stored.create(body)
            self._publish(resource, "MODIFIED", body)
        self._call(change)

    def _publish(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        buses = getattr(self._emulator, "_buses", None)  # kmock's watch bus (private)
        if buses is None:
            return
        for res in list(buses):
            if _key(res) == resource:
                task = asyncio.ensure_future(buses[res].put({"type": kind, "object": obj}))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _find(self, resource: str, namespace: str | None, name: str) -> Any:
        objs = self._emulator.objects
        key = (kmock.resource(resource), namespace, name)
        if key in objs and not objs[key].deleted:
            return objs[key]
        return None

    def _of(self, resource: str) -> list[tuple[Any, Any]]:
        """``(key, object)`` of one resource: its own objects only (the index), or, where
        kmock's names were not found, every stored object filtered."""
        if self._index is not None:
            return self._index.of(resource)
        return [(key, obj) for key, obj in list(self._emulator.objects.items())
                if _key(key[0]) == resource]

    def _iter(self, resource: str, namespace: str | None) -> Iterator[tuple[str | None, Any]]:
        for (_, ns, _), obj in self._of(resource):
            if not obj.deleted and (namespace is None or ns == namespace):
                yield ns, obj

    # -- the handlers ----------------------------------------------------------------------
    def _install(self, k: kmock.KubernetesEmulator) -> None:
        for resource, (_, kind, namespaced) in self._kinds.items():
            k.resources[resource] = kmock.ResourceInfo(kind=kind, namespaced=namespaced)
        if not self.longhorn:
            k[kmock.resource(group="longhorn.io")] << (lambda req: _page_not_found())
        for review in (REVIEWS, SELF_REVIEWS, TOKEN_REVIEWS):
            k.resources[review] = kmock.ResourceInfo(
                kind=review.rsplit("/", 1)[-1][:-1], namespaced=False)
        # One reaction per method, each routing by the request's action and resource:
        # kmock tries a request against every reaction's filter in turn until one takes it,
        # and a filter costs as much as the rest of the request, so the most frequent
        # method (PUT) is first and no request is tried against more than four.
        k[kmock.method.PUT] << self._faulty(_answer(self._replace))
        k[kmock.method.POST] << _passing(self._posting())
        k[kmock.method.GET] << _passing(self._getting())
        k[kmock.action.UPDATE] << self._faulty(_answer(self._patched))
        k << _passing(self._fault_gate)  # a request none above takes (kmock's own: DELETE)

    def _posting(self) -> Callable[[kmock.Request], Any]:
        """``POST``: a review, an eviction or a create (``NotImplemented``: none of them)."""
        reviews = {REVIEWS: self._faulty(_answer(self._review)),
                   SELF_REVIEWS: self._faulty(_answer(self._self_review)),
                   TOKEN_REVIEWS: self._faulty(_answer(self._token_review))}
        evict = self._faulty(_answer(self._evict))
        create = self._faulty(_answer(self._created))

        def post(request: kmock.Request) -> Any:
            if request.resource is not None:
                review = reviews.get(_key(request.resource))
                if review is not None:
                    return review(request)
            if request.subresource == "eviction":
                return evict(request)
            if request.action == kmock.action.CREATE:
                return create(request)
            return NotImplemented
        return post

    def _getting(self) -> Callable[[kmock.Request], Any]:
        """``GET``: a watch (its gate, else kmock's own stream), a list or a read
        (``NotImplemented``: none of them)."""
        listing = self._faulty(_answer(self._list))
        fetching = self._faulty(_answer(self._fetch))

        def get(request: kmock.Request) -> Any:
            action = request.action
            if action == kmock.action.WATCH:
                return self._watch_gate(request)
            if action == kmock.action.LIST:
                return listing(request)
            if action == kmock.action.FETCH:
                return fetching(request)
            return NotImplemented
        return get

    @staticmethod
    def _not_found(resource: str, name: str) -> Response:
        plural = resource.rsplit("/", 1)[-1]
        group = resource.split("/")[0] if resource.count("/") == 2 else ""
        what = f"{plural}.{group}" if group else plural
        return _status(404, "NotFound", f'{what} "{name}" not found',
                       {"name": name, "kind": plural, **({"group": group} if group else {})})

    def _list(self, request: kmock.Request) -> Any:
        assert request.resource is not None
        resource = _key(request.resource)
        if resource not in self._kinds:
            return _status(404, "NotFound", "the server could not find the requested resource")
        fields: list[tuple[str, str, str]] = []
        for part in filter(None, request.params.get("fieldSelector", "").split(",")):
            m = re.fullmatch(r"([\w.]+)\s*(!=|==|=)\s*(.*)", part.strip())
            if m is None or m.group(1) not in _FIELDS:
                label = m.group(1) if m else part
                return _status(400, "BadRequest", f'field label not supported: "{label}"')
            fields.append((m.group(1), m.group(2), m.group(3)))
        labels = _label_query(request.params.get("labelSelector", ""))
        items = []
        for _, obj in self._iter(resource, request.namespace):
            self.list_walked += 1
            raw = obj.raw
            if not labels(raw.get("metadata", {}).get("labels") or {}):
                continue
            if all((_field_value(raw, f) == v) == (op != "!=") for f, op, v in fields):
                items.append(raw)
        api_version, kind, _ = self._kinds[resource]
        return {"apiVersion": api_version, "kind": f"{kind}List",
                "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}

    def _fetch(self, request: kmock.Request) -> Any:
        assert request.resource is not None and request.name is not None
        resource = _key(request.resource)
        crd = self.crds.get(resource)
        if request.subresource and not (request.subresource == "status" and crd is not None
                                        and crd.status):
            return _status(404, "NotFound", "the server could not find the requested resource")
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        return obj.raw

    def _admit(self, resource: str, old: dict[str, Any] | None,
               new: dict[str, Any], request: kmock.Request | None = None) -> Response | None:
        crd = self.crds.get(resource)
        if crd is not None:
            refused = self._crd_admit(crd, old, new, request)
            if refused is not None:
                return refused
        for check in self.validators.get(resource, []):
            refusal = check(old, new)
            if refusal is not None:
                return _status(422, "Invalid", refusal)
        if self.bind_requesters and resource == MAINTENANCES and request is not None \
                and request.subresource is None:
            why = self._requester_refusal(old, new, *self._who(request))
            if why is not None:
                name = new.get("metadata", {}).get("name", "")
                binding = "powerplane-requester"
                return _status(403, "Forbidden", (
                    f'nodemaintenances.powerplane.io "{name}" is forbidden: '
                    f"ValidatingAdmissionPolicy '{binding}' with binding '{binding}' denied "
                    f"request: {why}"), {"name": name, "group": "powerplane.io",
                                         "kind": "nodemaintenances"})
        return None

    def _requester_refusal(self, old: dict[str, Any] | None, new: dict[str, Any],
                           user: str, groups: tuple[str, ...]) -> str | None:
        """The admission policy's identity rules for ``user`` (see the module docstring):
        the first one broken, in the policy's words, or None."""
        objects = {kind: [obj.raw for _, obj in self._iter(res, None)]
                   for kind, res in RBAC_KINDS.items()}
        spec = new.get("spec") or {}
        node = str(spec.get("node") or "")

        def granted(verb: str) -> bool:
            return rbac_authorize(user, groups, objects, resource={
                "group": "powerplane.io", "resource": "servers", "verb": verb,
                "name": node})[0]

        if old is None:
            if spec.get("requestedBy") != user:
                return ("spec.requestedBy must name the user who creates the NodeMaintenance: "
                        f"it says {spec.get('requestedBy')}, but the request comes from {user}")
            claimed = spec.get("requesterGroups")
            if claimed is not None and set(claimed) != set(groups):
                return ("spec.requesterGroups must be exactly the groups the API server "
                        f"authenticated {user} in ({', '.join(groups)}), system:authenticated "
                        f"included; it says ({', '.join(claimed)})")
            intent = str(spec.get("intent") or "")
            if not granted(intent):
                return (f"user {user} may not {intent} node {node}: no RBAC rule grants the "
                        f"verb {intent} on servers.powerplane.io named {node}")
            return None
        before, after = old.get("requests") or {}, new.get("requests") or {}
        for key, verb, what in (("returnRequest", "uncordon", "return node to service"),
                                ("abandon", "maintenance-abandon", "abandon")):
            entry = after.get(key)
            if entry is None or entry == before.get(key):
                continue
            if entry.get("actor") != user:
                return (f"requests.{key}.actor must name the user who adds it ({user}), not "
                        f"{entry.get('actor')}")
            if not granted(verb):
                return (f"user {user} may not {what} {node}: no RBAC rule grants the verb "
                        f"{verb} on servers.powerplane.io named {node}")
        added = [r for r in after.get("resolutions") or []
                 if r not in (before.get("resolutions") or [])]
        if any(r.get("actor") != user for r in added):
            return ("every new requests.resolutions entry must name the user who adds it "
                    f"({user})")
        if added and not granted("maintenance-resolve"):
            return (f"user {user} may not resolve a dispatch of node {node}: no RBAC rule "
                    f"grants the verb maintenance-resolve on servers.powerplane.io named {node}")
        return None

    def _created(self, request: kmock.Request) -> Any:
        assert request.resource is not None
        resource = _key(request.resource)
        name = (request.data or {}).get("metadata", {}).get("name")
        obj = self._find(resource, request.namespace, name)
        if obj is None:
            return _status(500, "InternalError", "kmock did not store the object")
        body = json.loads(json.dumps(obj.raw))
        crd = self.crds.get(resource)
        if crd is not None:
            if crd.status:
                body.pop("status", None)  # the main resource does not write status
            body.setdefault("metadata", {})["generation"] = 1
        refusal = self._admit(resource, None, body, request)
        if refusal is not None:
            obj.delete()
            return refusal
        self._stamp(body, resource, new=True)
        # kmock's ADDED event shares the stored object's metadata (a shallow copy): stamped
        # in place too, so a watcher sees the resourceVersion the API server gave it
        published = obj.last.raw.get("metadata")
        if isinstance(published, dict):
            published.update(body["metadata"])
        obj.last.clear()
        obj.last.update(body)
        return Response(status=201, payload=body)

    def _patched(self, request: kmock.Request) -> Any:
        assert request.resource is not None and request.name is not None
        resource = _key(request.resource)
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        history = obj.history
        before = history[-2] if len(history) >= 2 else None
        old = before.raw if before is not None else None
        wanted = (request.data or {}).get("metadata", {}).get("resourceVersion") \
            if isinstance(request.data, dict) else None
        body = json.loads(json.dumps(obj.raw))
        if old is not None and wanted is not None and \
                wanted != old.get("metadata", {}).get("resourceVersion"):
            history.pop()
            return self._conflict(resource, request.name)
        refusal = self._admit(resource, old, body)
        if refusal is not None:
            history.pop()
            return refusal
        self._stamp(body, resource, new=False)
        obj.last.update(body)
        return body

    def _conflict(self, resource: str, name: str) -> Response:
        plural = resource.rsplit("/", 1)[-1]
        group = resource.split("/")[0] if resource.count("/") == 2 else ""
        what = f"{plural}.{group}" if group else plural
        return _status(409, "Conflict",
                       f'Operation cannot be fulfilled on {what} "{name}": the object has been '
                       "modified; please apply your changes to the latest version and try again",
                       {"name": name, "kind": plural, **({"group": group} if group else {})})

    def _replace(self, request: kmock.Request) -> Any:
        if request.resource is None or request.name is None:
            return _status(405, "MethodNotAllowed", "the server does not allow this method")
        resource = _key(request.resource)
        crd = self.crds.get(resource)
        if request.subresource and not (request.subresource == "status" and crd is not None
                                        and crd.status):
            return _status(404, "NotFound", "the server could not find the requested resource")
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return _status(400, "BadRequest", "the body of the request was not an object")
        old = json.loads(json.dumps(obj.raw))
        wanted = body.get("metadata", {}).get("resourceVersion")
        if not wanted:
            return _status(422, "Invalid", f'{resource.rsplit("/", 1)[-1]} "{request.name}" is '
                           "invalid: metadata.resourceVersion: Invalid value: 0x0: must be "
                           "specified for an update")
        if wanted != old["metadata"].get("resourceVersion"):
            return self._conflict(resource, request.name)
        new = json.loads(json.dumps(body))
        if crd is not None:
            new = self._crd_update(crd, old, new, request.subresource == "status")
        refusal = self._admit(resource, old, new, request)
        if refusal is not None:
            return refusal
        for keep in ("uid", "creationTimestamp"):
            if keep in old["metadata"]:
                new["metadata"][keep] = old["metadata"][keep]
        if crd is not None and _same(old, new):
            return old  # the API server's no-op update: nothing written, same version
        self._stamp(new, resource, new=False)
        obj.create(new)
        self._publish(resource, "MODIFIED", new)
        return new

    # -- custom resources ------------------------------------------------------------------
    @staticmethod
    def _crd_update(crd: CrdInfo, old: dict[str, Any], new: dict[str, Any],
                    status: bool) -> dict[str, Any]:
        """The object a ``PUT`` leaves: the status subresource writes only ``status``, the
        main resource everything but ``status``; ``generation`` follows the content."""
        if crd.status and status:
            out: dict[str, Any] = json.loads(json.dumps(old))
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            out["metadata"]["resourceVersion"] = new.get("metadata", {}).get("resourceVersion")
            return out
        if crd.status:
            if "status" in old:
                new["status"] = json.loads(json.dumps(old["status"]))
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        generation = int(old.get("metadata", {}).get("generation") or 1)
        content = {k: v for k, v in new.items() if k not in ("metadata", "status")}
        before = {k: v for k, v in old.items() if k not in ("metadata", "status")}
        meta["generation"] = generation + (1 if content != before else 0)
        return new

    def _crd_admit(self, crd: CrdInfo, old: dict[str, Any] | None, new: dict[str, Any],
                   request: kmock.Request | None) -> Response | None:
        name = new.get("metadata", {}).get("name", "")
        what = f'{crd.kind}.{crd.resource.split("/")[0]} "{name}" is invalid'
        where = str(request.url.path) if request is not None else crd.resource
        self.pruned += [(where, path) for path in prune(new, crd.schema)]
        if old is not None:
            for field_name, message in crd.immutable.items():
                if field_name in old and new.get(field_name) != old.get(field_name):
                    cause = f'Invalid value: "object": {message}'
                    return _status(422, "Invalid", f"{what}: {field_name}: {cause}", {
                        "name": name, "group": crd.resource.split("/")[0],
                        "kind": crd.kind,
                        "causes": [{"reason": "FieldValueInvalid", "message": cause,
                                    "field": field_name}]})
        errors = sorted(crd.validator().iter_errors(new), key=lambda e: list(e.instance_path))
        if errors:
            first = errors[0]
            path = ".".join(str(p) for p in first.instance_path) or "(root)"
            return _status(422, "Invalid", f"{what}: {path}: Invalid value: {first.message}",
                           {"name": name, "kind": crd.kind, "causes": [
                               {"reason": "FieldValueInvalid", "field": path,
                                "message": f"Invalid value: {e.message}"} for e in errors[:20]]})
        return None

    # -- reviews ---------------------------------------------------------------------------
    def _review(self, request: kmock.Request) -> Any:
        """A SubjectAccessReview, answered by :func:`rbac_authorize` over the stored RBAC
        objects (nothing is stored)."""
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return _status(400, "BadRequest", "the body of the request was not an object")
        spec = body.get("spec") or {}
        what = 'SubjectAccessReview.authorization.k8s.io "" is invalid'
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            return _status(422, "Invalid", f"{what}: spec.resourceAttributes: Invalid value: "
                           '"null": exactly one of nonResourceAttributes or '
                           "resourceAttributes must be specified")
        user, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or []]
        if not user and not groups:
            return _status(422, "Invalid", f'{what}: spec.user: Invalid value: "": at least '
                           "one of user or group must be specified")
        objects = {kind: [obj.raw for _, obj in self._iter(res, None)]
                   for kind, res in RBAC_KINDS.items()}
        allowed, reason = rbac_authorize(user, groups, objects, resource=resource,
                                         non_resource=non_resource)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        out = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
        return Response(status=201, payload=out)

    def _self_review(self, request: kmock.Request) -> Any:
        """A SelfSubjectReview: who the request acts as (its token's user, or the user it
        impersonates)."""
        user, groups = self._who(request)
        out = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
               "metadata": {"creationTimestamp": _now()},
               "status": {"userInfo": {"username": user, "groups": list(groups)}}}
        return Response(status=201, payload=out)

    def _token_review(self, request: kmock.Request) -> Any:
        """A TokenReview: the user and groups of ``spec.token`` when the server issued it
        and it has not expired (nothing is stored; the spec is answered as sent, as the API
        server does)."""
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return _status(400, "BadRequest", "the body of the request was not an object")
        spec = dict(body.get("spec") or {})
        token = str(spec.get("token") or "")
        if not token:
            return _status(422, "Invalid", 'TokenReview.authentication.k8s.io "" is invalid: '
                           'spec.token: Required value')
        bearer = f"Bearer {token}"
        found = self._token_user(bearer)
        status: dict[str, Any]
        if found is not None:
            status = {"authenticated": True,
                      "user": {"username": found[0], "groups": list(found[1])}}
            if spec.get("audiences"):
                status["audiences"] = list(spec["audiences"])
        elif bearer in self._users:
            status = {"authenticated": False, "error": "[invalid bearer token, token has "
                      "expired]"}
        else:
            status = {"authenticated": False, "error": "[invalid bearer token]"}
        out = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
        return Response(status=201, payload=out)

    def _evict(self, request: kmock.Request) -> Any:
        ns, name = request.namespace, request.name
        if ns is None or name is None:
            return _status(404, "NotFound", "the server could not find the requested resource")
        if self.throttle_evictions:
            return _status(429, "TooManyRequests", "Too many requests, please try again later.",
                           {"retryAfterSeconds": 1})
        pod = self._find(PODS, ns, name)
        if pod is None:
            return self._not_found(PODS, name)
        labels = pod.raw.get("metadata", {}).get("labels") or {}
        covering = [obj for _, obj in self._iter(PDBS, ns)
                    if _match_labels(obj.raw.get("spec", {}).get("selector"), labels)]
        if len(covering) > 1:
            return _status(500, "InternalError", "This pod has more than one "
                           "PodDisruptionBudget, which the eviction subresource does not "
                           "support.")
        if pod.raw.get("metadata", {}).get("deletionTimestamp"):
            return Response(status=201, payload=self._eviction_ok())
        if covering:
            pdb = covering[0].raw
            status = pdb.get("status", {})
            if int(status.get("disruptionsAllowed", 0)) <= 0:
                pdb_name = pdb["metadata"]["name"]
                cause = (f"The disruption budget {pdb_name} needs "
                         f"{status.get('desiredHealthy', 0)} healthy pods and has "
                         f"{status.get('currentHealthy', 0)} currently")
                causes = [{"reason": "DisruptionBudget", "message": cause}]
                return _status(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption "
                               "budget.", {"causes": causes} if self.budget_cause else {})
            body = json.loads(json.dumps(pdb))
            body["status"]["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
            self._stamp(body, PDBS, new=False)
            covering[0].create(body)
        if self.linger:
            body = json.loads(json.dumps(pod.raw))
            body["metadata"]["deletionTimestamp"] = _now()
            self._stamp(body, PODS, new=False)
            pod.create(body)
            self._publish(PODS, "MODIFIED", body)
        else:
            pod.delete()
            self._publish(PODS, "DELETED", pod.last.raw)
        return Response(status=201, payload=self._eviction_ok())

    @staticmethod
    def _eviction_ok() -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port nothing listens on now (a connection to it is refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
