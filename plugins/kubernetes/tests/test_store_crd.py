"""The CustomResourceDefinitions of the ``kubernetes`` store: valid for the API server
(Kubernetes' own schema for CustomResourceDefinition, through kubernetes-validate), structural
(what the API server requires of a CRD schema, checked node by node), generated from core's
models (every field of the model is on the wire), with the status subresource, the printer
columns and the immutable spec."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel

from powerplane.lifecycle import Action, AuditRecord
from powerplane.lifecycle.model import MaintenanceSpec, MaintenanceStatus
from powerplane_kubernetes.crd import (
    SPEC_FIELDS,
    SPEC_IMMUTABLE,
    audit_crd_manifest,
    crd_manifest,
    crd_manifests,
    structural,
)
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_kubernetes.testing.schemas import KUBERNETES_VERSION
from powerplane_kubernetes.trail import CHAIN_FIELDS


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for key, sub in (node.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}.*")


@pytest.mark.parametrize("crd", crd_manifests(), ids=lambda c: c["metadata"]["name"])
def test_the_crd_validates_as_a_kubernetes_custom_resource_definition(
        crd: dict[str, Any]) -> None:
    kubernetes_validate.validate(crd, KUBERNETES_VERSION, strict=True)
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["group"] == "powerplane.io"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]


@pytest.mark.parametrize("crd", crd_manifests(), ids=lambda c: c["metadata"]["name"])
def test_the_schema_is_structural(crd: dict[str, Any]) -> None:
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "default",
                 "const"}
    for path, node in _nodes(_schema(crd)):
        assert not forbidden & set(node), (path, sorted(forbidden & set(node)))
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        assert node.get("additionalProperties") is not False, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert not node.get("properties"), path  # only where nothing is known


def _aliases(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_every_field_of_core_s_model_is_on_the_wire() -> None:
    props = _schema(crd_manifest())["properties"]
    assert set(props["spec"]["properties"]) == set(SPEC_FIELDS)
    assert set(props["spec"]["properties"]) | set(props["requests"]["properties"]) \
        == _aliases(MaintenanceSpec)
    assert set(props["status"]["properties"]) == _aliases(MaintenanceStatus)
    assert {"phase", "conditions", "poweredOffAt", "dispatches", "refusal", "history"} \
        <= set(props["status"]["properties"])
    phase = props["status"]["properties"]["phase"]
    assert phase["type"] == "string" and "Requested" in phase["enum"]
    # a dispatch's channel may be null (a required key holding None): nullable, not pruned
    dispatch = props["status"]["properties"]["dispatches"]["items"]
    assert dispatch["properties"]["channel"] == {"type": "string", "nullable": True}
    assert "channel" in dispatch["required"]
    # conditions are a map of Condition; the power offer is free-form
    conditions = props["status"]["properties"]["conditions"]
    assert conditions["type"] == "object"
    assert conditions["additionalProperties"]["properties"]["status"]["enum"] == \
        ["True", "False", "Unknown"]
    power = props["spec"]["properties"]["preflight"]["properties"]["power"]
    assert power == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_every_field_of_core_s_audit_record_is_on_the_wire_under_its_json_name() -> None:
    """The MaintenanceAudit schema has exactly the keys ``AuditRecord.as_dict`` writes (a
    key it lacked would be pruned: the identity, the outcome and the rule among them), and
    the chain's (issue 37: its trail, place, the hash before it, its checkpoint)."""
    written = AuditRecord(actor="alice", action=Action.REBOOT, reason="kernel", node="n1",
                          groups=("plant-eng",), on_behalf_of="the night shift",
                          rule="role admin allows it").as_dict()
    spec = _schema(audit_crd_manifest())["properties"]["spec"]
    assert set(spec["properties"]) == set(written) | set(CHAIN_FIELDS)
    assert spec["properties"]["seq"] == {"type": "integer", "minimum": 1,
                                         "description": spec["properties"]["seq"]["description"]}
    assert set(spec["properties"]["checkpoint"]["required"]) == {"entries", "head", "at", "key"}
    assert {"groups", "via", "onBehalfOf", "outcome", "rule"} <= set(spec["properties"])
    assert spec["properties"]["groups"] == {"type": "array", "items": {"type": "string"}}
    # an empty onBehalfOf is written as null: nullable, not pruned
    assert spec["properties"]["onBehalfOf"] == {"type": "string", "nullable": True}
    assert set(spec["required"]) == {"actor", "action", "reason", "node"}


def test_status_subresource_printer_columns_and_immutable_spec() -> None:
    crd = crd_manifest()
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Node", ".spec.node"), ("Intent", ".spec.intent"), ("Phase", ".status.phase"),
        ("Age", ".metadata.creationTimestamp")]
    assert _schema(crd)["properties"]["spec"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": SPEC_IMMUTABLE}]
    audit = audit_crd_manifest()
    (aversion,) = audit["spec"]["versions"]
    assert "subresources" not in aversion  # nothing but the record: no status
    assert _schema(audit)["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] == \
        "self == oldSelf"


def test_a_union_of_two_types_has_no_structural_schema_and_says_where() -> None:
    class Two(BaseModel):
        value: int | str

    with pytest.raises(ValueError, match=r"thing\.value: a union of 2 types"):
        structural(Two.model_json_schema(), "thing")


def test_the_api_server_refuses_a_crd_rule_it_cannot_emulate() -> None:
    crd = crd_manifest()
    _schema(crd)["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self.node.size() < 64"}]
    with pytest.raises(ValueError, match="kmock emulates no CEL"):
        KubeApiServer(crds=[crd])
