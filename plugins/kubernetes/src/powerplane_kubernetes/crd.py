"""The custom resources the ``kubernetes`` store keeps: NodeMaintenance and MaintenanceAudit.

Both are cluster-scoped, in the API group ``powerplane.io``, version ``v1alpha1``, and their
OpenAPI v3 schemas are *generated* from core's pydantic models (``MaintenanceSpec``,
``MaintenanceStatus``, ``AuditRecord``), so the wire form cannot drift from the model:
:func:`structural` turns ``model_json_schema()`` into the structural subset Kubernetes
accepts (every ``$ref`` inlined, no ``$defs``, a ``type`` on every node, ``X | None`` as
``nullable: true``, free-form mappings as ``x-kubernetes-preserve-unknown-fields``, no
``additionalProperties: false``, ``title`` or ``default``).

``NodeMaintenance`` (``nodemaintenances.powerplane.io``), one object per maintenance, named
as the maintenance::

    apiVersion: powerplane.io/v1alpha1
    kind: NodeMaintenance
    metadata:
      name: n1-reboot-20250101120000-1a2b3c
      labels: {powerplane.io/node: n1, powerplane.io/active: "true"}
      annotations: {powerplane.io/created-at: "2025-01-01T12:00:00.123456+00:00"}
    spec:          # what was asked: immutable after creation (CEL: self == oldSelf)
      {node, intent, reason, requestedBy, preflight}
    requests:      # what a person adds later: return to service, abandon, resolutions
      {returnRequest, abandon, resolutions}
    status:        # what the machine did: written only through the status subresource
      {phase, conditions, poweredOffAt, dispatches, refusal, history, ...}

The spec is immutable, so the requests a person makes after creation (core's
``MaintenanceSpec.return_request``, ``abandon``, ``resolutions``) live beside it in
``requests``: every field of ``MaintenanceSpec`` not in :data:`SPEC_FIELDS` goes there, so a
field core adds later lands in ``requests`` by itself. Printer columns: node, intent, phase,
age.

``MaintenanceDispatch`` (``maintenancedispatches.powerplane.io``), one object per entry of
a maintenance's dispatch ledger (core's ``powerplane.lifecycle.ledger``): written by the
executor before a power verb is sent (and when evidence showed an attempt did not take
effect), named after the maintenance, the verb and the attempt, so a second record of one
attempt is a ``409``; immutable (CEL ``self == oldSelf``), created by the executor alone and
updated or deleted by no role. At most once rests on these, not on ``status``.

``MaintenanceAudit`` (``maintenanceaudits.powerplane.io``), one object per audit record, its
``spec`` the record as core writes it (``AuditRecord.as_dict``: the actor and the groups and
platform that authenticated them, ``onBehalfOf``, the action, its outcome and the policy
rule that decided it, ...; immutable too), with no owner reference: the trail outlives the
maintenance it names (a compliance record), and no garbage collector removes it.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, TypeAdapter

from powerplane.lifecycle import Action, AuditRecord

__all__ = [
    "ACTIVE_LABEL",
    "AUDIT_KIND",
    "AUDIT_PLURAL",
    "CREATED_ANNOTATION",
    "DISPATCH_KIND",
    "DISPATCH_PLURAL",
    "FINALIZER",
    "GROUP",
    "KIND",
    "MAINTENANCE_LABEL",
    "NODE_LABEL",
    "PLURAL",
    "REQUESTER_BINDING",
    "SPEC_FIELDS",
    "SPEC_IMMUTABLE",
    "TRAIL_LABEL",
    "VERSION",
    "audit_crd_manifest",
    "audit_schema",
    "crd_manifest",
    "crd_manifests",
    "dispatch_crd_manifest",
    "structural",
]

GROUP = "powerplane.io"
VERSION = "v1alpha1"
KIND = "NodeMaintenance"
PLURAL = "nodemaintenances"
AUDIT_KIND = "MaintenanceAudit"
AUDIT_PLURAL = "maintenanceaudits"
DISPATCH_KIND = "MaintenanceDispatch"
DISPATCH_PLURAL = "maintenancedispatches"
FINALIZER = f"{GROUP}/abandon-on-delete"
"""On every NodeMaintenance: its deletion runs the abandon path first (the node returned to
service, audited), and the executor removes it once the maintenance has ended."""

NODE_LABEL = "powerplane.io/node"
"""The node a maintenance (or an audit record) is about (hashed when not a label value)."""
ACTIVE_LABEL = "powerplane.io/active"
"""``"true"`` while the maintenance is in an active phase, ``"false"`` once terminal."""
MAINTENANCE_LABEL = "powerplane.io/maintenance"
"""On an audit record: the maintenance it joins to (hashed when not a label value)."""
TRAIL_LABEL = "powerplane.io/audit-trail"
"""On an audit record: its trail (hashed: ``kubectl get nmaudit -l`` selects one; readers
group by the record's own ``spec.trail``, which its hash covers)."""
CREATED_ANNOTATION = "powerplane.io/created-at"
"""The maintenance's ``created_at`` to the microsecond (``creationTimestamp`` has seconds)."""

SPEC_FIELDS = ("node", "intent", "reason", "requestedBy", "requesterGroups", "requestedVia",
               "onBehalfOf", "preflight", "ackPreflight", "confirmNode", "hazardReason")
"""The wire names of the fields of ``spec``; the rest of core's spec is ``requests``."""

REQUESTER_BINDING = "powerplane-requester"
"""The ValidatingAdmissionPolicy (and its binding) that binds ``spec.requestedBy`` to the
API server's ``request.userInfo`` on create, and each ``requests`` entry to the user who
added it: the executor refuses every request while its binding is not installed."""

SPEC_IMMUTABLE = "spec is immutable: a maintenance's request cannot change after it is made"
"""The message of the CEL rule ``self == oldSelf`` on ``spec``."""

_KEEP = ("type", "format", "enum", "description", "minimum", "maximum", "minLength",
         "maxLength", "minItems", "maxItems", "pattern")
_FORMATS = {"date-time", "date", "byte", "int32", "int64", "float", "double", "uuid",
            "duration", "hostname", "ipv4", "ipv6", "email", "uri"}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        target = _inline(defs[name], defs)
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **_inline(extra, defs)}
    return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}


def _convert(node: dict[str, Any], where: str) -> dict[str, Any]:
    node = dict(node)
    nullable = False
    for key in ("anyOf", "oneOf"):
        if key in node:
            every = node.pop(key)
            options = [o for o in every if o != {"type": "null"}]
            nullable = nullable or len(options) < len(every)
            if len(options) != 1:
                raise ValueError(f"{where}: a union of {len(options)} types has no "
                                 "structural schema")
            node = {**options[0], **{k: v for k, v in node.items() if k == "description"}}
    if "allOf" in node:
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise ValueError(f"{where}: allOf of {len(parts)} schemas has no structural schema")
        node = {**parts[0], **node}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    out: dict[str, Any] = {k: node[k] for k in _KEEP if k in node}
    if "format" in out and out["format"] not in _FORMATS:
        del out["format"]
    kind = node.get("type")
    if kind is None and "enum" in out:
        kind = "string"
        out["type"] = kind
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {k: _convert(v, f"{where}.{k}") for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, dict) and extra:
            out["additionalProperties"] = _convert(extra, f"{where}.*")
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        items = node.get("items")
        out["items"] = (_convert(items, f"{where}[]") if isinstance(items, dict) and items
                        else {"x-kubernetes-preserve-unknown-fields": True})
    elif kind is None:
        out.pop("type", None)
        out["x-kubernetes-preserve-unknown-fields"] = True
    if nullable:
        out["nullable"] = True
    return out


def structural(schema: dict[str, Any], where: str = "") -> dict[str, Any]:
    """A pydantic JSON schema as a Kubernetes structural OpenAPI v3 schema.

    Raises ``ValueError`` naming the path of a construct that has none (a union of two
    non-null types).
    """
    defs = schema.get("$defs", {})
    return _convert(_inline(copy.deepcopy(schema), defs), where or "(root)")


def _model_schema(model: type[BaseModel] | TypeAdapter[Any]) -> dict[str, Any]:
    if isinstance(model, TypeAdapter):
        return model.json_schema(by_alias=True, mode="validation")
    return model.model_json_schema(by_alias=True, mode="validation")


def maintenance_schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(spec, requests, status)`` structural schemas, generated from core's models."""
    from powerplane.lifecycle import NodeMaintenance

    # core's own models, reached through the public NodeMaintenance
    MaintenanceSpec = NodeMaintenance.model_fields["spec"].annotation
    MaintenanceStatus = NodeMaintenance.model_fields["status"].annotation
    if not (isinstance(MaintenanceSpec, type) and isinstance(MaintenanceStatus, type)):
        raise TypeError("core's NodeMaintenance no longer has model-typed spec and status")

    whole = structural(_model_schema(MaintenanceSpec), "spec")
    props = whole["properties"]
    required = set(whole.get("required", []))
    missing = [f for f in SPEC_FIELDS if f not in props]
    if missing:
        raise ValueError(f"core's MaintenanceSpec has no field {missing[0]!r}")
    spec: dict[str, Any] = {
        "type": "object",
        "description": "What was asked (immutable after creation).",
        "properties": {k: props[k] for k in SPEC_FIELDS},
        "required": [k for k in SPEC_FIELDS if k in required],
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": SPEC_IMMUTABLE}],
    }
    requests: dict[str, Any] = {
        "type": "object",
        "description": "What a person asked after creation: return to service, abandon, "
                       "resolutions of dispatches evidence could not tell.",
        "properties": {k: v for k, v in props.items() if k not in SPEC_FIELDS},
    }
    extra_required = [k for k in required if k not in SPEC_FIELDS]
    if extra_required:
        requests["required"] = sorted(extra_required)
    status = structural(_model_schema(MaintenanceStatus), "status")
    status["description"] = "What the machine did (written through the status subresource)."
    return spec, requests, status


def _object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            **properties,
        },
    }


def _crd(kind: str, plural: str, schema: dict[str, Any], columns: list[dict[str, Any]],
         *, status: bool, short: list[str]) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "shortNames": short},
            "versions": [version],
        },
    }


def crd_manifest() -> dict[str, Any]:
    """The ``NodeMaintenance`` CustomResourceDefinition (``apiextensions.k8s.io/v1``)."""
    spec, requests, status = maintenance_schemas()
    schema = _object_schema({"spec": spec, "requests": requests, "status": status}, ["spec"])
    columns = [
        {"name": "Node", "type": "string", "jsonPath": ".spec.node"},
        {"name": "Intent", "type": "string", "jsonPath": ".spec.intent"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return _crd(KIND, PLURAL, schema, columns, status=True, short=["nm"])


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(w[:1].upper() + w[1:] for w in rest)


def audit_schema() -> dict[str, Any]:
    """The structural schema of a ``MaintenanceAudit``'s ``spec``: core's ``AuditRecord``
    (generated from it) under the wire names of ``AuditRecord.as_dict`` (``on_behalf_of``
    as ``onBehalfOf``; nullable where ``as_dict`` writes null for an empty value).

    Raises ``ValueError`` when ``as_dict`` writes a key no field of the record names (the
    schema would prune it)."""
    spec = structural(_model_schema(TypeAdapter(AuditRecord)), "spec")
    blank = AuditRecord(actor="", action=next(iter(Action)), reason="", node="").as_dict()
    props = {_camel(k): v for k, v in spec["properties"].items()}
    if set(props) != set(blank):
        odd = sorted(set(props) ^ set(blank))
        raise ValueError(f"core's AuditRecord.as_dict and its fields differ at {odd}")
    for key, value in blank.items():
        if value is None:
            props[key] = {**props[key], "nullable": True}
    props.update(_CHAIN_SCHEMA)
    spec["properties"] = props
    if spec.get("required"):
        spec["required"] = [_camel(k) for k in spec["required"]]
    return spec


_CHAIN_SCHEMA: dict[str, Any] = {
    "trail": {"type": "string", "description": "The writer's trail (powerplane_kubernetes."
              "trail): the authenticated user, the host, a token of the writing store."},
    "seq": {"type": "integer", "minimum": 1,
            "description": "The record's place in its trail (1, 2, ...)."},
    "prev": {"type": "string", "description": "SHA-256 (hex) of the entry before it in its "
             "trail over the chain's canonical encoding; empty for the first."},
    "checkpoint": {
        "type": "object", "description": "Where the deployment names a signing key: the "
        "checkpoint sealing the trail up to this record (the entry after it).",
        "required": ["entries", "head", "at", "key"],
        "properties": {"entries": {"type": "integer"}, "head": {"type": "string"},
                       "at": {"type": "string"}, "key": {"type": "string"}}},
    "signature": {"type": "string",
                  "description": "Base64 Ed25519 signature over the checkpoint's encoding."},
}
"""What the chained trail adds to a record's ``spec`` (optional: a record written before
the trail was chained has none, and does not verify)."""


def audit_crd_manifest() -> dict[str, Any]:
    """The ``MaintenanceAudit`` CustomResourceDefinition: one object per audit record."""
    spec = audit_schema()
    spec["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "an audit record is append-only"}]
    schema = _object_schema({"spec": spec}, ["spec"])
    columns = [
        {"name": "Node", "type": "string", "jsonPath": ".spec.node"},
        {"name": "Action", "type": "string", "jsonPath": ".spec.action"},
        {"name": "Actor", "type": "string", "jsonPath": ".spec.actor"},
        {"name": "Outcome", "type": "string", "jsonPath": ".spec.outcome"},
        {"name": "Maintenance", "type": "string", "jsonPath": ".spec.maintenance"},
        {"name": "At", "type": "date", "jsonPath": ".spec.at"},
    ]
    return _crd(AUDIT_KIND, AUDIT_PLURAL, schema, columns, status=False, short=["nmaudit"])


def dispatch_crd_manifest() -> dict[str, Any]:
    """The ``MaintenanceDispatch`` CustomResourceDefinition: one object per ledger entry."""
    from powerplane.lifecycle import NodeMaintenance

    status_model = NodeMaintenance.model_fields["status"].annotation
    status = structural(_model_schema(status_model), "status")  # type: ignore[arg-type]
    before = status["properties"]["dispatches"]["items"]["properties"]["before"]
    spec: dict[str, Any] = {
        "type": "object",
        "description": "One entry of a maintenance's dispatch ledger (immutable).",
        "required": ["maintenance", "node", "kind", "verb", "attempt", "attemptId", "at"],
        "properties": {
            "maintenance": {"type": "string", "description": "The NodeMaintenance."},
            "node": {"type": "string"},
            "kind": {"type": "string", "enum": ["dispatch", "not-applied"],
                     "description": "dispatch: recorded before the verb was sent; "
                                    "not-applied: evidence showed the attempt did not take "
                                    "effect."},
            "verb": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "attemptId": {"type": "string"},
            "at": {"type": "string", "format": "date-time"},
            "runner": {"type": "string"},
            "before": before,
        },
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "a dispatch ledger entry is immutable"}],
    }
    schema = _object_schema({"spec": spec}, ["spec"])
    columns = [
        {"name": "Maintenance", "type": "string", "jsonPath": ".spec.maintenance"},
        {"name": "Kind", "type": "string", "jsonPath": ".spec.kind"},
        {"name": "Verb", "type": "string", "jsonPath": ".spec.verb"},
        {"name": "Attempt", "type": "integer", "jsonPath": ".spec.attempt"},
        {"name": "At", "type": "date", "jsonPath": ".spec.at"},
    ]
    return _crd(DISPATCH_KIND, DISPATCH_PLURAL, schema, columns, status=False,
                short=["nmdispatch"])


def crd_manifests() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions the store needs, ``NodeMaintenance`` first."""
    return [crd_manifest(), audit_crd_manifest(), dispatch_crd_manifest()]
