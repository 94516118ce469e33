"""The operator's manifests: every object valid against Kubernetes' own schemas, the
ClusterRole exactly the verbs the issue names, leases only in the operator's namespace."""

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


def test_cluster_role_holds_exactly_the_named_verbs() -> None:
    own = ["nodemaintenances"]
    if m.crd_missing() is None:
        own = [d["spec"]["names"]["plural"] for d in m.crd_objects()]
    expected = {("", "nodes", v) for v in ("get", "list", "watch", "patch")}
    expected |= {("", "pods", "list"), ("", "pods/eviction", "create"),
                 ("policy", "poddisruptionbudgets", "list"), ("", "events", "create"),
                 ("longhorn.io", "nodes", "get"), ("longhorn.io", "nodes", "update"),
                 ("longhorn.io", "replicas", "list")}
    for plural in own:
        expected |= {("powerplane.io", plural, v)
                     for v in ("get", "list", "watch", "create", "update", "patch")}
        expected |= {("powerplane.io", f"{plural}/status", v) for v in ("update", "patch")}
    assert _rules(m.cluster_role()) == expected
    assert not any("*" in x for rule in _rules(m.cluster_role()) for x in rule)


def test_leases_are_granted_only_in_the_operator_namespace() -> None:
    docs = m.manifests("ops", "img")
    assert not any(g == "coordination.k8s.io" for g, _, _ in _rules(m.cluster_role()))
    role = next(d for d in docs if d["kind"] == "Role")
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
