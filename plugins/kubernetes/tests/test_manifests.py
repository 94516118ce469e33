"""The operator's manifests: every object valid against Kubernetes' own schemas at the
lowest and highest minor the docs support, the Namespace first (one apply on a clean
cluster), the ClusterRole exactly the verbs the operator's run uses, its leases only in its
namespace, ``secrets get`` only on the Secrets the deployment file names, a writable volume
where a ``state_file`` needs one and a SQLite store refused, the maintainer's roles (who
runs ``maintenance request``) with their Events in the store's namespace; only the
executor's role writes status or the dispatch ledger, and no requester's a Lease."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from click.testing import CliRunner

from powerplane import ConfigError, load_config
from powerplane_kubernetes.operator import manifests as m

LOWEST, HIGHEST = "1.30.0", "1.37.0"
"""The Kubernetes minors the docs support (plugins/kubernetes/README.md): the lowest has
ValidatingAdmissionPolicy v1; the highest is the newest kubernetes-validate ships."""
README = Path(__file__).resolve().parents[1] / "README.md"


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def write_config(tmp: Path, *, store: Any = None, lab: dict[str, Any] | None = None,
                 cluster: dict[str, Any] | None = None) -> Path:
    """A deployment file: a simulated channel ``lab`` (``lab`` adds keys to it), the
    kubernetes store unless ``store`` says otherwise (``"absent"``: no ``store`` key)."""
    lifecycle: dict[str, Any] = {
        "store": {"type": "kubernetes", "namespace": "ops"} if store is None else store,
        "cluster": cluster or {"type": "kubernetes"},
    }
    if store == "absent":
        del lifecycle["store"]
    cfg = {"channels": {"lab": {"type": "simulated", "machines": {"n1": "on"}, **(lab or {})}},
           "nodes": {"n1": {"channels": [{"channel": "lab", "target": "n1"}]}},
           "lifecycle": lifecycle}
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


SECRETS = {"password": {"k8s": "ops/bmc-credentials/password"},
           "expect_password": {"k8s": "vault/lab-expected/password"}}


def every_variant(tmp: Path) -> list[list[dict[str, Any]]]:
    """The manifests with no file, with referenced Secrets (two namespaces) and a state
    file (the data volume), and with the store's namespace another one."""
    full = load_config(write_config(tmp, lab={**SECRETS, "state_file": "machines.json"}))
    return [m.manifests("powerplane", "example.org/powerplane:0.1.0"),
            m.manifests("ops", deployment=full),
            m.manifests("ops", store_namespace="maint")]


@pytest.mark.parametrize("version", [LOWEST, HIGHEST])
def test_every_object_validates_at_the_lowest_and_highest_supported_minor(
        version: str, tmp_path: Path) -> None:
    for docs in every_variant(tmp_path):
        kinds = [d["kind"] for d in docs]
        for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                     "Role", "RoleBinding", "Deployment"):
            assert kind in kinds
        assert kinds[0] == "Namespace"  # first: everything namespaced goes into it
        if m.crd_missing() is None:
            assert "CustomResourceDefinition" in kinds
        for doc in docs:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_docs_state_the_range_the_schemas_are_checked_at() -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    low, high = (".".join(v.split(".")[:2]) for v in (LOWEST, HIGHEST))
    assert f"Kubernetes {low} to {high}" in text
    assert re.search(r"kubernetes-validate>=" + re.escape(high), (
        README.parent / "pyproject.toml").read_text(encoding="utf-8"))


def test_a_field_the_schema_does_not_have_is_refused() -> None:
    # the check is not vacuous: a strict schema refuses an unknown field
    role = m.cluster_role()
    role["rules"][0]["verb"] = ["get"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(role, HIGHEST, strict=True)


def test_cluster_role_holds_exactly_the_verbs_the_operator_uses() -> None:
    """What ``test_operator_privileges`` saw a real run use: no ``patch`` of maintenances
    (every write is a ``PUT``), no ``create`` (a person's request makes them), no watch of
    nodes, no Events; of the audit records only a request's record its creator did not
    write, and the watch that tells which it did."""
    expected = {("", "nodes", v) for v in ("get", "list", "patch")}
    expected |= {("", "pods", "list"), ("", "pods/eviction", "create"),
                 ("policy", "poddisruptionbudgets", "list"),
                 ("longhorn.io", "nodes", "get"), ("longhorn.io", "nodes", "update"),
                 ("longhorn.io", "replicas", "list"),
                 ("powerplane.io", "nodemaintenances/status", "update"),
                 ("powerplane.io", "maintenanceaudits", "create"),
                 ("powerplane.io", "maintenanceaudits", "watch")}
    expected |= {("powerplane.io", "nodemaintenances", v)
                 for v in ("get", "list", "watch", "update")}
    # the dispatch ledger, written before every send and read against every status (issue
    # 36: created only), and the recorder's verb (records of others name it recordedBy)
    expected |= {("powerplane.io", "maintenancedispatches", v)
                 for v in ("create", "get", "list", "watch")}
    expected |= {("powerplane.io", "auditrecorders", "record")}
    # the kubernetes policy's check before acting; the look at the admission binding
    expected |= {("authorization.k8s.io", "subjectaccessreviews", "create"),
                 ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", "get")}
    assert _rules(m.cluster_role()) == expected
    [named] = [r for r in m.cluster_role()["rules"] if "resourceNames" in r]
    assert named["resourceNames"] == [m.admission_name()]
    assert not any("*" in x for rule in _rules(m.cluster_role()) for x in rule)


def test_the_maintainer_roles_hold_the_request_path_and_its_events() -> None:
    """Issue 36: no status verb (the executor alone writes status) and no Lease (the
    executor takes the node locks; the store namespace is the operator's by default, where
    its site Leases live): the requester's Role holds Events create only."""
    expected = {("", "nodes", "get"), ("", "nodes", "list"), ("", "pods", "list"),
                ("policy", "poddisruptionbudgets", "list"), ("longhorn.io", "nodes", "get"),
                ("longhorn.io", "replicas", "list")}
    expected |= {("powerplane.io", "nodemaintenances", v)
                 for v in ("get", "list", "watch", "create", "update", "delete")}
    if m.crd_missing() is None:
        expected |= {("powerplane.io", "maintenanceaudits", v) for v in ("list", "create")}
    assert _rules(m.maintainer_role()) == expected
    assert _rules(m.maintainer_lock_role("maint")) == {("", "events", "create")}


def test_the_node_locks_are_granted_in_the_store_namespace() -> None:
    docs = m.manifests("ops", "img", store_namespace="maint")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    assert roles[m.LEASE_ROLE]["metadata"]["namespace"] == "ops"  # the site leases
    assert roles[m.MAINTAINER_LOCKS]["metadata"]["namespace"] == "maint"  # its Events
    assert m.MAINTAINER in roles
    # printed unbound: the operator's ServiceAccount is bound to its own roles only
    bound = {d["roleRef"]["name"] for d in docs if d["kind"].endswith("RoleBinding")}
    assert bound == {m.NAME, m.LEASE_ROLE, m.OPERATOR_LOCKS}
    assert roles[m.OPERATOR_LOCKS]["metadata"]["namespace"] == "maint"  # admission's locks
    assert {m.ADMIN, m.VIEWER, m.ENGINEER} <= set(roles)
    same = m.manifests("ops", "img")
    lock_role = next(d for d in same if d["metadata"]["name"] == m.MAINTAINER_LOCKS)
    assert lock_role["metadata"]["namespace"] == "ops"


def test_leases_are_granted_only_in_the_operator_namespace() -> None:
    docs = m.manifests("ops", "img")
    assert not any(g == "coordination.k8s.io" for g, _, _ in _rules(m.cluster_role()))
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["metadata"]["name"] == m.LEASE_ROLE
    assert role["metadata"]["namespace"] == "ops"
    assert _rules(role) == {("coordination.k8s.io", "leases", v)
                            for v in ("get", "create", "update")}
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": m.NAME, "namespace": "ops"}]


def test_deployment_two_replicas_probes_and_metrics_port() -> None:
    dep = next(d for d in m.manifests("ops", "img:1") if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == m.NAME
    (c,) = pod["containers"]
    assert c["image"] == "img:1"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["ports"][0]["containerPort"] == m.HTTP_PORT


def test_cli_prints_one_multi_document_yaml(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from powerplane_kubernetes.operator.cli import operator_group

    monkeypatch.delenv("POWERPLANE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./powerplane.yaml: no Secret, no data volume

    result = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops",
                                                 "--image", "img:2"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert docs == m.manifests("ops", "img:2")
    result = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops",
                                                 "--store-namespace", "maint"])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load_all(result.stdout)) == m.manifests(
        "ops", "powerplane:0.1.0", store_namespace="maint")


def _namespaced(docs: list[dict[str, Any]]) -> set[str]:
    return {d["metadata"]["namespace"] for d in docs if "namespace" in d["metadata"]}


def test_the_namespaces_come_first_so_one_apply_installs_on_a_clean_cluster() -> None:
    docs = m.manifests("ops", store_namespace="maint")
    assert [d["metadata"]["name"] for d in docs[:2]] == ["ops", "maint"]
    assert {d["kind"] for d in docs[:2]} == {"Namespace"}
    assert not any(d["kind"] == "Namespace" for d in docs[2:])
    assert _namespaced(docs) == {"ops", "maint"}
    same = m.manifests("ops")
    assert [d["kind"] for d in same].count("Namespace") == 1


def _secret_rules(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"].get("namespace", "*"), rule) for d in docs
            if d["kind"] in ("Role", "ClusterRole") for rule in d["rules"]
            if "secrets" in rule["resources"]]


def test_secrets_get_only_on_the_secrets_the_file_names(tmp_path: Path) -> None:
    deployment = load_config(write_config(tmp_path, lab=SECRETS))
    assert m.referenced_secrets(deployment) == {"ops": ["bmc-credentials"],
                                               "vault": ["lab-expected"]}
    docs = m.manifests("ops", deployment=deployment)
    assert _secret_rules(docs) == [
        ("ops", {"apiGroups": [""], "resources": ["secrets"],
                 "resourceNames": ["bmc-credentials"], "verbs": ["get"]}),
        ("vault", {"apiGroups": [""], "resources": ["secrets"],
                   "resourceNames": ["lab-expected"], "verbs": ["get"]})]
    bindings = [d for d in docs if d["kind"] == "RoleBinding"
                and d["roleRef"]["name"] == m.SECRETS_ROLE]
    assert {b["metadata"]["namespace"] for b in bindings} == {"ops", "vault"}
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": m.NAME,
                                  "namespace": "ops"}] for b in bindings)
    # a Namespace is made only for the operator's own: a Secret's is the user's
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == ["ops"]


def test_no_secret_referenced_no_secret_granted(tmp_path: Path) -> None:
    deployment = load_config(write_config(tmp_path, lab={"password": {"env": "SIM_PW"}}))
    assert m.referenced_secrets(deployment) == {}
    for docs in (m.manifests("ops", deployment=deployment), m.manifests("ops")):
        assert _secret_rules(docs) == []
        assert not any(d["metadata"]["name"] == m.SECRETS_ROLE for d in docs)


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    dep = next(d for d in docs if d["kind"] == "Deployment")
    return dict(dep["spec"]["template"]["spec"])


def test_a_state_file_gets_the_writable_data_volume(tmp_path: Path) -> None:
    plain = _pod(m.manifests("ops", deployment=load_config(write_config(tmp_path))))
    (c,) = plain["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {v["mountPath"] for v in c["volumeMounts"]} == {"/etc/powerplane", "/tmp"}
    for state in ({"lab": {"state_file": "machines.json"}},
                  {"lab": {"state_file": f"{m.DATA_DIR}/sim/machines.json"}},
                  {"cluster": {"type": "simulated", "state_file": "cluster.json"}}):
        pod = _pod(m.manifests("ops", deployment=load_config(write_config(tmp_path, **state))))
        (c,) = pod["containers"]
        assert {"name": "data", "mountPath": m.DATA_DIR} in c["volumeMounts"], state
        assert {"name": "data", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]


def test_a_state_file_outside_the_data_directory_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, lab={"state_file": "/etc/powerplane/machines.json"})
    with pytest.raises(ConfigError, match=r"channels\.lab\.state_file.*outside "
                       + re.escape(m.DATA_DIR)):
        m.manifests("ops", deployment=load_config(config))


@pytest.mark.parametrize("store", ["lifecycle.db", {"type": "sqlite", "path": "x.db"}, "absent"])
def test_a_sqlite_store_is_refused_for_the_cluster(store: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path, store=store)
    with pytest.raises(ConfigError, match=r"lifecycle\.store.*SQLite.*type: kubernetes") as err:
        m.manifests("ops", deployment=load_config(config))
    assert ("the default when lifecycle.store is absent" in str(err.value)) == (
        store == "absent")


def test_the_store_namespace_comes_from_the_file_and_must_agree(tmp_path: Path) -> None:
    deployment = load_config(write_config(tmp_path, store={"type": "kubernetes",
                                                           "namespace": "maint"}))
    docs = m.manifests("ops", deployment=deployment)
    locks = next(d for d in docs if d["metadata"]["name"] == m.MAINTAINER_LOCKS)
    assert locks["metadata"]["namespace"] == "maint"
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == ["ops", "maint"]
    with pytest.raises(ConfigError, match="--store-namespace says 'other'"):
        m.manifests("ops", store_namespace="other", deployment=deployment)


def _root_cli(args: list[str]) -> Any:
    from powerplane.cli import cli

    return CliRunner().invoke(cli, args)


def test_cli_reads_the_deployment_file_and_refuses_what_cannot_run_in_the_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERPLANE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, lab=SECRETS)
    result = _root_cli(["--config", str(config), "operator", "manifests", "--namespace", "ops"])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load_all(result.stdout)) == m.manifests(
        "ops", deployment=load_config(config))
    # ./powerplane.yaml is the deployment file when nothing else names one
    result = _root_cli(["operator", "manifests", "--namespace", "ops"])
    assert result.exit_code == 0, result.output
    assert m.SECRETS_ROLE in result.stdout
    sqlite = write_config(tmp_path, store="lifecycle.db")
    result = _root_cli(["--config", str(sqlite), "operator", "manifests"])
    assert result.exit_code == 2
    assert "SQLite" in result.stderr and "type: kubernetes" in result.stderr
    assert result.stdout == ""


def test_the_default_image_is_the_one_dev_image_builds() -> None:
    from powerplane_kubernetes import __version__
    from powerplane_kubernetes.operator.cli import manifests_cmd

    assert f"powerplane:{__version__}" == m.IMAGE
    (image,) = [p for p in manifests_cmd.params if p.name == "image"]
    assert image.default == m.IMAGE


def test_the_admission_policy_and_its_binding_follow_the_crds() -> None:
    docs = m.manifests("ops")
    kinds = [d["kind"] for d in docs]
    at = kinds.index("ValidatingAdmissionPolicy")
    assert kinds[at + 1] == "ValidatingAdmissionPolicyBinding"
    assert kinds[at - 1] == "CustomResourceDefinition" and "ServiceAccount" not in kinds[:at]
    binding = docs[at + 1]
    assert binding["metadata"]["name"] == docs[at]["metadata"]["name"] == m.admission_name()
    assert binding["spec"] == {"policyName": m.admission_name(), "validationActions": ["Deny"]}
    # the three of issue 36, each followed by its binding: the requester's, the executor's
    # (status and the dispatch ledger), the audit's (an actor is its creator)
    names = [d["metadata"]["name"] for d in docs[at:at + 6]]
    assert names == ["powerplane-requester"] * 2 + ["powerplane-executor"] * 2 + [
        "powerplane-audit"] * 2
    assert kinds[at:at + 6] == ["ValidatingAdmissionPolicy",
                                "ValidatingAdmissionPolicyBinding"] * 3
    from powerplane_kubernetes import crd

    assert m.admission_name() == crd.REQUESTER_BINDING  # the binding the operator reads


def _every_role(tmp: Path) -> list[dict[str, Any]]:
    """Every Role and ClusterRole any variant of the manifests prints, the server's too."""
    docs = [d for variant in every_variant(tmp) for d in variant]
    docs += m.server_manifests("ops", "maint")
    return [d for d in docs if d["kind"] in ("Role", "ClusterRole")]


def test_only_the_executor_writes_status_and_the_dispatch_ledger(tmp_path: Path) -> None:
    """Issue 36: in every printed role, only the operator's ClusterRole holds
    ``nodemaintenances/status`` update (or any write of it) or ``maintenancedispatches``
    create; no role updates, patches or deletes a dispatch ledger entry; no role but the
    operator's holds a wildcard that would."""
    status_writers, ledger_writers, ledger_changers = set(), set(), set()
    for role in _every_role(tmp_path):
        name = role["metadata"]["name"]
        for group, resource, verb in _rules(role):
            assert "*" not in (group, resource, verb), (name, group, resource, verb)
            if resource == "nodemaintenances/status" and verb in ("update", "patch"):
                status_writers.add(name)
            if resource == "maintenancedispatches":
                if verb == "create":
                    ledger_writers.add(name)
                if verb in ("update", "patch", "delete", "deletecollection"):
                    ledger_changers.add(name)
    assert status_writers == {m.NAME}
    assert ledger_writers == {m.NAME}
    assert ledger_changers == set()


def test_no_requester_role_writes_a_lease(tmp_path: Path) -> None:
    """Issue 36: the site Leases live in the operator's namespace, the store's by default;
    only the operator's own Roles hold a Lease verb."""
    for role in _every_role(tmp_path):
        name = role["metadata"]["name"]
        leases = {v for g, r, v in _rules(role) if g == "coordination.k8s.io" and r == "leases"}
        if name in (m.LEASE_ROLE, m.OPERATOR_LOCKS):
            assert leases == {"get", "create", "update"}
        else:
            assert leases == set(), name


def test_the_people_roles() -> None:
    roles = {r["metadata"]["name"]: _rules(r) for r in m.people_roles()}
    servers = {("powerplane.io", "servers", v) for v in m.SERVER_VERBS}
    maint = "nodemaintenances"
    assert roles[m.ADMIN] == servers | {("powerplane.io", maint, v) for v in (
        "create", "get", "list", "watch", "update")} | {
        ("powerplane.io", "maintenanceaudits", v) for v in ("get", "list", "create")}
    assert roles[m.VIEWER] == {("powerplane.io", "servers", "get")} | {
        ("powerplane.io", r, v) for r in (maint, "maintenanceaudits")
        for v in ("get", "list", "watch")}
    assert roles[m.ENGINEER] == {("powerplane.io", "servers", "cordon"),
                                 ("powerplane.io", "servers", "uncordon")} | {
        ("powerplane.io", maint, v) for v in ("create", "get", "list", "watch", "update")}
    from powerplane.authority.actions import Action
    from powerplane_kubernetes.policy import rbac_verb

    assert set(m.SERVER_VERBS) == {rbac_verb(a) for a in Action}


def test_the_servers_role_reviews_and_reads_and_writes_no_node_or_maintenance() -> None:
    """``operator manifests --server``: the gateway's ClusterRole is TokenReview,
    SubjectAccessReview, the pre-flight's and the list's reads, the audit records, and its
    Events Role in the store namespace; no Node, NodeMaintenance or Lease write; the
    impersonation role printed unbound. (Every request it makes is checked against these in
    servers/tests/test_kubernetes_mode.py.)"""
    assert _rules(m.server_role()) == {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
        ("", "nodes", "get"), ("", "nodes", "list"), ("", "pods", "list"),
        ("policy", "poddisruptionbudgets", "list"),
        ("powerplane.io", "nodemaintenances", "get"),
        ("powerplane.io", "nodemaintenances", "list"),
        ("powerplane.io", "nodemaintenances", "watch"),
        ("powerplane.io", "maintenanceaudits", "list"),
        ("powerplane.io", "maintenanceaudits", "create"),
        ("powerplane.io", "auditrecorders", "record"),
        ("longhorn.io", "nodes", "get"), ("longhorn.io", "replicas", "list")}
    docs = m.server_manifests("ops", "maint")
    events = next(d for d in docs if d["metadata"]["name"] == m.SERVER_EVENTS
                  and d["kind"] == "Role")
    assert events["metadata"]["namespace"] == "maint"
    assert _rules(events) == {("", "events", "create")}
    bound = {d["roleRef"]["name"] for d in docs if d["kind"].endswith("RoleBinding")}
    assert bound == {m.SERVER, m.SERVER_EVENTS}  # impersonation: unbound
    # a caller whose token is a service account's is impersonated as one (issue 36)
    assert _rules(m.server_impersonation_role()) == {("", "users", "impersonate"),
                                                     ("", "groups", "impersonate"),
                                                     ("", "serviceaccounts", "impersonate")}
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": m.SERVER,
                                  "namespace": "ops"}]
               for b in docs if b["kind"].endswith("RoleBinding"))


def test_manifests_print_the_servers_objects_with_server(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from powerplane_kubernetes.operator.cli import operator_group

    env = {"POWERPLANE_CONFIG": str(tmp_path / "absent.yaml")}
    plain = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops"], env=env)
    served = CliRunner().invoke(operator_group, ["manifests", "--namespace", "ops",
                                                 "--server"], env=env)
    assert plain.exit_code == 0 and served.exit_code == 0, served.output
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(served.stdout) if d]
    assert m.SERVER not in plain.stdout
    assert {m.SERVER, m.SERVER_EVENTS, m.SERVER_IMPERSONATE} <= set(names)
