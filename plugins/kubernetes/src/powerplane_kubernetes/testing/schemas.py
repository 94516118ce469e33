"""Validate what a port wrote against Kubernetes' own OpenAPI schemas (``kubernetes-validate``).

A merge patch is a partial object; it is checked as the object it is applied to, with the
patch's fields over the ``apiVersion``/``kind``/``metadata.name`` the path names, so a
field of the wrong type or one the schema does not have fails (the strict schemas refuse
unknown fields). Custom resources (Longhorn's) have no schema in ``kubernetes-validate``:
they are returned as not checked, never passed silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no py.typed

from powerplane_kubernetes.testing.apiserver import RecordedRequest

__all__ = ["KUBERNETES_VERSION", "validate_written"]

KUBERNETES_VERSION = "1.33.0"
"""The Kubernetes version whose schemas the written objects are checked against."""

_CORE = {
    "nodes": ("v1", "Node"),
    "pods": ("v1", "Pod"),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget"),
}


def _document(request: RecordedRequest) -> dict[str, Any] | None:
    parts = request.path.strip("/").split("/")
    body = request.body if isinstance(request.body, dict) else None
    if body is None:
        return None
    if parts[-1] == "eviction":
        return body
    if parts[0] != "api":
        return None  # a custom resource: no schema here
    plural, name = (parts[-2], parts[-1]) if request.method in ("PATCH", "PUT") else \
        (parts[-1], None)
    if plural not in _CORE:
        return None
    api_version, kind = _CORE[plural]
    doc = {"apiVersion": api_version, "kind": kind, **body}
    doc["metadata"] = {**({"name": name} if name else {}), **(body.get("metadata") or {})}
    return doc


def validate_written(requests: Iterable[RecordedRequest]) -> tuple[int, list[str]]:
    """Check every written body; returns (how many were checked, the ones not checked).

    Raises ``kubernetes_validate.ValidationError`` on the first body the schema refuses.
    """
    checked, unchecked = 0, []
    for request in requests:
        if request.method not in ("POST", "PUT", "PATCH"):
            continue
        doc = _document(request)
        if doc is None:
            unchecked.append(str(request))
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked += 1
    return checked, unchecked
