"""Kubernetes' RBAC authorizer and request-info resolver, as functions of stored objects.

:func:`rbac_attributes` turns a request into what the API server authorizes (verb, API
group, resource, subresource, namespace, name), as its request-info resolver does
(``k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``). :class:`RbacIndex` decides a
request over the stored ClusterRoles, Roles and bindings with the semantics of
Kubernetes' RBAC authorizer (``plugin/pkg/auth/authorizer/rbac/rbac.go`` and
``pkg/registry/rbac/validation/rule.go``), reading only the bindings whose subjects can
apply (indexed by subject), in the order the authorizer visits them, so its answer and
reason are :func:`rbac_authorize`'s, which builds one per call.

:func:`forbidden` is the API server's ``403`` for a request the authorizer refused, in its
words (``responsewriters.Forbidden``): ``nodemaintenances.powerplane.io "x" is forbidden:
User "mallory" cannot update resource "nodemaintenances/status" in API group
"powerplane.io" at the cluster scope``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from powerplane_kubernetes.testing.apiserver.common import RecordedRequest, Response, status

__all__ = [
    "PRIVILEGED_GROUP",
    "RbacAttributes",
    "RbacIndex",
    "attributes",
    "forbidden",
    "rbac_attributes",
    "rbac_authorize",
]

PRIVILEGED_GROUP = "system:masters"
"""The group the API server allows everything before any authorizer is asked (a cluster
admin's kubeconfig)."""

_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class RbacAttributes:
    """A request as the authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {res}{'.' + self.group if self.group else ''}{where}"

    def as_review(self) -> dict[str, str]:
        """The ``resourceAttributes`` of a SubjectAccessReview asking the same."""
        return {"verb": self.verb, "group": self.group, "resource": self.resource,
                "subresource": self.subresource, "namespace": self.namespace,
                "name": self.name}


def attributes(method: str, path: str, query: Mapping[str, str]) -> RbacAttributes | None:
    """The verb, group, resource, subresource, namespace and name of an API request, as the
    API server's request-info resolver derives them (None: not a resource request, such as
    ``/version``): ``/api/v1/...`` is the core group, ``/apis/GROUP/VERSION/...`` a named
    one; GET/HEAD of a collection is ``list`` (``watch`` with ``?watch=true``; a
    ``metadata.name`` field selector names the object), of an object ``get``; POST
    ``create``, PUT ``update``, PATCH ``patch``, DELETE ``delete`` (of a collection
    ``deletecollection``); the legacy ``/watch/`` segment is ``watch``."""
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        if len(parts) < 4:
            return None
        group, rest = parts[1], parts[3:]
    method = method.upper()
    verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
            "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
    if rest and rest[0] == "watch":
        verb, rest = "watch", rest[1:]
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        watch = str(query.get("watch", "")).lower()
        verb = "watch" if watch not in ("", "false", "0") else "list"
        for part in str(query.get("fieldSelector", "")).split(","):
            field, sep, value = part.partition("=")
            if field.strip() == "metadata.name" and sep and not value.startswith("="):
                name = value.strip()
    if not name and verb == "delete":
        verb = "deletecollection"
    return RbacAttributes(verb, group, resource, subresource, namespace, name)


def rbac_attributes(request: RecordedRequest) -> RbacAttributes | None:
    """:func:`attributes` of a recorded request."""
    return attributes(request.method, request.path, request.query)


def forbidden(user: str, attrs: RbacAttributes | None, *, method: str = "", path: str = "",
              reason: str = "") -> Response:
    """The API server's ``403 Forbidden`` for a request its authorizer refused
    (``forbiddenMessage`` and ``NewForbidden``), ``reason`` the authorizer's (none when
    RBAC had no opinion)."""
    if attrs is None:
        verb = {"HEAD": "get"}.get(method.upper(), method.lower())
        text = f"User {json.dumps(user)} cannot {verb} path {json.dumps(path)}"
        message = f"forbidden: {text}" + (f": {reason}" if reason else "")
        return status(403, "Forbidden", message, {})
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    where = (f"in the namespace {json.dumps(attrs.namespace)}" if attrs.namespace
             else "at the cluster scope")
    text = (f"User {json.dumps(user)} cannot {attrs.verb} resource {json.dumps(resource)} "
            f"in API group {json.dumps(attrs.group)} {where}") + (f": {reason}" if reason
                                                                  else "")
    what = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    message = (f"{what} {json.dumps(attrs.name)} is forbidden: {text}" if attrs.name
               else f"{what} is forbidden: {text}")
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.group:
        details["group"] = attrs.group
    return status(403, "Forbidden", message, details)


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


def _subject_key(subject: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    """The key a subject is indexed by: the user name it applies to, or its group."""
    kind, name = subject.get("kind"), str(subject.get("name", ""))
    if kind == "User":
        return "user", name
    if kind == "Group":
        return "group", name
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return ("user", f"system:serviceaccount:{ns}:{name}") if ns else None
    return None


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


class RbacIndex:
    """The stored RBAC objects, indexed for the authorizer: roles by name, bindings by the
    subjects they name (each list in storage order, as the authorizer visits them)."""

    def __init__(self, objects: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self._roles: dict[tuple[str, str], Mapping[str, Any]] = {
            ("", r["metadata"]["name"]): r for r in objects.get("ClusterRole", ())}
        self._roles.update({(r["metadata"].get("namespace", ""), "Role:" + r["metadata"][
            "name"]): r for r in objects.get("Role", ())})
        self._cluster = list(objects.get("ClusterRoleBinding", ()))
        self._cluster_by: dict[tuple[str, str], list[int]] = {}
        for i, binding in enumerate(self._cluster):
            self._index(self._cluster_by, binding, i, "")
        self._namespaced: dict[str, list[Mapping[str, Any]]] = {}
        self._namespaced_by: dict[str, dict[tuple[str, str], list[int]]] = {}
        for binding in objects.get("RoleBinding", ()):
            ns = str(binding["metadata"].get("namespace") or "")
            found = self._namespaced.setdefault(ns, [])
            self._index(self._namespaced_by.setdefault(ns, {}), binding, len(found), ns)
            found.append(binding)

    @staticmethod
    def _index(by: dict[tuple[str, str], list[int]], binding: Mapping[str, Any], i: int,
               namespace: str) -> None:
        for subject in binding.get("subjects") or []:
            found = _subject_key(subject, namespace)
            if found is not None:
                entries = by.setdefault(found, [])
                if not entries or entries[-1] != i:
                    entries.append(i)

    @staticmethod
    def _candidates(by: Mapping[tuple[str, str], list[int]], user: str,
                    groups: Sequence[str]) -> list[int]:
        found = set(by.get(("user", user), ()))
        for group in groups:
            found.update(by.get(("group", group), ()))
        return sorted(found)

    def _rules_of(self, ref: Mapping[str, Any], namespace: str,
                  errors: list[str]) -> list[Mapping[str, Any]]:
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "ClusterRole":
            found = self._roles.get(("", name))
            what = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        elif kind == "Role":
            found = self._roles.get((namespace, "Role:" + name))
            what = f'role.rbac.authorization.k8s.io "{name}" not found'
        else:
            errors.append(f"unsupported role reference kind: {json.dumps(kind)}")
            return []
        if found is None:
            errors.append(what)
            return []
        return list(found.get("rules") or [])

    def _visit(self, binding: Mapping[str, Any], label: str, namespace: str, user: str,
               groups: Sequence[str], resource: Mapping[str, Any] | None,
               non_resource: Mapping[str, Any] | None, errors: list[str]) -> str | None:
        subject = next((sub for sub in binding.get("subjects") or []
                        if _applies(sub, user, groups, namespace)), None)
        if subject is None:
            return None
        ref = binding.get("roleRef") or {}
        for rule in self._rules_of(ref, namespace, errors):
            if _rule_allows(rule, resource, non_resource):
                return (f"RBAC: allowed by {label} of {ref.get('kind')} "
                        f"{json.dumps(ref.get('name'))} to "
                        f"{_describe_subject(subject, namespace)}")
        return None

    def allows_every_name(self, user: str, groups: Sequence[str],
                          resource: Mapping[str, Any]) -> bool:
        """Whether a rule without ``resourceNames`` allows ``resource`` (then every name
        is allowed, whatever :meth:`authorize` would name as the reason)."""
        unnamed = {**resource, "name": ""}
        found = self._candidates(self._cluster_by, user, groups)
        bindings = [(self._cluster[i], "") for i in found]
        namespace = resource.get("namespace") or ""
        if namespace:
            mine = self._namespaced.get(namespace, [])
            bindings += [(mine[i], namespace) for i in self._candidates(
                self._namespaced_by.get(namespace, {}), user, groups)]
        for binding, ns in bindings:
            if not any(_applies(sub, user, groups, ns) for sub in binding.get("subjects") or []):
                continue
            for rule in self._rules_of(binding.get("roleRef") or {}, ns, []):
                if not rule.get("resourceNames") and _rule_allows(rule, unnamed, None):
                    return True
        return False

    def authorize(self, user: str, groups: Sequence[str], *,
                  resource: Mapping[str, Any] | None = None,
                  non_resource: Mapping[str, Any] | None = None) -> tuple[bool, str]:
        """``(allowed, reason)``, as :func:`rbac_authorize` answers."""
        errors: list[str] = []
        for i in self._candidates(self._cluster_by, user, groups):
            crb = self._cluster[i]
            label = f"ClusterRoleBinding {json.dumps(crb['metadata']['name'])}"
            found = self._visit(crb, label, "", user, groups, resource, non_resource, errors)
            if found:
                return True, found
        namespace = (resource or {}).get("namespace") or ""
        if namespace:
            bindings = self._namespaced.get(namespace, [])
            for i in self._candidates(self._namespaced_by.get(namespace, {}), user, groups):
                rb = bindings[i]
                label = f"RoleBinding {json.dumps(rb['metadata']['name'] + '/' + namespace)}"
                found = self._visit(rb, label, namespace, user, groups, resource,
                                    non_resource, errors)
                if found:
                    return True, found
        if not errors:
            return False, ""
        return False, "RBAC: " + (errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")


def rbac_authorize(user: str, groups: Sequence[str], objects: Mapping[str, Sequence[
        Mapping[str, Any]]], *, resource: Mapping[str, Any] | None = None,
                   non_resource: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """Kubernetes' RBAC authorizer over ``objects`` (kind -> stored objects of
    :data:`~powerplane_kubernetes.testing.apiserver.RBAC_KINDS`): ``(allowed, reason)`` for
    a SubjectAccessReview's user, groups and ``resourceAttributes`` (or
    ``nonResourceAttributes``).

    As ``VisitRulesFor`` walks them: every ClusterRoleBinding, then, when the request names
    a namespace, the RoleBindings of that namespace; each binding through its first subject
    that applies; the first rule that allows ends the walk with "RBAC: allowed by <the
    binding, its role and that subject>". No rule: not allowed, no reason (no opinion),
    unless a binding's role could not be found (its error is the reason, as the authorizer
    aggregates them)."""
    return RbacIndex(objects).authorize(user, groups, resource=resource,
                                        non_resource=non_resource)
