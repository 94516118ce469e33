"""The test API server evaluates the ValidatingAdmissionPolicies stored in it, as a real one
does: ``operator manifests``' policy binds each request to its requester (a denial in the
API server's words and code), never sees the status subresource, and passes the operator's
label write (the executor's, issue 36); a policy written for ``nodemaintenances/status``
sees status writes only, with ``request.subResource``; ``matchConditions``, ``variables``,
``messageExpression``, the ``authorizer``, ``DELETE``, the binding's ``validationActions``
and ``matchResources``; what cannot be evaluated is refused when it is stored, and an
expression that fails at evaluation fails the request closed and the test loudly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.operator.admission import policies
from powerplane_kubernetes.testing.apiserver import ADMISSION_KINDS, MAINTENANCES, KubeApiServer

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
OPERATOR = "system:serviceaccount:ops:powerplane-operator"
DENIED = ("ValidatingAdmissionPolicy 'powerplane-requester' with binding "
          "'powerplane-requester' denied request: ")


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:  # the manifests' policy and binding stored
        # people as printed: alice and dave request (powerplane-maintainer), alice may do
        # every servers verb (powerplane-admin), eve only cordon and uncordon (the engineer)
        for person in ("alice", "dave", "eve"):
            server.grant(person, m.maintainer_role())
        server.grant("alice", m.people_roles()[0])
        server.grant("eve", m.people_roles()[2])
        server.grant(OPERATOR, m.cluster_role())
        yield server


def client(api: KubeApiServer, user: str | None = None) -> httpx2.Client:
    token = api.admin_token if user is None else api.issue_token(user)
    return httpx2.Client(base_url=api.url, timeout=10,
                         headers={"Authorization": f"Bearer {token}"})


def maintenance(name: str = "m1", *, by: str = "alice", intent: str = "reboot",
                **labels: str) -> dict[str, Any]:
    return {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"node": "n1", "intent": intent, "reason": "replace the PSU",
                     "requestedBy": by}}


def stored(api: KubeApiServer, name: str = "m1") -> dict[str, Any]:
    found = api.object(MAINTENANCES, None, name)
    assert found is not None
    return found


def refusal(answer: httpx2.Response, code: int, reason: str) -> str:
    assert answer.status_code == code, answer.text
    body = answer.json()
    assert body["reason"] == reason and body["code"] == code
    message: str = body["message"]
    assert body["details"]["causes"] == [{"message": message.split(" is forbidden: ", 1)[1]}]
    return message


# -- operator manifests' policy --------------------------------------------------------------
def test_a_request_is_bound_to_the_user_who_makes_it(api: KubeApiServer) -> None:
    with client(api, "dave") as c:
        message = refusal(c.post(NM, json=maintenance()), 403, "Forbidden")
    assert message == ('nodemaintenances.powerplane.io "m1" is forbidden: ' + DENIED +
                       "spec.requestedBy must name the user who creates the NodeMaintenance: "
                       "it says alice, but the request comes from dave")
    with client(api, "eve") as c:  # her own name, but reboot is not hers to ask
        message = refusal(c.post(NM, json=maintenance(by="eve")), 403, "Forbidden")
    assert message.endswith("user eve may not reboot node n1: no RBAC rule grants the verb "
                            "reboot on servers.powerplane.io named n1")
    with client(api, "eve") as c:
        assert c.post(NM, json=maintenance(by="eve", intent="cordon")).status_code == 201
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance("m2")).status_code == 201


def test_updates_name_their_actor_and_the_operator_needs_no_exemption(
        api: KubeApiServer) -> None:
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance()).status_code == 201
    body = stored(api)
    body["requests"] = {"returnRequest": {"actor": "bob", "reason": "done",
                                          "at": "2025-01-01T13:00:00Z"}}
    with client(api, "alice") as c:
        message = refusal(c.put(f"{NM}/m1", json=body), 403, "Forbidden")
    assert message.endswith("requests.returnRequest.actor must name the user who asks for "
                            "the return (alice), not bob")
    # the operator holds no servers verb: its status and label writes pass
    with client(api, OPERATOR) as c:
        now = stored(api)
        status = c.put(f"{NM}/m1/status", json={**now, "status": {"phase": "Cordoned"}})
        assert status.status_code == 200, status.text
        now = stored(api)
        now["metadata"]["labels"] = {"powerplane.io/active": "false"}
        assert c.put(f"{NM}/m1", json=now).status_code == 200
    assert api.cel_errors == []


# -- a policy on the status subresource ------------------------------------------------------
def policy(name: str, resources: list[str], validations: list[dict[str, Any]],
           operations: tuple[str, ...] = ("UPDATE",), **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
                "apiGroups": ["powerplane.io"], "apiVersions": ["v1alpha1"],
                "operations": list(operations), "resources": resources}]},
                "validations": validations, **spec}}


def binding(name: str, actions: tuple[str, ...] = ("Deny",), **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": list(actions), **spec}}


@pytest.fixture
def bare() -> Iterator[KubeApiServer]:
    """A server without ``operator manifests``' policies (its executor policy matches the
    status subresource too), with the same grants as :func:`api`."""
    with KubeApiServer(admission=False) as server:
        for person in ("alice", "dave", "eve"):
            server.grant(person, m.maintainer_role())
        server.grant("alice", m.people_roles()[0])
        server.grant("eve", m.people_roles()[2])
        server.grant(OPERATOR, m.cluster_role())
        yield server


def test_a_policy_sees_status_only_where_a_rule_names_it(bare: KubeApiServer) -> None:
    api = bare
    only_operator = {
        "expression": f"request.subResource == 'status' && "
                      f"request.userInfo.username == '{OPERATOR}'",
        "messageExpression": "request.userInfo.username + ' may not write ' + "
                             "request.resource.resource + '/' + request.subResource",
        "reason": "Forbidden"}
    api.add_rbac(policy("status-writer", ["nodemaintenances/status"], [only_operator]),
                 binding("status-writer"))
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance()).status_code == 201
        labelled = stored(api)
        labelled["metadata"]["labels"] = {"x": "y"}
        assert c.put(f"{NM}/m1", json=labelled).status_code == 200  # not status: not seen
    api.grant("alice", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": "status-patcher"}, "rules": [{
                            "apiGroups": ["powerplane.io"],
                            "resources": ["nodemaintenances/status"], "verbs": ["patch"]}]})
    with client(api, "alice") as c:  # RBAC lets alice patch status; the policy does not
        message = refusal(c.patch(f"{NM}/m1/status", json={"status": {"phase": "Complete"}},
                                  headers={"Content-Type": "application/merge-patch+json"}),
                          403, "Forbidden")
    assert message.endswith("denied request: alice may not write nodemaintenances/status")
    with client(api, OPERATOR) as c:
        assert c.put(f"{NM}/m1/status", json={**stored(api), "status": {
            "phase": "Cordoned"}}).status_code == 200


def test_conditions_variables_messages_and_the_authorizer(api: KubeApiServer) -> None:
    check = policy(
        "reasons", ["nodemaintenances"], [
            {"expression": "variables.long", "message": "the reason is short"},
            {"expression": "authorizer.group('powerplane.io').resource('servers')"
                           ".name(object.spec.node).check('reboot').allowed()",
             "messageExpression": "'no: ' + string(authorizer.requestResource"
                                  ".check('patch').allowed())"}],
        operations=("CREATE",),
        matchConditions=[{"name": "labelled", "expression":
                          "has(object.metadata.labels) && 'strict' in object.metadata.labels"}],
        variables=[{"name": "long", "expression": "object.spec.reason.size() > 20"}])
    api.add_rbac(check, binding("reasons"))
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance("loose")).status_code == 201  # not matched
        message = refusal(c.post(NM, json=maintenance("m1", strict="1")), 422, "Invalid")
    assert message.endswith("denied request: the reason is short")
    api.grant("dave", m.people_roles()[2])  # cordon only: not reboot
    with client(api, "dave") as c:
        body = maintenance("m2", by="dave", intent="cordon", strict="1")
        body["spec"]["reason"] = "replace the power supply unit in slot two"
        message = refusal(c.post(NM, json=body), 422, "Invalid")
    # dave may not reboot n1; may dave patch nodemaintenances (the request's resource)? no
    assert message.endswith("denied request: no: false")


def test_a_delete_is_seen_with_its_old_object(api: KubeApiServer) -> None:
    keep = policy("keep-active", ["nodemaintenances"], [{
        "expression": "object == null && oldObject.metadata.labels['powerplane.io/active'] "
                      "!= 'true'", "message": "an active maintenance is abandoned, not "
                      "deleted", "reason": "Forbidden"}], operations=("DELETE",))
    api.add_rbac(keep, binding("keep-active"))
    with client(api, "alice") as c:
        body = maintenance(**{"powerplane.io/active": "true"})
        assert c.post(NM, json=body).status_code == 201
        message = refusal(c.delete(f"{NM}/m1"), 403, "Forbidden")
    assert message.endswith("an active maintenance is abandoned, not deleted")


def test_warn_and_audit_record_and_do_not_refuse(api: KubeApiServer) -> None:
    never = [{"expression": "false", "message": "never"}]
    api.add_rbac(policy("warned", ["nodemaintenances"], never, operations=("CREATE",)),
                 binding("warned", ("Warn", "Audit")))
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance()).status_code == 201
    assert api.warnings == ["Validation failed for ValidatingAdmissionPolicy 'warned' with "
                            "binding 'warned': never"]
    assert api.audited == ["ValidatingAdmissionPolicy 'warned' with binding 'warned' denied "
                           "request: never"]


def test_a_binding_s_match_resources_narrow_its_policy(api: KubeApiServer) -> None:
    never = [{"expression": "false", "message": "frozen"}]
    api.add_rbac(policy("frozen", ["nodemaintenances"], never, operations=("CREATE",)),
                 binding("frozen", matchResources={
                     "objectSelector": {"matchLabels": {"frozen": "yes"}},
                     "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                        "operations": ["*"], "resources": ["*"]}]}))
    with client(api, "alice") as c:
        assert c.post(NM, json=maintenance()).status_code == 201
        refusal(c.post(NM, json=maintenance("m2", frozen="yes")), 422, "Invalid")


# -- what cannot be evaluated ------------------------------------------------------------------
def test_what_cannot_be_evaluated_is_refused_when_stored(api: KubeApiServer) -> None:
    params = policy("params", ["nodemaintenances"], [{"expression": "true"}],
                    paramKind={"apiVersion": "v1", "kind": "ConfigMap"})
    with pytest.raises(ValueError, match="paramKind"):
        api.add_rbac(params)
    undeclared = policy("undeclared", ["nodemaintenances"], [{"expression": "variables.x"}])
    with pytest.raises(ValueError, match=r"undefined field 'variables\.x'"):
        api.add_rbac(undeclared)
    broken = policy("broken", ["nodemaintenances"], [{"expression": "object.spec.("}])
    with pytest.raises(ValueError, match=r"spec.validations\[0\].expression.*compilation"):
        api.add_rbac(broken)
    with client(api) as admin:
        answer = admin.post(POLICIES, json=broken)
    assert answer.status_code == 422
    assert answer.json()["message"].startswith(
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "broken" is invalid: '
        "spec.validations[0].expression")
    assert sorted(d["metadata"]["name"] for d in api.objects(
        ADMISSION_KINDS["ValidatingAdmissionPolicy"])) == sorted(
        d["metadata"]["name"] for d in policies() if d["kind"] == "ValidatingAdmissionPolicy")


def test_an_expression_that_fails_refuses_the_request_and_fails_the_test() -> None:
    failing = policy("failing", ["nodemaintenances"], [
        {"expression": "object.spec.notThere == 'x'", "message": "never said"}],
        operations=("CREATE",))
    api = KubeApiServer(admission=False).start()
    try:
        api.add_rbac(failing, binding("failing"))
        with client(api) as admin:
            message = refusal(admin.post(NM, json=maintenance()), 422, "Invalid")
        assert "denied request: expression 'object.spec.notThere == 'x'' resulted in " \
               "error: " in message
        assert api.object(MAINTENANCES, None, "m1") is None  # fails closed
    finally:
        with pytest.raises(AssertionError, match="failed to evaluate") as caught:
            api.stop()
    assert "object.spec.notThere" in str(caught.value)
    # a test that expects the error takes it, and the server stops quietly
    with KubeApiServer(admission=False) as quiet:
        quiet.add_rbac(failing, binding("failing"))
        with client(quiet) as admin:
            assert admin.post(NM, json=maintenance()).status_code == 422
        [error] = quiet.take_cel_errors()
        assert "resulted in error" in error
