"""ValidatingAdmissionPolicies and their bindings, compiled and matched as the API server's
admission plugin does (``k8s.io/apiserver/pkg/admission/plugin/policy/validating``).

:func:`compile_policy` compiles a policy's CEL once (:mod:`.cel`): its ``matchConditions``,
``variables``, ``validations`` (``expression``, ``message``, ``messageExpression``,
``reason``) and ``auditAnnotations``; a policy with ``paramKind`` (or a binding with
``paramRef``) is refused, as is an expression that cannot be compiled. :func:`matches`
decides whether a request is in a policy's ``matchConstraints`` or a binding's
``matchResources``: ``resourceRules`` by operation, API group, version, resource and scope
(``"*"`` every resource but no subresource, ``"*/*"`` everything, ``"pods/*"`` every
subresource of pods, ``"*/status"`` the status of every resource; a subresource only when a
rule names it), ``resourceNames``, ``excludeResourceRules``, and the ``namespaceSelector``
and ``objectSelector`` label selectors.

The CEL environment is the one Kubernetes gives a policy: ``object``, ``oldObject`` (null
on create, ``object`` null on delete), ``request`` (``operation``, ``userInfo``,
``resource``, ``subResource``, ``kind``, ``name``, ``namespace``, ...), ``params`` (null),
``namespaceObject``, ``variables`` (each evaluated on first use, once per request) and
``authorizer`` (:class:`Authorizer`: ``authorizer.group(g).resource(r).subresource(s)
.namespace(n).name(n).check(verb)`` and its ``allowed()``, ``reason()``, ``errored()``,
``error()``; ``authorizer.path(p)``, ``authorizer.serviceAccount(ns, name)`` and
``authorizer.requestResource``), answered by the server's own authorizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes

from powerplane_kubernetes.testing.apiserver.cel import CelUnsupported, Program, compile_cel
from powerplane_kubernetes.testing.apiserver.rbac import RbacAttributes

__all__ = [
    "ROOTS",
    "AdmissionRequest",
    "Authorizer",
    "CompiledBinding",
    "CompiledPolicy",
    "Decide",
    "Validation",
    "compile_binding",
    "compile_policy",
    "environment",
    "matches",
]

ROOTS = ("object", "oldObject", "request", "params", "namespaceObject", "authorizer",
         "variables")
"""The variables a policy's expressions may read."""

Decide = Callable[[RbacAttributes | None, str], tuple[bool, str]]
"""The server's authorizer for one user: (resource attributes, or None and a path) ->
(allowed, reason)."""


@dataclass(frozen=True)
class AdmissionRequest:
    """What the admission plugin is asked about one request."""

    operation: str
    """``CREATE``, ``UPDATE`` or ``DELETE``."""
    group: str
    version: str
    resource: str
    subresource: str
    kind: str
    namespace: str
    name: str
    user: str
    groups: tuple[str, ...]
    object: dict[str, Any] | None
    old: dict[str, Any] | None
    namespaced: bool
    options: dict[str, Any] = field(default_factory=dict)

    def as_cel(self) -> dict[str, Any]:
        """``request`` as a policy reads it."""
        return {
            "kind": {"group": self.group, "version": self.version, "kind": self.kind},
            "resource": {"group": self.group, "version": self.version,
                         "resource": self.resource},
            "subResource": self.subresource,
            "requestKind": {"group": self.group, "version": self.version, "kind": self.kind},
            "requestResource": {"group": self.group, "version": self.version,
                                "resource": self.resource},
            "requestSubResource": self.subresource,
            "name": self.name, "namespace": self.namespace, "operation": self.operation,
            "userInfo": {"username": self.user, "uid": "", "groups": list(self.groups),
                         "extra": {}},
            "dryRun": False, "options": self.options,
        }

    def labels(self) -> Mapping[str, str]:
        obj = self.object if self.object is not None else self.old
        return ((obj or {}).get("metadata") or {}).get("labels") or {}


# -- the authorizer a policy reads -----------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """``authorizer....check(verb)``."""

    allowed_: bool
    reason_: str


@dataclass(frozen=True)
class Check:
    """``authorizer.group(g).resource(r)...`` or ``authorizer.path(p)``, as it is built."""

    decide: Decide
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str | None = None

    def with_(self, **changes: str) -> Check:
        return Check(**{**self.__dict__, **changes})

    def check(self, verb: str) -> Decision:
        if self.path is not None:
            return Decision(*self.decide(None, self.path))
        attrs = RbacAttributes(verb, self.group, self.resource, self.subresource,
                               self.namespace, self.name)
        return Decision(*self.decide(attrs, ""))


@dataclass(frozen=True)
class Authorizer:
    """``authorizer``: checks as the requester (or a service account), by the server."""

    for_user: Callable[[str, tuple[str, ...]], Decide]
    user: str
    groups: tuple[str, ...]
    request: AdmissionRequest | None = None

    def base(self) -> Check:
        return Check(self.for_user(self.user, self.groups))

    def cel_select(self, name: str) -> Any:
        if name == "requestResource" and self.request is not None:
            r = self.request
            return self.base().with_(group=r.group, resource=r.resource,
                                     subresource=r.subresource, namespace=r.namespace,
                                     name=r.name)
        raise KeyError(name)


def _builder(part: str) -> Callable[[Any, Any], Check]:
    def step(target: Any, value: Any) -> Check:
        base = target.base() if isinstance(target, Authorizer) else target
        if not isinstance(base, Check) or not isinstance(value, str):
            raise TypeError(f"{part}() of {type(target).__name__}")
        return base.with_(**{part: str(value)})
    return step


def _path(target: Any, value: Any) -> Check:
    if not isinstance(target, Authorizer):
        raise TypeError("path() of an authorizer")
    return target.base().with_(path=str(value))


def _service_account(target: Any, namespace: Any, name: Any) -> Authorizer:
    if not isinstance(target, Authorizer):
        raise TypeError("serviceAccount() of an authorizer")
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
              "system:authenticated")
    return Authorizer(target.for_user, f"system:serviceaccount:{namespace}:{name}", groups)


def _check(target: Any, verb: Any) -> Decision:
    if not isinstance(target, Check):
        raise TypeError("check() of a resource or path check")
    return target.check(str(verb))


def _decided(fn: Callable[[Decision], Any]) -> Callable[[Any], Any]:
    def run(target: Any) -> Any:
        if not isinstance(target, Decision):
            raise TypeError("of an authorizer's decision")
        return fn(target)
    return run


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "group": _builder("group"), "resource": _builder("resource"),
    "subresource": _builder("subresource"), "namespace": _builder("namespace"),
    "name": _builder("name"), "path": _path, "serviceAccount": _service_account,
    "check": _check,
    "allowed": _decided(lambda d: celtypes.BoolType(d.allowed_)),
    "reason": _decided(lambda d: celtypes.StringType(d.reason_)),
    "errored": _decided(lambda d: celtypes.BoolType(False)),
    "error": _decided(lambda d: celtypes.StringType("")),
}
"""The authorizer library (``k8s.io/apiserver/pkg/cel/library/authz.go``)."""


# -- policies and bindings -------------------------------------------------------------------
@dataclass(frozen=True)
class Validation:
    program: Program
    message: str
    message_program: Program | None
    reason: str


@dataclass
class CompiledPolicy:
    """A ValidatingAdmissionPolicy, its expressions compiled."""

    name: str
    failure_policy: str
    constraints: Mapping[str, Any]
    conditions: list[tuple[str, Program]]
    variables: dict[str, Program]
    validations: list[Validation]
    annotations: list[tuple[str, Program]]


@dataclass(frozen=True)
class CompiledBinding:
    name: str
    policy: str
    actions: tuple[str, ...]
    match: Mapping[str, Any] | None


_CACHE: dict[str, Program] = {}


def _compiled(text: str, where: str) -> Program:
    found = _CACHE.get(text)
    if found is None:
        try:
            found = compile_cel(text, ROOTS, FUNCTIONS)
        except CelUnsupported as exc:
            raise CelUnsupported(f"{where}: Invalid value: {text!r}: {exc}") from exc
        _CACHE[text] = found
    return found


def compile_policy(doc: Mapping[str, Any]) -> CompiledPolicy:
    """A stored policy compiled; ``ValueError`` (:class:`.cel.CelUnsupported`) naming the
    field for what this server cannot evaluate as Kubernetes would."""
    spec = doc.get("spec") or {}
    if spec.get("paramKind"):
        raise ValueError("spec.paramKind: Unsupported value: the test API server evaluates "
                         "no policy parameters (no policy of `operator manifests` has one)")
    validations = []
    for i, v in enumerate(spec.get("validations") or []):
        at = f"spec.validations[{i}]"
        said = v.get("messageExpression")
        validations.append(Validation(
            _compiled(str(v["expression"]), f"{at}.expression"),
            str(v.get("message") or ""),
            _compiled(str(said), f"{at}.messageExpression") if said else None,
            str(v.get("reason") or "Invalid")))
    if not validations and not spec.get("auditAnnotations"):
        raise ValueError("spec.validations: Required value: validations or "
                         "auditAnnotations must contain at least one item")
    declared = {str(v["name"]) for v in spec.get("variables") or []}
    for text in _expressions(spec):
        for name in re.findall(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)", text):
            if name not in declared:
                raise CelUnsupported(f"Invalid value: {text!r}: compilation failed: "
                                     f"undefined field 'variables.{name}'")
    return CompiledPolicy(
        name=str(doc["metadata"]["name"]),
        failure_policy=str(spec.get("failurePolicy") or "Fail"),
        constraints=spec.get("matchConstraints") or {},
        conditions=[(str(c["name"]), _compiled(str(c["expression"]),
                                               f"spec.matchConditions[{i}].expression"))
                    for i, c in enumerate(spec.get("matchConditions") or [])],
        variables={str(v["name"]): _compiled(str(v["expression"]),
                                             f"spec.variables[{i}].expression")
                   for i, v in enumerate(spec.get("variables") or [])},
        validations=validations,
        annotations=[(str(a["key"]), _compiled(str(a["valueExpression"]),
                                               f"spec.auditAnnotations[{i}].valueExpression"))
                     for i, a in enumerate(spec.get("auditAnnotations") or [])])


def _expressions(spec: Mapping[str, Any]) -> list[str]:
    """Every CEL expression of a policy's spec."""
    out = [str(v.get(k)) for v in spec.get("validations") or []
           for k in ("expression", "messageExpression") if v.get(k)]
    out += [str(c["expression"]) for c in spec.get("matchConditions") or []]
    out += [str(v["expression"]) for v in spec.get("variables") or []]
    return out + [str(a["valueExpression"]) for a in spec.get("auditAnnotations") or []]


def compile_binding(doc: Mapping[str, Any]) -> CompiledBinding:
    """A stored binding; ``ValueError`` naming the field for what cannot be served."""
    spec = doc.get("spec") or {}
    if spec.get("paramRef"):
        raise ValueError("spec.paramRef: Unsupported value: the test API server evaluates "
                         "no policy parameters")
    actions = tuple(str(a) for a in spec.get("validationActions") or [])
    if not actions or not set(actions) <= {"Deny", "Warn", "Audit"} \
            or {"Deny", "Warn"} <= set(actions):
        raise ValueError(f"spec.validationActions: Invalid value: {list(actions)}: one or "
                         "more of Deny, Warn, Audit (Deny and Warn not together)")
    return CompiledBinding(str(doc["metadata"]["name"]), str(spec.get("policyName") or ""),
                           actions, spec.get("matchResources"))


# -- matching --------------------------------------------------------------------------------
def _rule_matches(rule: Mapping[str, Any], req: AdmissionRequest) -> bool:
    ops = rule.get("operations") or []
    if "*" not in ops and req.operation not in ops:
        return False
    for name, value in (("apiGroups", req.group), ("apiVersions", req.version)):
        wanted = rule.get(name) or []
        if "*" not in wanted and value not in wanted:
            return False
    scope = rule.get("scope") or "*"
    if scope != "*" and (scope == "Namespaced") != req.namespaced:
        return False
    sub = req.subresource
    for r in rule.get("resources") or []:
        res, _, rsub = str(r).partition("/")
        if r == "*/*":
            hit = True  # every resource and every subresource
        elif not rsub:
            hit = not sub and res in ("*", req.resource)  # never a subresource
        else:
            hit = bool(sub) and res in ("*", req.resource) and rsub in ("*", sub)
        if hit:
            names = rule.get("resourceNames") or []
            return not names or req.name in names
    return False


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        k, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(k) not in values) \
                or (op == "NotIn" and k in labels and labels.get(k) in values) \
                or (op == "Exists" and k not in labels) \
                or (op == "DoesNotExist" and k in labels):
            return False
    return True


def matches(match: Mapping[str, Any] | None, req: AdmissionRequest,
            namespace_labels: Mapping[str, str]) -> bool:
    """Whether ``req`` is in a ``matchConstraints`` / ``matchResources`` (None: every
    request, as a binding without ``matchResources`` takes its policy's)."""
    if match is None:
        return True
    rules: Sequence[Mapping[str, Any]] = match.get("resourceRules") or []
    if not any(_rule_matches(r, req) for r in rules):
        return False
    if any(_rule_matches(r, req) for r in match.get("excludeResourceRules") or []):
        return False
    if req.namespaced and not _selects(match.get("namespaceSelector"), namespace_labels):
        return False
    return _selects(match.get("objectSelector"), req.labels())


@dataclass
class Variables:
    """``variables``: each evaluated on first use, with the request's variables."""

    programs: Mapping[str, Program]
    env: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[tuple[str, Any]] = field(default_factory=list)

    def cel_select(self, name: str) -> Any:
        if name not in self.values:
            program = self.programs.get(name)
            if program is None:
                raise KeyError(name)
            self.values[name] = program.evaluate(self.env)
        return self.values[name]


def environment(req: AdmissionRequest, authorizer: Authorizer,
                programs: Mapping[str, Program]) -> dict[str, Any]:
    """The variables of one policy's expressions for ``req``."""
    namespace_object = None
    if req.namespaced and req.namespace:
        namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": req.namespace,
            "labels": {"kubernetes.io/metadata.name": req.namespace}}}
    env: dict[str, Any] = {
        "object": req.object, "oldObject": req.old, "request": req.as_cel(),
        "params": None, "namespaceObject": namespace_object, "authorizer": authorizer}
    env["variables"] = Variables(programs, env)
    return env
