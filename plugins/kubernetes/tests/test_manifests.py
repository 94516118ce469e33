"""The operator's manifests: every object valid against Kubernetes' own schemas, the
ClusterRole exactly the verbs the operator's run uses, its leases only in its namespace, the
maintainer's roles (who runs ``maintenance request``) with the node locks in the store's."""

from __future__ import annotations

from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from click.testing import CliRunner

from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.schemas import KUBERNETES_VERSION


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def test_every_object_validates_against_kubernetes_schemas() -> None:
    docs = m.manifests("powerplane", "example.org/powerplane:0.1.0")
    kinds = [d["kind"] for d in docs]
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                 "Deployment"):
        assert kind in kinds
    if m.crd_missing() is None:
        assert kinds[0] == "CustomResourceDefinition"
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_field_the_schema_does_not_have_is_refused() -> None:
    # the check is not vacuous: a strict schema refuses an unknown field
    role = m.cluster_role()
    role["rules"][0]["verb"] = ["get"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(role, KUBERNETES_VERSION, strict=True)


def test_cluster_role_holds_exactly_the_verbs_the_operator_uses() -> None:
    """What ``test_operator_privileges`` saw a real run use: no ``patch`` of maintenances
    (every write is a ``PUT``), no ``create`` (a person's request makes them), no watch of
    nodes, no audit records or Events (written by the request, return, abandon, resolve)."""
    expected = {("", "nodes", v) for v in ("get", "list", "patch")}
    expected |= {("", "pods", "list"), ("", "pods/eviction", "create"),
                 ("policy", "poddisruptionbudgets", "list"),
                 ("longhorn.io", "nodes", "get"), ("longhorn.io", "nodes", "update"),
                 ("longhorn.io", "replicas", "list"),
                 ("powerplane.io", "nodemaintenances/status", "update")}
    expected |= {("powerplane.io", "nodemaintenances", v)
                 for v in ("get", "list", "watch", "update")}
    assert _rules(m.cluster_role()) == expected
    assert not any("*" in x for rule in _rules(m.cluster_role()) for x in rule)


def test_the_maintainer_roles_hold_the_request_path_and_its_locks() -> None:
    expected = {("", "nodes", "get"), ("", "nodes", "list"), ("", "pods", "list"),
                ("policy", "poddisruptionbudgets", "list"), ("longhorn.io", "nodes", "get"),
                ("longhorn.io", "replicas", "list"),
                ("powerplane.io", "nodemaintenances/status", "update")}
    expected |= {("powerplane.io", "nodemaintenances", v)
                 for v in ("get", "list", "create", "update", "delete")}
    if m.crd_missing() is None:
        expected |= {("powerplane.io", "maintenanceaudits", v) for v in ("list", "create")}
    assert _rules(m.maintainer_role()) == expected
    assert _rules(m.maintainer_lock_role("maint")) == {
        ("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"), ("", "events", "create")}


def test_the_node_locks_are_granted_in_the_store_namespace() -> None:
    docs = m.manifests("ops", "img", store_namespace="maint")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    assert roles[m.LEASE_ROLE]["metadata"]["namespace"] == "ops"  # the site leases
    assert roles[m.MAINTAINER_LOCKS]["metadata"]["namespace"] == "maint"  # the node locks
    assert m.MAINTAINER in roles
    # printed unbound: the operator's ServiceAccount is bound to its own roles only
    bound = {d["roleRef"]["name"] for d in docs if d["kind"].endswith("Binding")}
    assert bound == {m.NAME, m.LEASE_ROLE}
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


def test_cli_prints_one_multi_document_yaml() -> None:
    from powerplane_kubernetes.operator.cli import operator_group

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
