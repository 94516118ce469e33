"""The test API server authenticates and authorizes every request as a real one does: a
token it never issued is 401, an identity without a grant is 403 in the API server's words,
the status subresource is a resource of its own for RBAC (every write shape: ``PUT``, merge
patch, JSON patch, server-side apply), impersonation needs ``impersonate``, the cluster
admin (``system:masters``) may do everything, and a grant taken away refuses the next
request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.apiserver import (
    ADMIN_USER,
    MAINTENANCES,
    RBAC_KINDS,
    KubeApiServer,
)

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    # no admission policy here: RBAC alone (test_apiserver_admission runs the policies)
    with KubeApiServer(admission=False) as server:
        yield server


def client(api: KubeApiServer, user: str | None = None, *groups: str,
           token: str | None = None, **headers: str) -> httpx2.Client:
    """An HTTP client of the API server as ``user`` (None: the cluster admin)."""
    if token is None:
        token = api.admin_token if user is None else api.issue_token(user, groups)
    return httpx2.Client(base_url=api.url, headers={"Authorization": f"Bearer {token}",
                                                    **headers}, timeout=10)


def role(name: str, *rules: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role" if namespace else "ClusterRole", "metadata": meta,
            "rules": list(rules)}


def rule(resources: list[str], verbs: list[str], group: str = "powerplane.io",
         **extra: Any) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs, **extra}


def maintenance(name: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": name, **extra},
            "spec": {"node": "n1", "intent": "cordon", "reason": "replace the PSU",
                     "requestedBy": "alice"}}


def stored(api: KubeApiServer, name: str = "m1") -> dict[str, Any]:
    found = api.object(MAINTENANCES, None, name)
    assert found is not None
    return found


def forbidden(answer: httpx2.Response) -> str:
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Forbidden", 403)
    message: str = body["message"]
    return message


# -- authentication -------------------------------------------------------------------------
def test_a_token_never_issued_is_401_and_no_token_is_anonymous(api: KubeApiServer) -> None:
    with client(api, token="not-a-token") as c:
        answer = c.get(NM)
    assert (answer.status_code, answer.json()["reason"]) == (401, "Unauthorized")
    with httpx2.Client(base_url=api.url) as c:
        message = forbidden(c.get(NM))
    assert message == ('nodemaintenances.powerplane.io is forbidden: User "system:anonymous" '
                       'cannot list resource "nodemaintenances" in API group "powerplane.io" '
                       "at the cluster scope")
    expired = api.issue_token("alice", expires_in=-1)
    with client(api, token=expired) as c:
        assert c.get(NM).status_code == 401


def test_the_cluster_admin_may_do_everything(api: KubeApiServer) -> None:
    with client(api) as c:
        assert c.post(NM, json=maintenance()).status_code == 201
        assert c.get("/api/v1/nodes").status_code == 200
        me = c.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    json={"kind": "SelfSubjectReview"}).json()
    assert me["status"]["userInfo"] == {
        "username": ADMIN_USER, "groups": ["system:masters", "system:authenticated"]}
    assert [r.user for r in api.requests] == [ADMIN_USER] * 3


def test_a_fresh_server_holds_the_bootstrap_roles(api: KubeApiServer) -> None:
    objects = api.rbac_objects()
    assert {r["metadata"]["name"] for r in objects["ClusterRole"]} >= {
        "cluster-admin", "system:basic-user", "system:discovery"}
    with client(api, "nobody") as c:  # every authenticated user may ask who it is
        answer = c.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        json={"kind": "SelfSubjectReview"})
        assert answer.status_code == 201
        assert c.get("/version").status_code == 200  # system:discovery
        message = forbidden(c.get("/api/v1/nodes/n1"))
    assert message == ('nodes "n1" is forbidden: User "nobody" cannot get resource "nodes" in '
                       'API group "" at the cluster scope')


# -- authorization --------------------------------------------------------------------------
def test_a_user_bound_to_nothing_creates_nothing(api: KubeApiServer) -> None:
    with client(api, "mallory") as c:
        message = forbidden(c.post(NM, json=maintenance()))
    assert message == ('nodemaintenances.powerplane.io is forbidden: User "mallory" cannot '
                       'create resource "nodemaintenances" in API group "powerplane.io" at the '
                       "cluster scope")
    assert api.object(MAINTENANCES, None, "m1") is None  # nothing stored, nothing announced


@pytest.mark.parametrize(("method", "content_type", "body"), [
    ("PUT", "application/json", None),
    ("PATCH", MERGE, {"status": {"phase": "Complete"}}),
    ("PATCH", JSON_PATCH, [{"op": "add", "path": "/status", "value": {"phase": "Complete"}}]),
    ("PATCH", APPLY, {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
                      "metadata": {"name": "m1"}, "status": {"phase": "Complete"}}),
])
def test_the_status_subresource_is_a_resource_of_its_own(
        api: KubeApiServer, method: str, content_type: str, body: Any) -> None:
    """Every write shape: granted on ``nodemaintenances`` is not granted on its status, and
    the other way round; the message names ``nodemaintenances/status``."""
    verb = "update" if method == "PUT" else "patch"
    api.grant("main-only", role("main", rule(["nodemaintenances"], ["get", verb])))
    api.grant("status-only", role("status", rule(["nodemaintenances/status"], ["get", verb])))
    with client(api) as admin:
        assert admin.post(NM, json=maintenance()).status_code == 201
    params = {"fieldManager": "test"} if content_type == APPLY else {}
    with client(api, "main-only") as c:
        sent = body if body is not None else {**stored(api), "status": {"phase": "Complete"}}
        message = forbidden(c.request(method, f"{NM}/m1/status", json=sent, params=params,
                                      headers={"Content-Type": content_type}))
    assert message == (f'nodemaintenances.powerplane.io "m1" is forbidden: User "main-only" '
                       f'cannot {verb} resource "nodemaintenances/status" in API group '
                       f'"powerplane.io" at the cluster scope')
    with client(api, "status-only") as c:
        sent = body if body is not None else {**stored(api), "status": {"phase": "Complete"}}
        done = c.request(method, f"{NM}/m1/status", json=sent, params=params,
                         headers={"Content-Type": content_type})
        assert done.status_code == 200, done.text
        assert stored(api)["status"] == {"phase": "Complete"}
        main = body if body is not None else {**stored(api), "metadata": {
            **stored(api)["metadata"], "labels": {"x": "y"}}}
        message = forbidden(c.request(method, f"{NM}/m1", json=main, params=params,
                                      headers={"Content-Type": content_type}))
    assert f'cannot {verb} resource "nodemaintenances" in API group' in message


def test_an_apply_that_creates_needs_create_too(api: KubeApiServer) -> None:
    api.grant("patcher", role("patch", rule(["nodemaintenances"], ["patch"])))
    with client(api, "patcher", **{"Content-Type": APPLY}) as c:
        message = forbidden(c.patch(f"{NM}/m1", json=maintenance(),
                                    params={"fieldManager": "test"}))
    assert message == ('nodemaintenances.powerplane.io "m1" is forbidden: User "patcher" '
                       'cannot create resource "nodemaintenances" in API group '
                       '"powerplane.io" at the cluster scope')
    api.grant("patcher", role("create", rule(["nodemaintenances"], ["create"])))
    with client(api, "patcher", **{"Content-Type": APPLY}) as c:
        assert c.patch(f"{NM}/m1", json=maintenance(),
                       params={"fieldManager": "test"}).status_code == 201


def test_a_role_grants_in_its_namespace_only_and_names_count(api: KubeApiServer) -> None:
    api.grant("bob", role("one-lease", rule(["leases"], ["get"], "coordination.k8s.io",
                                            resourceNames=["mine"]), namespace="ops"))
    api.add_lease("ops", "mine", "bob")
    api.add_lease("ops", "other", "carol")
    api.add_lease("kube-system", "mine", "dave")
    with client(api, "bob") as c:
        assert c.get("/apis/coordination.k8s.io/v1/namespaces/ops/leases/mine").status_code \
            == 200
        forbidden(c.get("/apis/coordination.k8s.io/v1/namespaces/ops/leases/other"))
        message = forbidden(c.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/"
                                  "leases/mine"))
        # a list naming the one object by field selector is a list of that name
        assert c.get("/apis/coordination.k8s.io/v1/namespaces/ops/leases", params={
            "fieldSelector": "metadata.name=mine"}).status_code == 403  # get, not list
    assert message == ('leases.coordination.k8s.io "mine" is forbidden: User "bob" cannot get '
                       'resource "leases" in API group "coordination.k8s.io" in the namespace '
                       '"kube-system"')


def test_an_eviction_is_create_on_pods_eviction(api: KubeApiServer) -> None:
    api.add_node("n1")
    api.add_pod("default", "web-1", "n1")
    path = "/api/v1/namespaces/default/pods/web-1/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "web-1", "namespace": "default"}}
    api.grant("drainer", role("pods", rule(["pods"], ["create", "list"], "")))
    with client(api, "drainer") as c:
        message = forbidden(c.post(path, json=body))
    assert message == ('pods "web-1" is forbidden: User "drainer" cannot create resource '
                       '"pods/eviction" in API group "" in the namespace "default"')
    api.grant("operator", m.cluster_role())  # the operator's: pods/eviction create
    with client(api, "operator") as c:
        assert c.post(path, json=body).status_code == 201


def test_a_grant_taken_away_refuses_the_next_request(api: KubeApiServer) -> None:
    api.grant("viewer", m.people_roles()[1])  # powerplane-viewer
    with client(api, "viewer") as c:
        assert c.get(NM).status_code == 200
        assert api.delete_object(RBAC_KINDS["ClusterRoleBinding"], None,
                                 f"{m.VIEWER}:viewer")
        forbidden(c.get(NM))
    api.grant("viewer", m.people_roles()[1])
    with client(api) as admin:  # and through the API, as kubectl delete would
        assert admin.delete("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                            f"{m.VIEWER}:viewer").status_code == 200
    with client(api, "viewer") as c:
        forbidden(c.get(NM))


def test_enforcement_can_be_turned_off() -> None:
    with KubeApiServer(admission=False, enforce_rbac=False) as api, \
            client(api, "mallory") as c:
        assert c.post(NM, json=maintenance()).status_code == 201
        # the reviews still answer by RBAC
        review = c.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json={
            "spec": {"user": "mallory", "resourceAttributes": {
                "group": "powerplane.io", "resource": "nodemaintenances",
                "verb": "create"}}}).json()
    assert review["status"] == {"allowed": False}


# -- impersonation --------------------------------------------------------------------------
def test_impersonation_needs_impersonate_on_users_groups_and_service_accounts(
        api: KubeApiServer) -> None:
    api.grant("alice", m.people_roles()[1])  # may read maintenances
    impersonator = role("impersonate-alice",
                        rule(["users"], ["impersonate"], "", resourceNames=["alice"]))
    api.grant("gateway", impersonator)
    as_alice = {"Impersonate-User": "alice"}
    with client(api, "gateway", **as_alice) as c:
        assert c.get(NM).status_code == 200
    assert api.requests[-1].user == "alice"
    with client(api, "gateway", **{"Impersonate-User": "bob"}) as c:
        message = forbidden(c.get(NM))
    assert message == ('users "bob" is forbidden: User "gateway" cannot impersonate resource '
                       '"users" in API group "" at the cluster scope')
    with client(api, "gateway", **{**as_alice, "Impersonate-Group": "admins"}) as c:
        message = forbidden(c.get(NM))
    assert 'groups "admins" is forbidden' in message
    sa = "system:serviceaccount:ops:bot"
    with client(api, "gateway", **{"Impersonate-User": sa}) as c:
        message = forbidden(c.get(NM))
    assert message == ('serviceaccounts "bot" is forbidden: User "gateway" cannot impersonate '
                       'resource "serviceaccounts" in API group "" in the namespace "ops"')
    api.grant("gateway", role("impersonate-bot", rule(["serviceaccounts"], ["impersonate"],
                                                      "", resourceNames=["bot"]),
                              namespace="ops"))
    with client(api, "gateway", **{"Impersonate-User": sa}) as c:
        me = c.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    json={"kind": "SelfSubjectReview"}).json()
    assert me["status"]["userInfo"] == {"username": sa, "groups": [
        "system:serviceaccounts", "system:serviceaccounts:ops", "system:authenticated"]}
