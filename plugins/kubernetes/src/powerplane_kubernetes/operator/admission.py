"""The ValidatingAdmissionPolicies that keep every field to its one writer.

Three policies (``admissionregistration.k8s.io/v1``, Kubernetes 1.30 and later), each with
its binding (``validationActions: [Deny]``), printed by ``powerplane operator manifests``:

``powerplane-requester`` (:func:`admission_policy`) on ``CREATE``, ``UPDATE`` and ``DELETE``
of ``nodemaintenances`` (the main resource: ``spec`` and ``requests``, a person's): on create,
``spec.requestedBy`` is ``request.userInfo.username``, ``spec.requesterGroups`` exactly the
authenticated groups, and the requester holds the intent's verb on ``servers.powerplane.io``
named by the node; on update, ``spec`` is unchanged and each new ``requests`` entry (a return,
an abandon, a resolution) names its author, who holds its verb; on delete of a maintenance
that has not ended, the deleter holds ``maintenance-abandon`` on the node (a deletion is an
abandon: the finalizer runs it, :mod:`powerplane_kubernetes.store`).

``powerplane-executor`` (:func:`executor_policy`) on ``UPDATE`` of ``nodemaintenances/status``
and ``CREATE`` of ``maintenancedispatches`` (the executor's: what the machine did, and the
dispatch ledger): the writer must be an executor, one that may create ledger entries
(``authorizer`` asks RBAC: the operator's ClusterRole grants it, and a person who runs
``powerplane maintenance run`` with the kubernetes store needs the operator's roles), and a
status write may not regress: the phase never moves back (a terminal phase never changes;
``Returning``, ``Refused`` and ``Failed`` may follow any phase), and no recorded dispatch is
removed. A restore that brings back an older status with the executor's own identity is not
refused when it moves nothing back; the executor holds every status it reads against its
ledger (core's ``powerplane.lifecycle.ledger``) and parks a regression for a person.

``powerplane-audit`` (:func:`audit_policy`) on ``CREATE`` of ``maintenanceaudits``: a record
names its creator as ``actor`` (``recordedBy`` empty or the creator), unless its creator is
a recorder (may ``record`` on ``auditrecorders.powerplane.io``: the operator, which records
a request whose creator wrote none, a deletion, a regression; and the Servers gateway, which
records acts and denials of identities it verified itself, ``via`` saying by what), and then
``recordedBy`` is the creator.

A policy matches a subresource only by naming it (``nodemaintenances/status``: ``'*' means
all resources, but not subresources``). The spec comparison is generated field by field
from the CRD's schema (:func:`spec_unchanged`): the API server's CEL treats a null nullable
field as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from powerplane.lifecycle import Phase
from powerplane_kubernetes.crd import (
    AUDIT_PLURAL,
    DISPATCH_PLURAL,
    FINALIZER,
    GROUP,
    PLURAL,
    REQUESTER_BINDING,
    VERSION,
    crd_manifest,
)

__all__ = ["AUDIT_POLICY", "EXECUTOR_POLICY", "RECORDERS", "admission_binding",
           "admission_name", "admission_policy", "audit_policy", "executor_policy",
           "policies", "spec_unchanged"]

EXECUTOR_POLICY = "powerplane-executor"
"""The policy (and binding) that keeps ``status`` and the ledger to the executor."""
AUDIT_POLICY = "powerplane-audit"
"""The policy (and binding) that binds an audit record's actor to its creator."""
RECORDERS = "auditrecorders"
"""The virtual resource (``auditrecorders.powerplane.io``, verb ``record``) whose holders
may write a record of another identity (the executor and the Servers gateway)."""


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": "powerplane", "app.kubernetes.io/part-of": "powerplane"}


def admission_name() -> str:
    """The name of the requester policy and of its binding (the binding the operator reads
    to know identities are bound: :data:`powerplane_kubernetes.crd.REQUESTER_BINDING`)."""
    return REQUESTER_BINDING


def _authorized(verb: str) -> str:
    return (f"authorizer.group('{GROUP}').resource('servers').name(object.spec.node)"
            f".check({verb}).allowed()")


def spec_unchanged(schema: Mapping[str, Any], new: str = "object.spec",
                   old: str = "oldObject.spec") -> str:
    """CEL: ``new`` equals ``old`` field by field, per ``schema`` (a structural schema): an
    optional or nullable field is equal when both lack it or both hold the same value, as
    the API server's CEL reads a null nullable field as absent; a field without properties
    of its own (a string, a list, a free-form object) is compared whole."""
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, Mapping) or not props \
            or schema.get("x-kubernetes-preserve-unknown-fields"):
        return f"{new} == {old}"
    required = set(schema.get("required") or ())
    parts = []
    for key, sub in props.items():
        a, b = f"{new}.{key}", f"{old}.{key}"
        same = spec_unchanged(sub, a, b)
        if key in required and not sub.get("nullable"):
            parts.append(f"({same})")
        else:
            parts.append(f"(has({a}) ? has({b}) && ({same}) : !has({b}))")
    return " && ".join(parts)


def _spec_schema() -> Mapping[str, Any]:
    version = crd_manifest()["spec"]["versions"][0]
    found: Mapping[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return found


_USER = "request.userInfo.username"
_UPDATE = "request.operation == 'UPDATE'"
_NOT_UPDATE = "request.operation != 'UPDATE'"


def _new_entry(field_name: str) -> str:
    """CEL: ``requests.<field_name>`` is present and new or changed (absent, or another
    value, in the old object; every one is new on create)."""
    now, before = f"object.requests.{field_name}", f"oldObject.requests.{field_name}"
    return (f"(has(object.requests) && has({now}) && !({_UPDATE} && has(oldObject.requests) "
            f"&& has({before}) && {before} == {now}))")


PREFIX = f"{GROUP}/"
"""The prefix of the labels and annotations only the executor changes on an update."""
_EXECUTOR = (f"authorizer.group('{GROUP}').resource('{DISPATCH_PLURAL}')"
             ".check('create').allowed()")
"""CEL: the writer is an executor (may create dispatch ledger entries)."""


def _ours_unchanged(field_name: str) -> str:
    """CEL: every ``powerplane.io/`` key of ``metadata.<field_name>`` is the same in the old
    and the new object (none added, removed or changed)."""
    new, old = f"object.metadata.{field_name}", f"oldObject.metadata.{field_name}"
    ours = f"k.startsWith('{PREFIX}')"
    return (f"((!has({new}) || {new}.all(k, !{ours} || (has({old}) && k in {old} && "
            f"{old}[k] == {new}[k]))) && (!has({old}) || {old}.all(k, !{ours} || "
            f"(has({new}) && k in {new}))))")


def admission_policy() -> dict[str, Any]:
    """The ValidatingAdmissionPolicy that binds identities on ``nodemaintenances`` (see the
    module docstring); each validation has a message and a ``messageExpression``."""
    maintenances = PLURAL
    version = VERSION
    node = "object.spec.node"
    returned, abandoned = _new_entry("returnRequest"), _new_entry("abandon")
    old_resolution = (f"({_UPDATE} && has(oldObject.requests) && "
                      "has(oldObject.requests.resolutions) && "
                      "r in oldObject.requests.resolutions)")
    resolutions = "(has(object.requests) && has(object.requests.resolutions))"
    validations: list[dict[str, str]] = [
        {"expression": f"request.operation != 'CREATE' || object.spec.requestedBy == {_USER}",
         "message": "spec.requestedBy must name the user who creates the NodeMaintenance",
         "messageExpression": (
             "'spec.requestedBy must name the user who creates the NodeMaintenance: it "
             f"says ' + object.spec.requestedBy + ', but the request comes from ' + {_USER}"),
         "reason": "Forbidden"},
        {"expression": (
            "request.operation != 'CREATE' || !has(object.spec.requesterGroups) || "
            "(object.spec.requesterGroups.all(g, g in request.userInfo.groups) && "
            "request.userInfo.groups.all(g, g in object.spec.requesterGroups))"),
         "message": "spec.requesterGroups must be exactly the requester's groups",
         "messageExpression": (
             "'spec.requesterGroups must be exactly the groups the API server authenticated "
             f"' + {_USER} + ' in (' + request.userInfo.groups.join(', ') + '), "
             "system:authenticated included; it says (' + "
             "object.spec.requesterGroups.join(', ') + ')'"),
         "reason": "Forbidden"},
        {"expression": f"request.operation != 'CREATE' || {_authorized('object.spec.intent')}",
         "message": "the requester may not take this intent on this node",
         "messageExpression": (
             f"'user ' + {_USER} + ' may not ' + object.spec.intent + ' node ' + {node} + "
             "': no RBAC rule grants the verb ' + object.spec.intent + "
             f"' on servers.{GROUP} named ' + {node}"),
         "reason": "Forbidden"},
        {"expression": (f"request.operation != 'UPDATE' || "
                        f"({spec_unchanged(_spec_schema())})"),
         "message": "spec cannot change after the NodeMaintenance is created",
         "messageExpression": (
             "'spec cannot change after the NodeMaintenance is created: it is the request "
             "as ' + oldObject.spec.requestedBy + ' made it; a return, an abandon or a "
             "resolution goes under requests'"),
         "reason": "Invalid"},
        {"expression": f"!{returned} || object.requests.returnRequest.actor == {_USER}",
         "message": "requests.returnRequest.actor must name the user who adds it",
         "messageExpression": (
             "'requests.returnRequest.actor must name the user who asks for the return ("
             f"' + {_USER} + '), not ' + object.requests.returnRequest.actor"),
         "reason": "Forbidden"},
        {"expression": f"!{returned} || {_authorized(repr('uncordon'))}",
         "message": "the requester may not return this node to service",
         "messageExpression": (
             f"'user ' + {_USER} + ' may not return node ' + {node} + ' to service: no "
             f"RBAC rule grants the verb uncordon on servers.{GROUP} named ' + {node}"),
         "reason": "Forbidden"},
        {"expression": f"!{abandoned} || object.requests.abandon.actor == {_USER}",
         "message": "requests.abandon.actor must name the user who adds it",
         "messageExpression": (
             "'requests.abandon.actor must name the user who abandons the maintenance ("
             f"' + {_USER} + '), not ' + object.requests.abandon.actor"),
         "reason": "Forbidden"},
        {"expression": f"!{abandoned} || {_authorized(repr('maintenance-abandon'))}",
         "message": "the requester may not abandon a maintenance of this node",
         "messageExpression": (
             f"'user ' + {_USER} + ' may not abandon the maintenance of node ' + {node} + "
             f"': no RBAC rule grants the verb maintenance-abandon on servers.{GROUP} "
             f"named ' + {node}"),
         "reason": "Forbidden"},
        {"expression": (f"!{resolutions} || object.requests.resolutions.all(r, "
                        f"{old_resolution} || r.actor == {_USER})"),
         "message": "every new requests.resolutions entry must name the user who adds it",
         "messageExpression": (
             "'every new requests.resolutions entry must name the user who adds it (' + "
             f"{_USER} + '), not ' + object.requests.resolutions.filter(r, "
             f"!{old_resolution} && r.actor != {_USER}).map(r, r.actor).join(', ')"),
         "reason": "Forbidden"},
        {"expression": (f"!{resolutions} || object.requests.resolutions.all(r, "
                        f"{old_resolution}) || {_authorized(repr('maintenance-resolve'))}"),
         "message": "the requester may not resolve a dispatch of this node",
         "messageExpression": (
             f"'user ' + {_USER} + ' may not resolve a dispatch of node ' + {node} + ': "
             f"no RBAC rule grants the verb maintenance-resolve on servers.{GROUP} named ' "
             f"+ {node}"),
         "reason": "Forbidden"},
    ]
    for v in validations:  # a DELETE has no object: the rules above are about writes
        if not v["expression"].startswith(("request.operation != 'CREATE'",
                                           "request.operation != 'UPDATE'")):
            v["expression"] = f"request.operation == 'DELETE' || ({v['expression']})"
    ended = ("(has(oldObject.status) && has(oldObject.status.phase) && "
             "oldObject.status.phase in ['Complete', 'Refused', 'Failed'])")
    own_pending = f"(!has(oldObject.status) && oldObject.spec.requestedBy == {_USER})"
    may_abandon = (f"authorizer.group('{GROUP}').resource('servers').name(oldObject.spec.node)"
                   ".check('maintenance-abandon').allowed()")
    executor = _EXECUTOR
    for what, field_name in (("labels", "labels"), ("annotations", "annotations")):
        validations.append({
            "expression": f"{_NOT_UPDATE} || "
                          f"{_ours_unchanged(field_name)} || {executor}",
            "message": f"only the executor changes a maintenance's {PREFIX}* {what}",
            "messageExpression": (
                f"'only the executor changes the {PREFIX}* {what} of ' + "
                f"oldObject.metadata.name + ' (they steer the executor: which maintenances "
                f"are active, which request lost its node): ' + {_USER} + ' may not create "
                f"{DISPATCH_PLURAL}.{GROUP}'"),
            "reason": "Forbidden"})
    kept = (f"!has(oldObject.metadata.finalizers) || !('{FINALIZER}' in "
            "oldObject.metadata.finalizers) || (has(object.metadata.finalizers) && "
            f"'{FINALIZER}' in object.metadata.finalizers)")
    creator_of_pending = f"(!has(oldObject.status) && oldObject.spec.requestedBy == {_USER})"
    validations.append({
        "expression": (f"{_NOT_UPDATE} || {kept} || {creator_of_pending} "
                       f"|| {executor}"),
        "message": f"only the executor removes the finalizer {FINALIZER}",
        "messageExpression": (
            f"'the finalizer {FINALIZER} makes deleting ' + oldObject.metadata.name + "
            "' an abandon: only the executor removes it (once the abandon ran), or the "
            "creator of a request not admitted yet; ' + " + _USER + " + ' is neither'"),
        "reason": "Forbidden"})
    validations.append({
        "expression": (f"request.operation != 'DELETE' || {ended} || {own_pending} || "
                       f"{may_abandon}"),
        "message": "deleting a maintenance that has not ended abandons it: the deleter may "
                   "not abandon it",
        "messageExpression": (
            f"'deleting ' + oldObject.metadata.name + ' abandons it (it has not ended): "
            f"user ' + {_USER} + ' may not abandon the maintenance of node ' + "
            f"oldObject.spec.node + ' (no RBAC rule grants the verb maintenance-abandon on "
            f"servers.{GROUP} named it)'"),
        "reason": "Forbidden"})
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": admission_name(), "labels": _labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [GROUP], "apiVersions": [version],
                "operations": ["CREATE", "UPDATE", "DELETE"], "resources": [maintenances]}]},
            "validations": validations,
        },
    }


def admission_binding() -> dict[str, Any]:
    """The policy's binding: every ``nodemaintenances`` write, ``validationActions:
    [Deny]`` (the operator refuses every request while it is absent or does not deny)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": admission_name(), "labels": _labels()},
        "spec": {"policyName": admission_name(), "validationActions": ["Deny"]},
    }


def _binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": _labels()},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


_ORDER = {Phase.PENDING: 0, Phase.REQUESTED: 1, Phase.CORDONED: 2, Phase.DRAINING: 3,
          Phase.DRAINED: 4, Phase.REBOOTING: 5, Phase.POWERED_OFF: 5, Phase.RETURNING: 6,
          Phase.COMPLETE: 7}
"""Where each phase stands on the way forward (``Refused`` and ``Failed`` follow any)."""


def _rank(expr: str) -> str:
    """CEL: the rank of the phase ``expr`` names (a phase not listed ranks 0)."""
    table = ", ".join(f"'{p.value}': {r}" for p, r in _ORDER.items())
    return f"({{{table}}}[{expr}])"


def executor_policy() -> dict[str, Any]:
    """``powerplane-executor`` (see the module docstring)."""
    executor = _EXECUTOR
    user = "request.userInfo.username"
    status_write = "(request.subResource == 'status')"
    old_phase = ("(has(oldObject.status) && has(oldObject.status.phase) ? "
                 "oldObject.status.phase : 'Pending')")
    new_phase = ("(has(object.status) && has(object.status.phase) ? "
                 "object.status.phase : 'Pending')")
    terminal = "['Complete', 'Refused', 'Failed']"
    any_time = "['Returning', 'Refused', 'Failed']"
    kept = ("!has(oldObject.status) || !has(oldObject.status.dispatches) || "
            "oldObject.status.dispatches.all(d, has(object.status.dispatches) && "
            "object.status.dispatches.exists(n, n.attemptId == d.attemptId))")
    validations = [
        {"expression": executor,
         "message": "only the executor writes a maintenance's status and its dispatch ledger",
         "messageExpression": (
             f"'only the executor writes ' + (request.resource.resource == '{DISPATCH_PLURAL}'"
             " ? 'the dispatch ledger' : 'a maintenance\\'s status') + ': ' + "
             f"{user} + ' may not create {DISPATCH_PLURAL}.{GROUP} (the operator\\'s "
             "ClusterRole grants it)'"),
         "reason": "Forbidden"},
        {"expression": (f"!{status_write} || !({old_phase} in {terminal}) || "
                        f"{new_phase} == {old_phase}"),
         "message": "a maintenance that has ended does not change phase",
         "messageExpression": (f"'maintenance ' + oldObject.metadata.name + ' has ended ("
                               f"' + {old_phase} + '): its phase cannot become ' + "
                               f"{new_phase}"),
         "reason": "Invalid"},
        {"expression": (f"!{status_write} || {new_phase} in {any_time} || "
                        f"{_rank(new_phase)} >= {_rank(old_phase)}"),
         "message": "a maintenance's phase never moves back",
         "messageExpression": (f"'the phase of ' + oldObject.metadata.name + ' cannot move "
                               f"back from ' + {old_phase} + ' to ' + {new_phase}"),
         "reason": "Invalid"},
        {"expression": f"!{status_write} || {kept}",
         "message": "a recorded dispatch is never removed from a maintenance's status",
         "messageExpression": ("'a recorded dispatch of ' + oldObject.metadata.name + ' "
                               "cannot be removed from its status'"),
         "reason": "Invalid"},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": EXECUTOR_POLICY, "labels": _labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["UPDATE"],
                 "resources": [f"{PLURAL}/status"]},
                {"apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["CREATE"],
                 "resources": [DISPATCH_PLURAL]},
            ]},
            "validations": validations,
        },
    }


def audit_policy() -> dict[str, Any]:
    """``powerplane-audit`` (see the module docstring)."""
    user = "request.userInfo.username"
    recorder = (f"authorizer.group('{GROUP}').resource('{RECORDERS}').check('record')"
                ".allowed()")
    by = "(has(object.spec.recordedBy) && object.spec.recordedBy != null ? " \
         "object.spec.recordedBy : '')"
    validations = [
        {"expression": (f"(object.spec.actor == {user} && ({by} == '' || {by} == {user})) "
                        f"|| ({recorder} && {by} == {user})"),
         "message": "an audit record names its creator as its actor, or a recorder as its "
                    "recordedBy",
         "messageExpression": (
             f"'an audit record made by ' + {user} + ' must name ' + {user} + ' as its "
             "actor (it names ' + object.spec.actor + '), or ' + "
             f"{user} + ' must be a recorder (verb record on {RECORDERS}.{GROUP}) and name "
             "itself as recordedBy'"),
         "reason": "Forbidden"},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": AUDIT_POLICY, "labels": _labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["CREATE"],
                 "resources": [AUDIT_PLURAL]}]},
            "validations": validations,
        },
    }


def policies() -> list[dict[str, Any]]:
    """Every policy and its binding, in apply order."""
    return [admission_policy(), admission_binding(), executor_policy(),
            _binding(EXECUTOR_POLICY), audit_policy(), _binding(AUDIT_POLICY)]
