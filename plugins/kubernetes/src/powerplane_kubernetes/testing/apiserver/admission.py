"""Admission: the stored ValidatingAdmissionPolicies evaluated, and the webhooks emulated.

**Policies.** Every ``CREATE``, ``UPDATE`` and ``DELETE`` of a resource or a subresource
(``nodemaintenances/status``, ``pods/eviction``) is asked of every stored
ValidatingAdmissionPolicyBinding whose policy is stored, in storage order: the policy's
``matchConstraints`` and the binding's ``matchResources`` (:func:`.policies.matches`; a
policy sees ``…/status`` only where a rule names it), then its ``matchConditions``, then
each validation, with the CEL environment Kubernetes gives a policy (:mod:`.policies`,
compiled once per policy: :mod:`.cel`). A validation that is false is a denial, with its
``messageExpression`` (else ``message``, else ``failed expression: …``) and its
``reason``; the binding's ``validationActions`` say what a denial does: ``Deny`` refuses
the request with the API server's words and code (``ValidatingAdmissionPolicy 'name' with
binding 'name' denied request: <message>``, ``403`` for ``Forbidden``, ``422`` for
``Invalid`` and by default), ``Warn`` records it in :attr:`AdmissionServer.warnings`,
``Audit`` in :attr:`AdmissionServer.audited`. A policy or binding is compiled when it is
stored (through the API or :meth:`~AdmissionServer.add_rbac`): one with an expression
that cannot be compiled, ``paramKind`` or ``paramRef`` is refused there (``422``, or
``ValueError`` from a test's seeding). An expression that fails at evaluation fails
closed (``failurePolicy: Fail``, the default: the request is refused, ``expression '…'
resulted in error: …``) and loudly: every such error is kept in
:attr:`AdmissionServer.cel_errors`, and the server's ``stop`` (the end of its ``with``)
fails the test with them unless the test took them (:meth:`~AdmissionServer
.take_cel_errors`).

``operator manifests``' policy and binding are stored when the server starts
(``admission=True``), as on a cluster they were applied to.

**Webhooks** (:attr:`AdmissionServer.validators`): Longhorn's node webhook refuses a node
left with ``allowScheduling`` and ``evictionRequested`` both true (its own sentence) with
``422 Invalid``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from celpy import celtypes

from powerplane_kubernetes.testing.apiserver.authz import AuthzServer
from powerplane_kubernetes.testing.apiserver.cel import error_text
from powerplane_kubernetes.testing.apiserver.common import (
    ADMISSION_KINDS,
    LONGHORN_NODES,
    Response,
    status,
)
from powerplane_kubernetes.testing.apiserver.policies import (
    AdmissionRequest,
    Authorizer,
    CompiledBinding,
    CompiledPolicy,
    Decide,
    compile_binding,
    compile_policy,
    environment,
    matches,
)

__all__ = ["AdmissionServer", "Validator", "longhorn_node_webhook"]

Validator = Callable[[dict[str, Any] | None, dict[str, Any]], str | None]
"""An admission check: (old object or None, new object) -> a refusal sentence or None."""

_POLICIES = ADMISSION_KINDS["ValidatingAdmissionPolicy"]
_BINDINGS = ADMISSION_KINDS["ValidatingAdmissionPolicyBinding"]
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


def longhorn_node_webhook(old: dict[str, Any] | None, new: dict[str, Any]) -> str | None:
    spec = new.get("spec") or {}
    if spec.get("evictionRequested") and spec.get("allowScheduling"):
        name = new.get("metadata", {}).get("name", "")
        return ('admission webhook "validator.longhorn.io" denied the request: need to disable '
                f"scheduling on node {name} for node eviction, or cancel eviction to enable "
                "scheduling on this node")
    return None


def _denial(req: AdmissionRequest, message: str, reason: str) -> Response:
    """``admission.NewForbidden`` with the policy's reason and its code."""
    what = f"{req.resource}.{req.group}" if req.group else req.resource
    full = f'{what} "{req.name}" is forbidden: {message}' if req.name else \
        f"{what} is forbidden: {message}"
    details: dict[str, Any] = {"kind": req.resource, "causes": [{"message": message}]}
    if req.name:
        details["name"] = req.name
    if req.group:
        details["group"] = req.group
    return status(_CODES.get(reason, 422), reason, full, details)


class AdmissionServer(AuthzServer):
    """The policies and webhooks (see the module docstring)."""

    def _init_admission(self, *, admission: bool, longhorn: bool, strict_cel: bool) -> None:
        self.admission = admission
        """Whether ``operator manifests``' ValidatingAdmissionPolicy and its binding are
        stored when the server starts (as on a cluster they were applied to)."""
        self.strict_cel = strict_cel
        """Fail at ``stop`` on a CEL expression that failed to evaluate (see
        :attr:`cel_errors`)."""
        self.validators: dict[str, list[Validator]] = {}
        """Admission webhooks by resource key (``longhorn.io/v1beta2/nodes``)."""
        if longhorn:
            self.validators[LONGHORN_NODES] = [longhorn_node_webhook]
        self.cel_errors: list[str] = []
        """Every CEL evaluation error of a policy, in words (the request failed closed)."""
        self.warnings: list[str] = []
        """The denials of bindings with ``validationActions: [Warn]``."""
        self.audited: list[str] = []
        """The denials of bindings with ``Audit``, and the audit annotations."""
        self._compiled: dict[str, tuple[str, CompiledPolicy]] = {}
        self._active: list[tuple[CompiledBinding, CompiledPolicy]] | None = None

    def _started(self) -> None:
        super()._started()
        if self.admission:
            from powerplane_kubernetes.operator.admission import policies

            self.add_rbac(*policies())

    def _changed(self, resource: str) -> None:
        super()._changed(resource)
        if resource in (_POLICIES, _BINDINGS):
            self._active = None

    def _invalid(self, resource: str, body: dict[str, Any]) -> str | None:
        """Why a policy or binding cannot be stored (the API server's validation, which
        compiles every expression), or None."""
        try:
            if resource == _POLICIES:
                compile_policy(body)
            elif resource == _BINDINGS:
                compile_binding(body)
        except (ValueError, KeyError) as exc:
            kind = "ValidatingAdmissionPolicy" if resource == _POLICIES else \
                "ValidatingAdmissionPolicyBinding"
            name = (body.get("metadata") or {}).get("name", "")
            return f'{kind}.admissionregistration.k8s.io "{name}" is invalid: {exc}'
        return super()._invalid(resource, body)

    def stop(self) -> None:
        super().stop()
        if self.cel_errors and self.strict_cel:
            errors, self.cel_errors = self.cel_errors, []
            raise AssertionError("CEL expressions of admission policies failed to evaluate "
                                 "(each request failed closed):\n  " + "\n  ".join(errors))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self.cel_errors.clear()  # the test failed already: its own error is the news
        super().__exit__(exc_type, exc, tb)

    def take_cel_errors(self) -> list[str]:
        """The CEL evaluation errors so far, taken (a test that expected them)."""
        def take() -> list[str]:
            errors, self.cel_errors = self.cel_errors, []
            return errors
        return self._call(take)

    # -- the admission chain -----------------------------------------------------------------
    def _admit(self, req: AdmissionRequest, resource: str) -> Response | None:
        """The webhooks, then the policies: a refusal, or None."""
        if req.object is not None and not req.subresource:
            for check in self.validators.get(resource, []):
                refusal = check(req.old, req.object)
                if refusal is not None:
                    return status(422, "Invalid", refusal)
        return self._policies_admit(req)

    def _bindings(self) -> list[tuple[CompiledBinding, CompiledPolicy]]:
        """The stored bindings whose policy is stored, in storage order, compiled (a policy
        again only when it changed)."""
        if self._active is None:
            compiled: dict[str, tuple[str, CompiledPolicy]] = {}
            for raw in self._raw(_POLICIES):
                meta = raw.get("metadata") or {}
                name, rv = str(meta.get("name")), str(meta.get("resourceVersion"))
                known = self._compiled.get(name)
                compiled[name] = known if known is not None and known[0] == rv else \
                    (rv, compile_policy(raw))
            self._compiled = compiled
            active = []
            for raw in self._raw(_BINDINGS):
                binding = compile_binding(raw)
                found = compiled.get(binding.policy)
                if found is not None:  # a binding of no policy binds nothing
                    active.append((binding, found[1]))
            self._active = active
        return self._active

    def _policies_admit(self, req: AdmissionRequest) -> Response | None:
        active = self._bindings()
        if not active:
            return None
        ns_labels = {"kubernetes.io/metadata.name": req.namespace} if req.namespace else {}
        denied: tuple[str, str] | None = None
        for binding, policy in active:
            if not matches(policy.constraints, req, ns_labels) \
                    or not matches(binding.match, req, ns_labels):
                continue
            for message, reason in self._evaluate(policy, binding, req):
                words = (f"ValidatingAdmissionPolicy '{policy.name}' with binding "
                         f"'{binding.name}' denied request: {message}")
                if "Deny" in binding.actions and denied is None:
                    denied = (words, reason)
                if "Warn" in binding.actions:
                    self.warnings.append(
                        f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                        f"with binding '{binding.name}': {message}")
                if "Audit" in binding.actions:
                    self.audited.append(words)
        return None if denied is None else _denial(req, *denied)

    def _decider(self, user: str, groups: tuple[str, ...]) -> Decide:
        return lambda attrs, path: self.authorize(user, groups, attrs, path=path)

    def _failed(self, policy: CompiledPolicy, text: str, value: Any) -> str:
        error = error_text(value)
        self.cel_errors.append(f"ValidatingAdmissionPolicy '{policy.name}': expression "
                               f"{text!r} resulted in error: {error}")
        return f"expression '{text}' resulted in error: {error}"

    def _evaluate(self, policy: CompiledPolicy, binding: CompiledBinding,
                  req: AdmissionRequest) -> list[tuple[str, str]]:
        """The policy's denials of ``req``: ``(message, reason)`` each."""
        env = environment(req, Authorizer(self._decider, req.user, req.groups, req),
                          policy.variables)
        fail = policy.failure_policy != "Ignore"
        for name, program in policy.conditions:
            value = program.evaluate(env)
            if not isinstance(value, celtypes.BoolType):
                words = self._failed(policy, program.text, value)
                return [(f"failed to evaluate matchCondition {name}: {words}", "Invalid")] \
                    if fail else []
            if not value:
                return []
        out: list[tuple[str, str]] = []
        for validation in policy.validations:
            value = validation.program.evaluate(env)
            if isinstance(value, celtypes.BoolType):
                if value:
                    continue
                message = validation.message or \
                    f"failed expression: {validation.program.text.strip()}"
                if validation.message_program is not None:
                    said = validation.message_program.evaluate(env)
                    if isinstance(said, str) and said.strip() and "\n" not in said:
                        message = said.strip()
                    elif not isinstance(said, str):
                        self._failed(policy, validation.message_program.text, said)
                out.append((message, validation.reason))
            else:
                words = self._failed(policy, validation.program.text, value)
                if fail:
                    out.append((words, "Invalid"))
        for key, program in policy.annotations:
            value = program.evaluate(env)
            if isinstance(value, str):
                self.audited.append(f"{policy.name}/{key}: {value}")
            elif value is not None:
                self._failed(policy, program.text, value)
        return out
