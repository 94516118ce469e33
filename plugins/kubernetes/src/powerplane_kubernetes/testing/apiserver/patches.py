"""Selectors and patches, as the API server reads them.

Lists take a ``labelSelector`` (``=``, ``==``, ``!=``, ``key``, ``!key``, ``in``, ``notin``:
:func:`label_query`) and a ``fieldSelector`` (``=``, ``==``, ``!=`` on the fields in
:data:`FIELDS`: :func:`field_query`; any other field is ``400 BadRequest``, "field label not
supported"). A PodDisruptionBudget's ``LabelSelector`` (``matchLabels``,
``matchExpressions``) is :func:`match_labels`.

A ``PATCH`` is read by its ``Content-Type`` (:func:`patched`): ``application/merge-patch+
json`` (RFC 7386), ``application/json-patch+json`` (RFC 6902, ``jsonpatch``), and
``application/apply-patch+yaml`` (server-side apply, with ``fieldManager``): applied here as
a merge of the body onto the object, so an absent object is created and no field is owned
(no conflict is ever reported, and a field the manager stops naming is kept).
``application/strategic-merge-patch+json`` is a merge patch for the built-in kinds (no
list merge keys) and ``415`` for a custom resource, as the API server answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import yaml

from powerplane_kubernetes.testing.apiserver.common import copy_json

__all__ = [
    "APPLY",
    "FIELDS",
    "JSON_PATCH",
    "MERGE",
    "STRATEGIC",
    "PatchError",
    "field_query",
    "label_query",
    "match_labels",
    "merge_patch",
    "patched",
]

FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}
"""The fields a ``fieldSelector`` may name."""
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch the API server refuses: ``code`` and ``reason`` its answer's."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


def match_labels(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` (matchLabels, matchExpressions) against labels; empty selects all."""
    if selector is None:
        return False  # a PDB without a selector selects nothing (policy/v1 semantics: {} = all)
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        k, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(k) not in values:
            return False
        if op == "NotIn" and labels.get(k) in values:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def _label_test(part: str) -> Callable[[Mapping[str, str]], bool]:
    m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", part)
    if m:
        k, negate = m.group(1), m.group(2) == "notin"
        values = {v.strip() for v in m.group(3).split(",")}
        return lambda labels: (labels.get(k) in values) != negate
    m = re.fullmatch(r"([\w./-]+)\s*(!=|==|=)\s*([\w./-]*)", part)
    if m:
        k, op, value = m.groups()
        return lambda labels: (labels.get(k) == value) != (op == "!=")
    if part.startswith("!"):
        return lambda labels: part[1:] not in labels
    return lambda labels: part in labels


def label_query(query: str) -> Callable[[Mapping[str, str]], bool]:
    """A ``labelSelector`` query string as a predicate."""
    tests = [_label_test(p.strip()) for p in re.split(r",(?![^(]*\))", query) if p.strip()]
    return lambda labels: all(t(labels) for t in tests)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return "" if cur is None else str(cur)


def field_query(query: str) -> Callable[[Mapping[str, Any]], bool] | str:
    """A ``fieldSelector`` query string as a predicate, or the label it does not support."""
    fields: list[tuple[str, str, str]] = []
    for part in filter(None, query.split(",")):
        m = re.fullmatch(r"([\w.]+)\s*(!=|==|=)\s*(.*)", part.strip())
        if m is None or m.group(1) not in FIELDS:
            return m.group(1) if m else part
        fields.append((m.group(1), m.group(2), m.group(3)))
    return lambda obj: all((_field_value(obj, f) == v) == (op != "!=") for f, op, v in fields)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged onto ``target`` (a null removes a key)."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _apply_body(text: str, data: Any) -> dict[str, Any]:
    body = data if isinstance(data, dict) else None
    if body is None:
        try:
            body = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PatchError(400, "BadRequest", f"error decoding YAML: {exc}") from exc
    if not isinstance(body, dict):
        raise PatchError(400, "BadRequest", "the body of the request was not an object")
    return body


def patched(content_type: str, text: str, data: Any, old: dict[str, Any] | None, *,
            custom: bool) -> dict[str, Any]:
    """``old`` with the request's patch applied (``old`` None: only an apply creates).
    :class:`PatchError` for a patch the API server refuses."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == STRATEGIC and custom:
        raise PatchError(415, "UnsupportedMediaType", (
            f"the body of the request was in an unknown format - accepted media types "
            f"include: {JSON_PATCH}, {MERGE}, {APPLY}"))
    if kind not in (MERGE, JSON_PATCH, STRATEGIC, APPLY):
        raise PatchError(415, "UnsupportedMediaType", (
            f"the body of the request was in an unknown format - accepted media types "
            f"include: {JSON_PATCH}, {MERGE}, {APPLY}, {STRATEGIC}"))
    if kind == APPLY:
        body = _apply_body(text, data)
        return body if old is None else merge_patch(old, body)
    if old is None:
        raise KeyError("absent")
    if kind == JSON_PATCH:
        if not isinstance(data, list):
            raise PatchError(400, "BadRequest", "a JSON patch is a list of operations")
        try:
            out = jsonpatch.apply_patch(copy_json(old), data, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchError(422, "Invalid", f"the server rejected our request due to an "
                             f"error in our request: {exc}") from exc
        if not isinstance(out, dict):
            raise PatchError(422, "Invalid", "the patched object is not an object")
        return out
    if not isinstance(data, dict):
        raise PatchError(400, "BadRequest", "the body of the request was not an object")
    found: dict[str, Any] = merge_patch(old, data)
    return found
