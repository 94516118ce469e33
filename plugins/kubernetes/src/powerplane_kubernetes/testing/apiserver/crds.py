"""CustomResourceDefinitions as the test API server serves them.

:class:`CrdInfo` is what the server keeps of an installed CRD's served version: its scope,
its ``openAPIV3Schema``, whether the ``status`` subresource is on, and the one CEL rule it
emulates. A write is *pruned* of fields the schema does not have (:func:`prune`, as a
structural schema prunes) and then validated against it (``jsonschema-rs``, with the schema
made JSON Schema by :func:`openapi_to_jsonschema`); :func:`crd_admit` answers ``422
Invalid`` naming the field. :func:`crd_update` is what an update leaves of the object:
with the status subresource, the main resource never writes ``status`` and ``…/status``
writes only ``status`` (its other changes, metadata included, are dropped, as the API
server's status strategy does); ``metadata.generation`` grows when anything but metadata
and status changes.

The CEL rules of a CRD (``x-kubernetes-validations``) are not run: the one rule these CRDs
use, ``self == oldSelf`` on a top-level field (``spec`` immutable), is emulated with the
API server's wording, and a CRD with any other rule is refused at install, never passed
silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from powerplane_kubernetes.testing.apiserver.common import Response, copy_json, status

__all__ = ["CrdInfo", "crd_admit", "crd_update", "openapi_to_jsonschema", "prune"]


def openapi_to_jsonschema(node: Any) -> Any:
    """An OpenAPI v3 (Kubernetes structural) schema as JSON Schema: ``nullable`` as a
    ``null`` type, the ``x-kubernetes-*`` extensions dropped (after pruning, unknown fields
    are gone, so what is left must match exactly)."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: openapi_to_jsonschema(v) for k, v in node.items()
           if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if node.get("type") == "object" and "properties" in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def prune(obj: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Drop the fields of ``obj`` that ``schema`` does not know (a structural schema's
    pruning), in place; returns the dropped paths. ``metadata`` at the root is the API
    server's own and is left alone."""
    dropped: list[str] = []
    if not isinstance(obj, dict) and not isinstance(obj, list):
        return dropped
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return dropped
    if isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(obj):
                dropped += prune(item, items, f"{path}[{i}]")
        return dropped
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for name in list(obj):
        where = f"{path}.{name}" if path else name
        if not path and name in ("apiVersion", "kind", "metadata"):
            continue
        if isinstance(props, Mapping):
            if name not in props:
                del obj[name]
                dropped.append(where)
                continue
            dropped += prune(obj[name], props[name], where)
        elif isinstance(extra, Mapping):
            dropped += prune(obj[name], extra, where)
    return dropped


@dataclass
class CrdInfo:
    """What the server knows of an installed CustomResourceDefinition's served version."""

    resource: str
    """``group/version/plural``."""
    kind: str
    namespaced: bool
    schema: dict[str, Any]
    """The version's ``openAPIV3Schema``."""
    status: bool
    """Whether the ``status`` subresource is enabled."""
    immutable: dict[str, str]
    """Top-level fields with the CEL rule ``self == oldSelf``: field -> its message."""
    _validator: list[Any] = field(default_factory=list, repr=False, compare=False)

    def validator(self) -> jsonschema_rs.Draft7Validator:
        """The JSON Schema validator of :attr:`schema` (``metadata`` the API server's),
        made at its first use and kept: a CRD applied again is a new :class:`CrdInfo`.
        ``jsonschema-rs`` (compiled; the same Draft 7 semantics as ``jsonschema``, at a
        hundredth of its time per object): the server's own cost per write stays small
        beside its clients' (a benchmark measures them apart)."""
        if not self._validator:
            schema = openapi_to_jsonschema(self.schema)
            schema["properties"]["metadata"] = {"type": "object"}
            self._validator.append(jsonschema_rs.Draft7Validator(schema))
        validator: jsonschema_rs.Draft7Validator = self._validator[0]
        return validator

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> list[CrdInfo]:
        spec = manifest["spec"]
        out = []
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = version["schema"]["openAPIV3Schema"]
            immutable: dict[str, str] = {}
            for where, node in _validations(schema):
                for rule in node.get("x-kubernetes-validations") or []:
                    top = where.count(".") == 0 and where != ""
                    if rule.get("rule") != "self == oldSelf" or not top:
                        raise ValueError(
                            f"kmock emulates no CEL but 'self == oldSelf' on a "
                            f"top-level field (nor does this server for a CRD); "
                            f"{spec['names']['plural']}.{spec['group']} has "
                            f"{rule.get('rule')!r} at {where or '(root)'}")
                    immutable[where] = str(rule.get("message") or "Invalid value")
            out.append(cls(
                resource=f"{spec['group']}/{version['name']}/{spec['names']['plural']}",
                kind=spec["names"]["kind"], namespaced=spec["scope"] == "Namespaced",
                schema=schema, status="status" in (version.get("subresources") or {}),
                immutable=immutable))
        return out


def _validations(schema: Mapping[str, Any], path: str = "") -> Iterator[
        tuple[str, Mapping[str, Any]]]:
    if schema.get("x-kubernetes-validations"):
        yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _validations(sub, f"{path}.{name}" if path else name)
    for name in ("items", "additionalProperties"):
        sub = schema.get(name)
        if isinstance(sub, Mapping):
            yield from _validations(sub, f"{path}[]")


def crd_update(crd: CrdInfo, old: dict[str, Any], new: dict[str, Any],
               to_status: bool) -> dict[str, Any]:
    """The object an update leaves: the status subresource writes only ``status``, the
    main resource everything but ``status``; ``generation`` follows the content."""
    if crd.status and to_status:
        out: dict[str, Any] = copy_json(old)
        if "status" in new:
            out["status"] = new["status"]
        else:
            out.pop("status", None)
        out["metadata"]["resourceVersion"] = new.get("metadata", {}).get("resourceVersion")
        return out
    if crd.status:
        if "status" in old:
            new["status"] = copy_json(old["status"])
        else:
            new.pop("status", None)
    meta = new.setdefault("metadata", {})
    generation = int(old.get("metadata", {}).get("generation") or 1)
    content = {k: v for k, v in new.items() if k not in ("metadata", "status")}
    before = {k: v for k, v in old.items() if k not in ("metadata", "status")}
    meta["generation"] = generation + (1 if content != before else 0)
    return new


def crd_admit(crd: CrdInfo, old: dict[str, Any] | None, new: dict[str, Any],
              where: str, pruned: list[tuple[str, str]]) -> Response | None:
    """Prune ``new`` (the dropped paths appended to ``pruned`` with ``where``), check the
    emulated immutable fields against ``old``, validate against the schema: the API
    server's ``422 Invalid`` naming the field, or None."""
    name = new.get("metadata", {}).get("name", "")
    what = f'{crd.kind}.{crd.resource.split("/")[0]} "{name}" is invalid'
    pruned += [(where, path) for path in prune(new, crd.schema)]
    if old is not None:
        for field_name, message in crd.immutable.items():
            if field_name in old and new.get(field_name) != old.get(field_name):
                cause = f'Invalid value: "object": {message}'
                return status(422, "Invalid", f"{what}: {field_name}: {cause}", {
                    "name": name, "group": crd.resource.split("/")[0], "kind": crd.kind,
                    "causes": [{"reason": "FieldValueInvalid", "message": cause,
                                "field": field_name}]})
    errors = sorted(crd.validator().iter_errors(new), key=lambda e: list(e.instance_path))
    if errors:
        first = errors[0]
        path = ".".join(str(p) for p in first.instance_path) or "(root)"
        return status(422, "Invalid", f"{what}: {path}: Invalid value: {first.message}",
                      {"name": name, "kind": crd.kind, "causes": [
                          {"reason": "FieldValueInvalid", "field": path,
                           "message": f"Invalid value: {e.message}"} for e in errors[:20]]})
    return None
