"""The test API server's CEL (``testing/apiserver/cel.py``: cel-python's parser and
functions, compiled once into closures) against cel-python's own interpreter: every
expression and message expression of ``operator manifests``' admission policy, over the
admission requests ``test_admission_policy`` accepts and refuses, gives the same value
both ways. And the semantics the compiled form keeps where the interpreter differs from
cel-go (short-circuit logic, ``has`` of an error, null fields absent), the Kubernetes
extensions it adds, and what it refuses to compile.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import celpy
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError
from test_admission_policy import (
    AUTHENTICATED,
    OPERATOR,
    RBAC,
    Authorizer,
    _functions,
    changed,
    entry,
    maintenance,
    without_nulls,
)

from powerplane_kubernetes.operator import admission as adm
from powerplane_kubernetes.testing.apiserver import RBAC_KINDS, rbac_authorize
from powerplane_kubernetes.testing.apiserver import policies as p
from powerplane_kubernetes.testing.apiserver.cel import (
    CelUnsupported,
    compile_cel,
    to_cel,
)

Scenario = tuple[str, str, list[str], dict[str, Any], dict[str, Any] | None]


def scenarios() -> dict[str, Scenario]:
    """(operation, user, groups, object, old object): accepted and refused requests."""
    old = maintenance()
    returned = changed(old, returnRequest=entry("alice", machineConfirmed=True))
    resolved = changed(returned, resolutions=[entry("carol", applied=True, attemptId="a1")])
    labelled = copy.deepcopy(old)
    labelled["metadata"]["labels"]["powerplane.io/active"] = "false"
    edited = copy.deepcopy(old)
    edited["spec"]["reason"] = "something else"
    bare = copy.deepcopy(old)
    del bare["spec"]["requesterGroups"], bare["requests"]
    sa = ["system:serviceaccounts", "system:serviceaccounts:powerplane-system", AUTHENTICATED]
    admitted = copy.deepcopy(old)
    admitted["metadata"]["finalizers"] = ["powerplane.io/abandon-on-delete"]
    admitted["metadata"]["annotations"] = {"powerplane.io/created-at": "2025-01-01"}
    admitted["status"] = {"phase": "Cordoned"}
    hidden = copy.deepcopy(admitted)
    hidden["metadata"]["labels"]["powerplane.io/active"] = "false"
    marked = copy.deepcopy(admitted)
    marked["metadata"]["annotations"]["powerplane.io/superseded-by"] = "mine"
    unfinalized = copy.deepcopy(admitted)
    unfinalized["metadata"]["finalizers"] = []
    pending = {k: v for k, v in admitted.items() if k != "status"}
    taken_back = {k: v for k, v in unfinalized.items() if k != "status"}
    return {
        "label by a requester": ("UPDATE", "carol", [AUTHENTICATED], hidden, admitted),
        "annotation by a requester": ("UPDATE", "carol", [AUTHENTICATED], marked, admitted),
        "finalizer removed by a requester": ("UPDATE", "alice", [AUTHENTICATED],
                                             unfinalized, admitted),
        "finalizer removed by the executor": ("UPDATE", OPERATOR, sa, unfinalized,
                                              admitted),
        "finalizer taken back by its creator": ("UPDATE", "alice", [AUTHENTICATED],
                                                taken_back, pending),
        "create": ("CREATE", "alice", [AUTHENTICATED], maintenance(), None),
        "create by hand": ("CREATE", "alice", [AUTHENTICATED], bare, None),
        "create of a group grant": ("CREATE", "dave", ["eng", AUTHENTICATED], maintenance(
            intent="cordon", by="dave", groups=["eng", AUTHENTICATED]), None),
        "create for someone else": ("CREATE", "dave", ["eng", AUTHENTICATED],
                                    maintenance(intent="cordon", groups=["eng"]), None),
        "create with other groups": ("CREATE", "alice", [AUTHENTICATED],
                                     maintenance(groups=["eng"]), None),
        "create not granted": ("CREATE", "alice", [AUTHENTICATED],
                               maintenance(intent="shutdown"), None),
        "return": ("UPDATE", "alice", [AUTHENTICATED], returned, old),
        "resolution": ("UPDATE", "carol", [AUTHENTICATED], resolved, returned),
        "label by the operator": ("UPDATE", OPERATOR, sa, labelled, old),
        "spec edited": ("UPDATE", "alice", [AUTHENTICATED], edited, old),
        "abandon for someone else": ("UPDATE", "carol", [AUTHENTICATED],
                                     changed(old, abandon=entry("alice")), old),
        "return by someone else": ("UPDATE", "carol", [AUTHENTICATED],
                                   changed(old, returnRequest=entry("alice")), old),
        "resolution not granted": ("UPDATE", "alice", [AUTHENTICATED], changed(
            old, resolutions=[entry("alice", applied=False, attemptId="a1")]), old),
    }


def interpreted(text: str, scenario: Scenario) -> Any:
    """``text`` by cel-python's interpreter, as ``test_admission_policy`` runs it."""
    operation, user, groups, obj, old = scenario
    authz = Authorizer(user, groups)
    env = celpy.Environment()
    activation = {
        "request": json_to_cel({"operation": operation,
                                "userInfo": {"username": user, "groups": groups}}),
        "object": json_to_cel(without_nulls(obj)),
        "oldObject": json_to_cel(None if old is None else without_nulls(old)),
        "authorizer": authz}
    try:
        return env.program(env.compile(text), functions=_functions(authz)).evaluate(activation)
    except CELEvalError as exc:
        return exc


def compiled(text: str, scenario: Scenario) -> Any:
    """``text`` as the test API server evaluates it, with the same RBAC table."""
    operation, user, groups, obj, old = scenario
    table: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RBAC_KINDS}
    for doc in RBAC:
        table[doc["kind"]].append(doc)

    def decide(attrs: Any, path: str) -> tuple[bool, str]:
        return rbac_authorize(user, groups, table, resource=attrs.as_review())

    def for_user(u: str, g: tuple[str, ...]) -> Callable[[Any, str], tuple[bool, str]]:
        return decide

    req = p.AdmissionRequest(operation, "powerplane.io", "v1alpha1", "nodemaintenances", "",
                             "NodeMaintenance", "", obj["metadata"]["name"], user,
                             tuple(groups), copy.deepcopy(obj), copy.deepcopy(old), False)
    env = p.environment(req, p.Authorizer(for_user, user, tuple(groups), req), {})
    return compile_cel(text, p.ROOTS, p.FUNCTIONS).evaluate(env)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, CELEvalError) or isinstance(b, CELEvalError):
        return isinstance(a, CELEvalError) and isinstance(b, CELEvalError)
    if isinstance(a, str) and isinstance(b, str):  # cel-python's + answers a plain str
        return str(a) == str(b)
    return bool(a == b) and type(a) is type(b)


@pytest.mark.parametrize("name", list(scenarios()))
def test_every_expression_of_the_policy_agrees_with_cel_python(name: str) -> None:
    scenario = scenarios()[name]
    for rule in adm.admission_policy()["spec"]["validations"]:
        ours, theirs = compiled(rule["expression"], scenario), interpreted(
            rule["expression"], scenario)
        assert isinstance(ours, celtypes.BoolType), (rule["expression"][:80], ours)
        assert same(ours, theirs), (rule["expression"][:80], ours, theirs)
        if not ours:  # refused: its message, both ways
            text = rule["messageExpression"]
            said = compiled(text, scenario)
            assert isinstance(said, str) and same(said, interpreted(text, scenario)), said


def test_the_scenarios_are_accepted_and_refused_as_test_admission_policy_says() -> None:
    verdicts = {name: all(compiled(r["expression"], s)
                          for r in adm.admission_policy()["spec"]["validations"])
                for name, s in scenarios().items()}
    assert {n for n, ok in verdicts.items() if ok} == {
        "create", "create by hand", "create of a group grant", "return", "resolution",
        "label by the operator", "finalizer removed by the executor",
        "finalizer taken back by its creator"}


# -- the semantics kept where cel-python's interpreter is not cel-go -------------------------
def run(text: str, **variables: Any) -> Any:
    return compile_cel(text, set(variables)).evaluate(dict(variables))


def test_logic_short_circuits_and_absorbs_errors_as_the_spec_says() -> None:
    missing = {"a": 1}
    assert run("true || x.nope", x=missing) is not None
    assert bool(run("true || x.nope", x=missing)) is True
    assert bool(run("x.nope || true", x=missing)) is True  # commutative
    assert bool(run("false && x.nope", x=missing)) is False
    assert isinstance(run("false || x.nope", x=missing), CELEvalError)
    assert isinstance(run("x.nope ? 1 : 2", x=missing), CELEvalError)
    assert run("x.a == 1 ? 'one' : x.nope", x=missing) == "one"


def test_a_null_field_is_absent_and_has_of_an_error_is_an_error() -> None:
    obj = {"spec": {"hazardReason": None, "node": "n1"}}
    assert bool(run("has(o.spec.node) && !has(o.spec.hazardReason)", o=obj)) is True
    assert isinstance(run("o.spec.hazardReason", o=obj), CELEvalError)
    assert isinstance(run("has(o.missing.field)", o=obj), CELEvalError)


def test_macros_and_the_kubernetes_string_functions() -> None:
    groups = ["b", "a", "system:authenticated"]
    assert run("g.all(x, x != '')", g=groups) is not None
    assert bool(run("g.exists(x, x == 'a') && !g.exists_one(x, x.size() > 0)", g=groups))
    assert run("g.filter(x, x != 'b').map(x, x.upperAscii()).join(', ')", g=groups) == \
        "A, SYSTEM:AUTHENTICATED"
    assert run("'a,b'.split(',')", g=groups) == ["a", "b"]
    assert run("[1, 2, 3].map(x, x > 1, x * 10)", g=groups) == [20, 30]
    assert run("{'k': 'v'}['k'] + string(1)", g=groups) == "v1"
    assert run("string(1 < 2)", g=groups) == "true"  # cel-go's word (cel-python: True)


def test_what_cannot_be_evaluated_as_kubernetes_would_is_refused_at_compile() -> None:
    for text, why in (("object.spec.nodeName.", "compilation failed"),
                      ("undeclared == 1", "undeclared reference to 'undeclared'"),
                      ("object.frobnicate()", "undeclared reference to function"),
                      ("Foo{a: 1}", "not supported")):
        with pytest.raises(CelUnsupported, match=why):
            compile_cel(text, p.ROOTS, p.FUNCTIONS)


def test_to_cel_reads_a_null_field_as_absent() -> None:
    assert to_cel({"a": None, "b": [1, "x", True, 1.5]}) == {"b": [1, "x", True, 1.5]}
