"""The test API server's vocabulary: resource keys, the kinds it serves, the API server's
``Status`` answers, and the request record.

A resource is keyed ``group/version/plural`` (``v1/pods`` for the core group), as
:func:`key` makes it from a kmock request. Every answer the server refuses with is a
``Status`` object (:func:`status`) with the API server's reason, code and wording, as
``k8s.io/apimachinery/pkg/api/errors`` builds them (:func:`not_found`, :func:`conflict`,
:func:`forbidden`, :func:`invalid`, :func:`already_exists`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kmock
from kmock import Response  # type: ignore[attr-defined]  # kmock's namespace, not its __all__

__all__ = [
    "ADMISSION_KINDS",
    "FAULTS",
    "KINDS",
    "LONGHORN_NODES",
    "LONGHORN_REPLICAS",
    "MAINTENANCES",
    "NODES",
    "PDBS",
    "PODS",
    "RBAC_KINDS",
    "REVIEWS",
    "SECRETS",
    "SELF_ACCESS_REVIEWS",
    "SELF_REVIEWS",
    "TOKEN_REVIEWS",
    "RecordedRequest",
    "Response",
    "answer",
    "copy_json",
    "key",
    "now",
    "page_not_found",
    "passing",
    "qualified",
    "status",
]

NODES = "v1/nodes"
PODS = "v1/pods"
PDBS = "policy/v1/poddisruptionbudgets"
LONGHORN_NODES = "longhorn.io/v1beta2/nodes"
LONGHORN_REPLICAS = "longhorn.io/v1beta2/replicas"
SECRETS = "v1/secrets"
REVIEWS = "authorization.k8s.io/v1/subjectaccessreviews"
SELF_ACCESS_REVIEWS = "authorization.k8s.io/v1/selfsubjectaccessreviews"
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
"""The admission policy kinds the server stores, by kind: their resource keys."""

KINDS: dict[str, tuple[str, str, bool]] = {
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
"""The built-in resources the server serves (CRDs add theirs)."""

FAULTS = ("500", "429", "disconnect")
"""The answers :meth:`KubeApiServer.fail_requests` injects."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    client: str = ""
    """Who sent it: the ``client`` of the kubeconfig it used ("" for the cluster admin's
    kubeconfig, or for no token)."""
    user: str = ""
    """Who it acted as: the token's user, or the user it impersonated ("" anonymous)."""

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.query.items())
        return f"{self.method} {self.path}" + (f"?{query}" if query else "")


def key(resource: Any) -> str:
    """A kmock resource as ``group/version/plural``."""
    group = resource.group or ""
    return f"{group + '/' if group else ''}{resource.version}/{resource.plural}"


def qualified(resource: str) -> tuple[str, str]:
    """``(plural, group)`` of a resource key (group "" for the core group)."""
    plural = resource.rsplit("/", 1)[-1]
    group = resource.split("/")[0] if resource.count("/") == 2 else ""
    return plural, group


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value."""
    return json.loads(json.dumps(value))


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None,
           headers: Mapping[str, str] | None = None) -> Response:
    """A ``Status`` answer, as the API server words a failure."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details is not None:
        body["details"] = details
    if headers:
        return Response(status=code, payload=body, headers=dict(headers))
    return Response(status=code, payload=body)


def page_not_found() -> Response:
    return Response(status=404, payload=b"404 page not found\n",
                    headers={"Content-Type": "text/plain; charset=utf-8"})


def answer(handler: Callable[[kmock.Request], Any]) -> Callable[[kmock.Request], Any]:
    """Every answer with its own status: kmock keeps the status a reaction's callable last
    returned in a ``Response`` on the reaction itself, so a 409 would stick to the next 200."""
    def respond(request: kmock.Request) -> Response:
        out = handler(request)
        return out if isinstance(out, Response) else Response(status=200, payload=out)
    return respond


def passing(gate: Callable[[kmock.Request], Any]) -> Callable[[kmock.Request], Any]:
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
