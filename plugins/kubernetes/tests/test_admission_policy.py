"""The ValidatingAdmissionPolicy of ``operator manifests``, evaluated: its CEL expressions,
taken out of the printed YAML, run with cel-python over admission requests built as the
API server builds them (``request.userInfo``, ``object``, ``oldObject`` null on create; a
null nullable field absent, as ``k8s.io/apiserver/pkg/cel/common/values.go`` reads it),
with ``authorizer`` a test object answering ``group/resource/name/check/allowed`` from a
small RBAC table through the test API server's RBAC evaluation (``rbac_authorize``).

Accepted: a request naming its creator with the verb granted, a return and a resolution
by whoever holds their verbs, the operator's own label write. Refused, each with its
message: ``requestedBy`` of someone else, groups not the requester's, an intent not granted
("allow reboot, deny shutdown" as an ordinary role), a spec edited after creation, an
abandon naming someone else, a resolution without the verb.

What cel-python is not: Kubernetes' cel-go with its type checker and cost limits. The
expressions use only what both have (``has``, ``all``, ``filter``, ``map``, ``in``, the
ternary), plus ``join`` of cel-go's strings extension, which Kubernetes enables and is
registered here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError
from click.testing import CliRunner

from powerplane_kubernetes.operator import admission as adm
from powerplane_kubernetes.testing.apiserver import RBAC_KINDS, rbac_authorize

OPERATOR = "system:serviceaccount:powerplane-system:powerplane-operator"
AUTHENTICATED = "system:authenticated"


# -- the policy, as printed ------------------------------------------------------------------
@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from powerplane_kubernetes.operator.cli import operator_group

    here = tmp_path_factory.mktemp("manifests")
    result = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops"],
                                env={"POWERPLANE_CONFIG": str(here / "absent.yaml")})
    if result.exit_code != 0:  # no deployment file where it is named: the plain manifests
        result = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    # three policies are printed (issue 36): the requester's is the one about spec and requests
    [found] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"
               and d["metadata"]["name"] == adm.admission_name()]
    [bound] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"
               and d["metadata"]["name"] == adm.admission_name()]
    assert bound["spec"] == {"policyName": found["metadata"]["name"],
                             "validationActions": ["Deny"]}
    out: dict[str, Any] = found
    return out


# -- the authorizer: a small RBAC table through the server's RBAC evaluation ---------------
def cluster_role(name: str, *verbs: str) -> dict[str, Any]:
    return {"kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": ["powerplane.io"], "resources": ["servers"],
                       "verbs": list(verbs)}]}


def crb(name: str, role: str, kind: str, subject: str) -> dict[str, Any]:
    return {"kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"kind": "ClusterRole", "name": role},
            "subjects": [{"kind": kind, "name": subject}]}


RBAC = [
    # the executor: it may create dispatch ledger entries (the operator's ClusterRole)
    {"kind": "ClusterRole", "metadata": {"name": "executor"},
     "rules": [{"apiGroups": ["powerplane.io"], "resources": ["maintenancedispatches"],
                "verbs": ["create"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "operator"},
     "roleRef": {"kind": "ClusterRole", "name": "executor"},
     "subjects": [{"kind": "ServiceAccount", "name": "powerplane-operator",
                   "namespace": "powerplane-system"}]},
    # "allow reboot, deny shutdown": an ordinary role granting reboot and nothing else
    cluster_role("rebooter", "reboot", "uncordon"), crb("alice", "rebooter", "User", "alice"),
    cluster_role("engineer", "cordon", "uncordon"), crb("eng", "engineer", "Group", "eng"),
    cluster_role("resolver", "maintenance-resolve", "maintenance-abandon"),
    crb("carol", "resolver", "User", "carol"),
    # a RoleBinding grants nothing on the cluster-scoped servers
    {"kind": "RoleBinding", "metadata": {"name": "bob", "namespace": "ops"},
     "roleRef": {"kind": "ClusterRole", "name": "resolver"},
     "subjects": [{"kind": "User", "name": "bob"}]},
]


@dataclass(frozen=True)
class Check:
    """``authorizer.group(g).resource(r).name(n).check(v)`` as it is built."""

    parts: tuple[tuple[str, str], ...] = ()

    def add(self, key: str, value: Any) -> Check:
        return Check((*self.parts, (key, str(value))))


@dataclass
class Authorizer:
    """The ``authorizer`` variable for one request's user."""

    user: str
    groups: list[str]
    asked: list[dict[str, str]] = field(default_factory=list)

    def allowed(self, check: Check) -> bool:
        attrs = dict(check.parts)
        self.asked.append(attrs)
        table: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RBAC_KINDS}
        for doc in RBAC:
            table[doc["kind"]].append(doc)
        ok, _ = rbac_authorize(self.user, self.groups, table, resource={
            "group": attrs.get("group", ""), "resource": attrs.get("resource", ""),
            "name": attrs.get("name", ""), "verb": attrs.get("verb", ""), "namespace": ""})
        return ok


def _functions(authz: Authorizer) -> dict[str, Any]:
    def chain(key: str) -> Any:
        def step(target: Any, value: Any) -> Check:
            base = Check() if isinstance(target, Authorizer) else target
            return base.add(key, value)
        return step

    def allowed(target: Check) -> celtypes.BoolType:
        return celtypes.BoolType(authz.allowed(target))

    def join(items: Any, sep: Any) -> celtypes.StringType:
        return celtypes.StringType(str(sep).join(str(x) for x in items))

    return {"group": chain("group"), "resource": chain("resource"), "name": chain("name"),
            "check": chain("verb"), "allowed": allowed, "join": join}


# -- admission requests, as the API server builds them ---------------------------------------
def without_nulls(value: Any) -> Any:
    """A null nullable field of an object reads as absent (values.go ``Find``)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@dataclass
class Verdict:
    allowed: bool
    messages: list[str]
    authorizer: Authorizer


def admit(policy: dict[str, Any], operation: str, user: str, groups: list[str],
          obj: dict[str, Any], old: dict[str, Any] | None = None) -> Verdict:
    env = celpy.Environment()
    authz = Authorizer(user, groups)
    activation: dict[str, Any] = {
        "request": json_to_cel({
            "operation": operation, "userInfo": {"username": user, "groups": groups},
            "resource": {"group": "powerplane.io", "version": "v1alpha1",
                         "resource": "nodemaintenances"},
            "name": obj["metadata"]["name"]}),
        "object": json_to_cel(without_nulls(obj)),
        "oldObject": json_to_cel(None if old is None else without_nulls(old)),
        "authorizer": authz,
    }
    messages: list[str] = []
    name = policy["metadata"]["name"]
    for rule in policy["spec"]["validations"]:
        prog = env.program(env.compile(rule["expression"]), functions=_functions(authz))
        result: Any
        try:
            result = prog.evaluate(activation)
        except CELEvalError as exc:
            result = exc
        if isinstance(result, celtypes.BoolType) and bool(result):
            continue
        if not isinstance(result, celtypes.BoolType):  # an error: failurePolicy Fail
            messages.append(f"expression {rule['expression'][:60]!r} failed: {result!r}")
            continue
        text = rule["message"]
        if "messageExpression" in rule:
            said = env.program(env.compile(rule["messageExpression"]),
                               functions=_functions(authz))
            try:
                text = str(said.evaluate(activation))
            except CELEvalError:
                pass  # the API server falls back to message
        messages.append(f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied "
                        f"request: {text}")
    return Verdict(not messages, messages, authz)


def maintenance(node: str = "n1", intent: str = "reboot", by: str = "alice",
                groups: list[str] | None = None) -> dict[str, Any]:
    """A NodeMaintenance as the store writes it (null optional fields, empty requests)."""
    return {
        "apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": f"{node}-{intent}-1", "labels": {"powerplane.io/active": "true"}},
        "spec": {"node": node, "intent": intent, "reason": "replace the PSU",
                 "requestedBy": by,
                 "requesterGroups": groups if groups is not None else [AUTHENTICATED],
                 "requestedVia": "kubernetes", "onBehalfOf": None,
                 "preflight": {"pods": [], "pdbs": [], "quorum": None, "hazard": False,
                               "power": {}, "storage": "", "takenAt": "2025-01-01T12:00:00Z"},
                 "ackPreflight": True, "confirmNode": node, "hazardReason": None},
        "requests": {"returnRequest": None, "abandon": None, "resolutions": []},
    }


def changed(obj: dict[str, Any], **requests: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["requests"].update(requests)
    return out


def entry(actor: str, **extra: Any) -> dict[str, Any]:
    return {"actor": actor, "reason": "checked at the rack", "at": "2025-01-01T13:00:00Z",
            **extra}


def only(verdict: Verdict) -> str:
    assert not verdict.allowed
    [message] = verdict.messages
    return message


# -- accepted ----------------------------------------------------------------------------------
def test_a_request_naming_its_creator_with_the_verb_granted_is_admitted(
        policy: dict[str, Any]) -> None:
    verdict = admit(policy, "CREATE", "alice", ["eng-night", AUTHENTICATED],
                    maintenance(groups=[AUTHENTICATED, "eng-night"]))  # a set: any order
    assert verdict.allowed, verdict.messages
    # (cel-python evaluates both sides of ||, so the other verbs are asked too, unused)
    assert {"group": "powerplane.io", "resource": "servers", "name": "n1",
            "verb": "reboot"} in verdict.authorizer.asked


def test_a_request_that_records_no_groups_is_checked_on_the_rest(
        policy: dict[str, Any]) -> None:
    obj = maintenance()
    del obj["spec"]["requesterGroups"]
    assert admit(policy, "CREATE", "alice", [AUTHENTICATED], obj).allowed


def test_a_group_grant_admits_a_cordon(policy: dict[str, Any]) -> None:
    groups = ["eng", AUTHENTICATED]
    assert admit(policy, "CREATE", "dave", groups,
                 maintenance(intent="cordon", by="dave", groups=groups)).allowed


def test_a_return_and_a_resolution_by_those_who_hold_their_verbs(
        policy: dict[str, Any]) -> None:
    old = maintenance()
    returned = changed(old, returnRequest=entry("alice", machineConfirmed=True))
    assert admit(policy, "UPDATE", "alice", [AUTHENTICATED], returned, old).allowed
    resolved = changed(returned, resolutions=[entry("carol", applied=True, attemptId="a1")])
    assert admit(policy, "UPDATE", "carol", [AUTHENTICATED], resolved, returned).allowed
    # entries already there are not asked again: alice adds nothing and changes nothing
    relabelled = copy.deepcopy(resolved)
    relabelled["metadata"]["labels"]["x"] = "y"
    assert admit(policy, "UPDATE", "alice", [AUTHENTICATED], relabelled, resolved).allowed


def test_the_operators_label_write_needs_no_exemption(policy: dict[str, Any]) -> None:
    old = changed(maintenance(), abandon=entry("carol"))
    done = copy.deepcopy(old)
    done["metadata"]["labels"]["powerplane.io/active"] = "false"
    done["status"] = {"phase": "Complete"}  # never sent on the main resource; ignored there
    verdict = admit(policy, "UPDATE", OPERATOR,
                    ["system:serviceaccounts", "system:serviceaccounts:powerplane-system",
                     AUTHENTICATED], done, old)
    # the operator holds no servers verb at all: nothing new was added, nothing is needed
    # of the requests; the powerplane.io label is the executor's, and the authorizer says
    # it is one (it may create dispatch ledger entries), no name is exempt
    assert verdict.allowed, verdict.messages


FINALIZER = "powerplane.io/abandon-on-delete"


def with_meta(obj: dict[str, Any], *, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None,
              finalizers: list[str] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if labels is not None:
        out["metadata"]["labels"] = labels
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    if finalizers is not None:
        out["metadata"]["finalizers"] = finalizers
    return out


def test_powerplane_labels_annotations_and_the_finalizer_are_the_executors(
        policy: dict[str, Any]) -> None:
    """Issue 36: a requester may not hide another's maintenance (its ``active`` label), mark
    it superseded or its lock taken, or take away the finalizer that makes its deletion an
    abandon; the executor may, and the creator of a request not admitted yet may take the
    finalizer off its own (nothing was done: its deletion goes at once)."""
    old = with_meta(maintenance(), annotations={"powerplane.io/created-at": "2025-01-01"},
                    finalizers=[FINALIZER])
    old["status"] = {"phase": "Cordoned"}
    operator_groups = ["system:serviceaccounts", AUTHENTICATED]
    hidden = with_meta(old, labels={"powerplane.io/active": "false"})
    message = only(admit(policy, "UPDATE", "carol", [AUTHENTICATED], hidden, old))
    assert message.endswith("only the executor changes the powerplane.io/* labels of "
                            "n1-reboot-1 (they steer the executor: which maintenances are "
                            "active, which request lost its node): carol may not create "
                            "maintenancedispatches.powerplane.io")
    assert admit(policy, "UPDATE", OPERATOR, operator_groups, hidden, old).allowed
    for marks in ({"powerplane.io/created-at": "2025-01-01",
                   "powerplane.io/superseded-by": "mine"},
                  {"powerplane.io/created-at": "2025-01-01",
                   "powerplane.io/lock-taken-by": "mine"},
                  {}):
        marked = with_meta(old, annotations=marks)
        message = only(admit(policy, "UPDATE", "alice", [AUTHENTICATED], marked, old))
        assert "only the executor changes the powerplane.io/* annotations" in message, marks
        assert admit(policy, "UPDATE", OPERATOR, operator_groups, marked, old).allowed
    # anyone's own labels and annotations outside powerplane.io/ are theirs
    theirs = with_meta(old, labels={"powerplane.io/active": "true", "team": "night"},
                       annotations={"powerplane.io/created-at": "2025-01-01", "note": "x"})
    assert admit(policy, "UPDATE", "carol", [AUTHENTICATED], theirs, old).allowed
    unfinalized = with_meta(old, finalizers=["example.com/keep"])
    for who in ("alice", "carol"):  # alice made it, but it was admitted: it is not hers
        message = only(admit(policy, "UPDATE", who, [AUTHENTICATED], unfinalized, old))
        assert message.endswith(f"the finalizer {FINALIZER} makes deleting n1-reboot-1 an "
                                "abandon: only the executor removes it (once the abandon "
                                "ran), or the creator of a request not admitted yet; "
                                f"{who} is neither")
    assert admit(policy, "UPDATE", OPERATOR, operator_groups, unfinalized, old).allowed
    pending = {k: v for k, v in old.items() if k != "status"}
    taken_back = {k: v for k, v in unfinalized.items() if k != "status"}
    assert admit(policy, "UPDATE", "alice", [AUTHENTICATED], taken_back, pending).allowed
    assert not admit(policy, "UPDATE", "carol", [AUTHENTICATED], taken_back, pending).allowed


def test_the_policy_does_not_match_the_status_subresource(policy: dict[str, Any]) -> None:
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["nodemaintenances"]  # '*' or 'x/*' would take subresources
    # DELETE too since issue 36: a deletion abandons, so the deleter must hold the verb
    assert rule["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert policy["spec"]["failurePolicy"] == "Fail"


# -- refused, each with its message ------------------------------------------------------------
def test_requested_by_someone_else_is_refused(policy: dict[str, Any]) -> None:
    groups = ["eng", AUTHENTICATED]  # dave may cordon n1, but writes alice's name
    message = only(admit(policy, "CREATE", "dave", groups,
                         maintenance(intent="cordon", by="alice", groups=groups)))
    assert message.endswith("denied request: spec.requestedBy must name the user who "
                            "creates the NodeMaintenance: it says alice, but the request "
                            "comes from dave")


@pytest.mark.parametrize("recorded", [["eng", AUTHENTICATED], []])
def test_groups_not_the_requesters_are_refused(policy: dict[str, Any],
                                                recorded: list[str]) -> None:
    message = only(admit(policy, "CREATE", "alice", [AUTHENTICATED],
                         maintenance(groups=recorded)))
    assert ("spec.requesterGroups must be exactly the groups the API server authenticated "
            "alice in (system:authenticated), system:authenticated included; it says ("
            + ", ".join(recorded) + ")") in message


def test_an_intent_not_granted_is_refused(policy: dict[str, Any]) -> None:
    message = only(admit(policy, "CREATE", "alice", [AUTHENTICATED],
                         maintenance(intent="shutdown")))
    assert message.endswith("user alice may not shutdown node n1: no RBAC rule grants the "
                            "verb shutdown on servers.powerplane.io named n1")
    # bob's grant is a RoleBinding in a namespace: nothing on the cluster-scoped servers
    assert not admit(policy, "CREATE", "bob", [AUTHENTICATED],
                     maintenance(by="bob")).allowed


def test_a_spec_edited_after_creation_is_refused(policy: dict[str, Any]) -> None:
    old = maintenance()
    for edit in ({"reason": "something else"}, {"onBehalfOf": "the night shift"},
                 {"preflight": {**old["spec"]["preflight"], "hazard": True}}):
        new = copy.deepcopy(old)
        new["spec"].update(edit)
        message = only(admit(policy, "UPDATE", "alice", [AUTHENTICATED], new, old))
        assert message.endswith("spec cannot change after the NodeMaintenance is created: "
                                "it is the request as alice made it; a return, an abandon "
                                "or a resolution goes under requests"), edit
    # a null field written again as null (or left out) is no change
    same = copy.deepcopy(old)
    del same["spec"]["hazardReason"]
    assert admit(policy, "UPDATE", "alice", [AUTHENTICATED], same, old).allowed


def test_an_abandon_naming_someone_else_is_refused(policy: dict[str, Any]) -> None:
    old = maintenance()
    message = only(admit(policy, "UPDATE", "carol", [AUTHENTICATED],
                         changed(old, abandon=entry("alice")), old))
    assert message.endswith("requests.abandon.actor must name the user who abandons the "
                            "maintenance (carol), not alice")


def test_a_resolution_without_the_verb_is_refused(policy: dict[str, Any]) -> None:
    old = maintenance()
    new = changed(old, resolutions=[entry("alice", applied=False, attemptId="a1")])
    message = only(admit(policy, "UPDATE", "alice", [AUTHENTICATED], new, old))
    assert message.endswith("user alice may not resolve a dispatch of node n1: no RBAC rule "
                            "grants the verb maintenance-resolve on servers.powerplane.io "
                            "named n1")


def test_a_resolution_naming_someone_else_is_refused(policy: dict[str, Any]) -> None:
    old = changed(maintenance(), resolutions=[entry("carol", applied=True, attemptId="a1")])
    new = changed(old, resolutions=[*old["requests"]["resolutions"],
                                    entry("alice", applied=False, attemptId="a2")])
    message = only(admit(policy, "UPDATE", "carol", [AUTHENTICATED], new, old))
    assert message.endswith("every new requests.resolutions entry must name the user who "
                            "adds it (carol), not alice")


def test_a_return_without_uncordon_or_by_another_name_is_refused(
        policy: dict[str, Any]) -> None:
    old = maintenance()
    verdict = admit(policy, "UPDATE", "carol", [AUTHENTICATED],
                    changed(old, returnRequest=entry("alice")), old)
    assert len(verdict.messages) == 2
    assert verdict.messages[0].endswith("requests.returnRequest.actor must name the user "
                                        "who asks for the return (carol), not alice")
    assert verdict.messages[1].endswith("user carol may not return node n1 to service: no "
                                        "RBAC rule grants the verb uncordon on "
                                        "servers.powerplane.io named n1")


def test_every_validation_has_a_message_and_a_reason(policy: dict[str, Any]) -> None:
    for rule in policy["spec"]["validations"]:
        assert rule["message"] and rule["messageExpression"]
        assert rule["reason"] in ("Forbidden", "Invalid")


def _paths(value: Any, at: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, f"{at}.{k}" if at else k)
    else:
        yield at


def test_the_policy_is_what_the_manifests_print(policy: dict[str, Any],
                                                tmp_path: Path) -> None:
    assert policy == adm.admission_policy()
    assert set(_paths(policy["spec"])) >= {"failurePolicy", "validations"}
