"""The ``kubernetes`` policy type (``powerplane_kubernetes.policy``) against the test API
server's SubjectAccessReviews, and the server's RBAC evaluation itself: "allow reboot, deny
shutdown" as an ordinary Role, one review per node, no cache (a grant removed refuses the
next check), an API server that cannot answer is no decision, ``cluster-admin`` passes
every verb, and the authorizer's semantics and wording (``rbac.go``, ``rule.go``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from powerplane import PowerHost, parse_config
from powerplane.authority.actions import Action
from powerplane.authority.identity import Identity
from powerplane.capabilities import Verb
from powerplane.errors import ConfigError, PolicyDenied, PowerplaneError
from powerplane.lifecycle import TemporaryPortError
from powerplane.runtime import policy_of
from powerplane.testing import plugin_registry
from powerplane_kubernetes import plugin
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.policy import KubernetesPolicy, PolicyUnavailable, rbac_verb
from powerplane_kubernetes.testing.apiserver import (
    RBAC_KINDS,
    KubeApiServer,
    free_port,
    rbac_authorize,
)

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ALICE = Identity("alice", ("plant-eng", "system:authenticated"), via="kubernetes")


def cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}


def binding(name: str, role: str, subjects: list[dict[str, Any]], *,
            namespace: str | None = None, role_kind: str = "ClusterRole") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding" if namespace is not None else "ClusterRoleBinding",
            "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}}


def servers(*verbs: str, names: list[str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": ["powerplane.io"], "resources": ["servers"],
                            "verbs": list(verbs)}
    if names is not None:
        rule["resourceNames"] = names
    return rule


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def deployment(tmp: Path, policy: dict[str, Any]) -> Any:
    registry = plugin_registry(only=["simulated", "kubernetes"])
    return parse_config({
        "channels": {"lab": {"type": "simulated", "machines": {"n1": "on", "n2": "on"}}},
        "nodes": {n: {"channels": [{"channel": "lab", "target": n}]} for n in ("n1", "n2")},
        "policy": policy, "audit": {"path": str(tmp / "audit.jsonl")},
    }, registry=registry, source=str(tmp / "powerplane.yaml"))


@pytest.fixture
def policy(api: KubeApiServer, tmp_path: Path) -> KubernetesPolicy:
    api.grant("operator", m.cluster_role())  # its policy's reviews, as printed
    kc = api.write_kubeconfig(tmp_path / "op-kc", client="operator")
    built = policy_of(deployment(tmp_path, {"type": "kubernetes", "kubeconfig": kc.name}))
    assert isinstance(built, KubernetesPolicy)
    return built


NODES = [("n1", None), ("n2", None)]


def test_the_plugin_registers_the_policy_type() -> None:
    assert plugin.REGISTERS["policy"] == ("kubernetes",)
    registry = plugin_registry(only=["simulated", "kubernetes"])
    assert "kubernetes" in registry.policy_types
    assert registry.policy_types["kubernetes"] is plugin.KUBERNETES_POLICY


def test_the_config_is_validated_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        deployment(tmp_path, {"type": "kubernetes", "kubeconfg": "kc"})
    assert "policy.kubeconfg" in str(caught.value)


def test_the_verb_of_each_action() -> None:
    assert rbac_verb(Action.READ) == "get"
    assert {rbac_verb(a) for a in Action if a is not Action.READ} == {
        "cordon", "uncordon", "drain", "reboot", "shutdown", "power-on", "terminate",
        "maintenance-abandon", "maintenance-resolve"}


async def test_allow_reboot_deny_shutdown_is_an_ordinary_role(
        api: KubeApiServer, policy: KubernetesPolicy) -> None:
    api.add_rbac(cluster_role("rebooter", [servers("reboot")]),
                 binding("alice-rebooter", "rebooter", [user("alice")]))
    reboot = await policy.decide(ALICE, Action.REBOOT, NODES)
    shutdown = await policy.decide(ALICE, Action.SHUTDOWN, NODES)
    assert [d.allowed for d in reboot] == [True, True]
    assert [d.allowed for d in shutdown] == [False, False]
    assert ('reason \'RBAC: allowed by ClusterRoleBinding "alice-rebooter" of ClusterRole '
            '"rebooter" to User "alice"\'') in reboot[0].rule
    assert "SubjectAccessReview of reboot on servers.powerplane.io 'n1'" in reboot[0].rule
    assert "allowed=false denied=false (no reason given)" in shutdown[1].rule
    await policy.aclose()
    # one review per node and action, for the identity's user and groups as given
    asked = [r for r in api.requests if r.path == REVIEWS]
    assert len(asked) == 4 and {r.client for r in asked} == {"operator"}
    assert asked[0].body["spec"] == {
        "user": "alice", "groups": ["plant-eng", "system:authenticated"],
        "resourceAttributes": {"group": "powerplane.io", "resource": "servers",
                               "verb": "reboot", "name": "n1"}}
    assert sorted(r.body["spec"]["resourceAttributes"]["name"] for r in asked) == \
        ["n1", "n1", "n2", "n2"]


async def test_groups_resource_names_and_read_as_get(
        api: KubeApiServer, policy: KubernetesPolicy) -> None:
    api.add_rbac(cluster_role("n1-cordon", [servers("cordon", names=["n1"]),
                                            servers("get")]),
                 binding("eng", "n1-cordon", [{"kind": "Group", "name": "plant-eng"}]))
    cordon = await policy.decide(ALICE, Action.CORDON, NODES)
    assert [d.allowed for d in cordon] == [True, False]
    assert 'to Group "plant-eng"' in cordon[0].rule
    read = await policy.decide(ALICE, Action.READ, NODES)
    assert all(d.allowed for d in read)
    assert "SubjectAccessReview of get on" in read[0].rule
    other = await policy.decide(Identity("bob"), Action.CORDON, NODES)
    assert not any(d.allowed for d in other)
    await policy.aclose()


async def test_a_wildcard_cluster_admin_passes_every_verb(
        api: KubeApiServer, policy: KubernetesPolicy) -> None:
    api.add_rbac(cluster_role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"],
                                                 "verbs": ["*"]}]),
                 binding("root", "cluster-admin", [user("root")]))
    for action in Action:
        decisions = await policy.decide(Identity("root"), action, NODES)
        assert all(d.allowed for d in decisions), action
    await policy.aclose()


async def test_a_grant_removed_refuses_the_next_check(
        api: KubeApiServer, policy: KubernetesPolicy) -> None:
    api.add_rbac(cluster_role("rebooter", [servers("reboot")]),
                 binding("alice-rebooter", "rebooter", [user("alice")]))
    assert (await policy.decide(ALICE, Action.REBOOT, NODES[:1]))[0].allowed
    assert api.delete_object(RBAC_KINDS["ClusterRoleBinding"], None, "alice-rebooter")
    assert not (await policy.decide(ALICE, Action.REBOOT, NODES[:1]))[0].allowed
    await policy.aclose()


async def test_a_role_binding_does_not_grant_the_cluster_scoped_servers(
        api: KubeApiServer, policy: KubernetesPolicy) -> None:
    api.add_rbac(cluster_role("rebooter", [servers("reboot")]),
                 binding("alice-here", "rebooter", [user("alice")], namespace="ops"))
    assert not (await policy.decide(ALICE, Action.REBOOT, NODES[:1]))[0].allowed
    await policy.aclose()


@pytest.mark.parametrize("fault", ["500", "429", "disconnect"])
async def test_an_api_server_that_cannot_answer_is_no_decision(
        api: KubeApiServer, policy: KubernetesPolicy, fault: str) -> None:
    api.add_rbac(cluster_role("rebooter", [servers("reboot")]),
                 binding("alice-rebooter", "rebooter", [user("alice")]))
    api.fail_requests("create", "authorization.k8s.io/v1/subjectaccessreviews", fault)
    with pytest.raises(PolicyUnavailable) as caught:
        await policy.decide(ALICE, Action.REBOOT, NODES)
    assert isinstance(caught.value, TemporaryPortError)
    assert isinstance(caught.value, PowerplaneError) and caught.value.exit_code == 1
    assert "whether alice may reboot servers/" in str(caught.value)
    # and the next one answers again (nothing remembered)
    assert all(d.allowed for d in await policy.decide(ALICE, Action.REBOOT, NODES))
    await policy.aclose()


async def test_an_api_server_not_listening_is_no_decision(tmp_path: Path) -> None:
    with KubeApiServer(port=free_port()) as later:
        kc = later.write_kubeconfig(tmp_path / "kc")
    built = policy_of(deployment(tmp_path, {"type": "kubernetes", "kubeconfig": kc.name,
                                            "timeouts": {"connect_s": 1, "read_s": 2}}))
    assert isinstance(built, KubernetesPolicy)
    with pytest.raises(PolicyUnavailable, match="cannot be reached"):
        await built.decide(ALICE, Action.REBOOT, NODES[:1])
    await built.aclose()


async def test_a_direct_call_is_refused_by_the_api_servers_rbac(
        api: KubeApiServer, tmp_path: Path) -> None:
    api.add_rbac(cluster_role("rebooter", [servers("reboot")]),
                 binding("alice-rebooter", "rebooter", [user("alice")]))
    # the executor of a direct call asks a SubjectAccessReview: the operator's role grants
    # it; no role printed for people does (powerplane-maintainer, -admin, -engineer), so a
    # person running the CLI with the kubernetes policy needs it bound by hand
    api.grant("cli", cluster_role("reviewer", [{
        "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
        "verbs": ["create"]}]))
    kc = api.write_kubeconfig(tmp_path / "kc", client="cli")
    dep = deployment(tmp_path, {"type": "kubernetes", "kubeconfig": kc.name})
    async with PowerHost(dep) as host:
        with pytest.raises(PolicyDenied, match="no reason given"):
            await host.invoke("n1", Verb.SHUTDOWN, reason="psu", identity=ALICE)
        done = await host.invoke("n1", Verb.REBOOT, reason="kernel", identity=ALICE)
    assert done.accepted


async def test_who_am_i_is_the_self_subject_review(
        api: KubeApiServer, tmp_path: Path) -> None:
    kc = api.write_kubeconfig(tmp_path / "kc", user="alice", groups=["plant-eng"])
    built = policy_of(deployment(tmp_path, {"type": "kubernetes", "kubeconfig": kc.name}))
    assert isinstance(built, KubernetesPolicy)
    me = await built.who_am_i()
    await built.aclose()
    assert me == Identity("alice", ("plant-eng", "system:authenticated"), via="kubernetes")
    [asked] = [r for r in api.requests if r.path.endswith("/selfsubjectreviews")]
    assert asked.method == "POST" and asked.client == "alice"


# -- the server's RBAC evaluation, rule by rule (rbac.go, rule.go, evaluation_helpers.go) ----
def attrs(verb: str, resource: str, *, group: str = "", namespace: str = "", name: str = "",
          subresource: str = "") -> dict[str, str]:
    return {"verb": verb, "group": group, "resource": resource, "namespace": namespace,
            "name": name, "subresource": subresource}


def objects(*docs: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RBAC_KINDS}
    for doc in docs:
        out[doc["kind"]].append(doc)
    return out


def test_rbac_service_account_subject_and_role_binding_wording() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader", "namespace": "ops"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                       "resourceNames": ["bmc"]}]}
    rb = binding("op-reader", "reader", [{"kind": "ServiceAccount", "name": "op"}],
                 namespace="ops", role_kind="Role")
    world = objects(role, rb)
    sa = "system:serviceaccount:ops:op"
    ok, reason = rbac_authorize(sa, ["system:serviceaccounts"], world,
                                resource=attrs("get", "secrets", namespace="ops", name="bmc"))
    assert ok and reason == ('RBAC: allowed by RoleBinding "op-reader/ops" of Role "reader" '
                             'to ServiceAccount "op/ops"')
    assert rbac_authorize(sa, [], world, resource=attrs("get", "secrets", namespace="ops",
                                                        name="other")) == (False, "")
    assert rbac_authorize(sa, [], world, resource=attrs("get", "secrets", namespace="x",
                                                        name="bmc")) == (False, "")
    assert not rbac_authorize("system:serviceaccount:x:op", [], world, resource=attrs(
        "get", "secrets", namespace="ops", name="bmc"))[0]


def test_rbac_subresources_wildcards_and_missing_roles() -> None:
    world = objects(
        cluster_role("status", [{"apiGroups": ["powerplane.io"], "resources": ["*/status"],
                                 "verbs": ["update"]}]),
        binding("a", "status", [user("a")]),
        binding("b", "absent", [user("b")]))
    update = attrs("update", "nodemaintenances", group="powerplane.io", name="m")
    assert not rbac_authorize("a", [], world, resource=update)[0]
    assert rbac_authorize("a", [], world, resource={**update, "subresource": "status"})[0]
    assert rbac_authorize("b", [], world, resource=update) == (
        False, 'RBAC: clusterrole.rbac.authorization.k8s.io "absent" not found')
    star = objects(cluster_role("all", [{"apiGroups": ["*"], "resources": ["*"],
                                         "verbs": ["*"]}]),
                   binding("all", "all", [user("a")]))
    assert rbac_authorize("a", [], star, resource={**update, "subresource": "status"})[0]
    assert rbac_authorize("a", [], star, non_resource={"verb": "get", "path": "/x"}) == (
        False, "")
