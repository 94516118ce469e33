"""The audit trail on the API server: a ``MaintenanceAudit`` object per record, and an Event.

Core's audit records are a compliance record: append-only, and they outlive the
maintenance they name. The store writes each one twice:

* a cluster-scoped ``MaintenanceAudit`` (``maintenanceaudits.powerplane.io``, schema in
  :mod:`.crd`): the durable record. It has no ``ownerReferences``, so the garbage
  collector never removes it with its ``NodeMaintenance``; its ``spec`` is immutable; it is
  labelled with the node (and the maintenance) so :meth:`AuditTrail.records` lists one
  node's trail with a label selector. Records read back in the order they were committed:
  by ``metadata.resourceVersion``, which the API server assigns in commit order and, for
  objects of one resource, compares as an integer (KEP-5504, stable in Kubernetes 1.35;
  an audit object is never updated, so its version is its creation's);
* a ``core/v1`` Event whose ``involvedObject`` is the ``NodeMaintenance`` (``kubectl
  describe nodemaintenance`` shows it). Events expire (an hour by default) and are a
  notification, not the record: one that cannot be written is logged and the write goes on.

Why not Events alone: they expire and may be deduplicated; why not a list inside the
``NodeMaintenance``: it would be deleted with the object. Neither ever holds a secret (an
audit record holds none by contract).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import socket
import uuid
from typing import Any

from powerplane.lifecycle import Action, AuditRecord
from powerplane_kubernetes.crd import (
    AUDIT_KIND,
    AUDIT_PLURAL,
    GROUP,
    KIND,
    MAINTENANCE_LABEL,
    NODE_LABEL,
    VERSION,
)

__all__ = [
    "EVENT_COMPONENT",
    "audit_object",
    "event_object",
    "label_value",
    "object_name",
    "record_of",
    "request_record_name",
]

EVENT_COMPONENT = "powerplane"
"""``source.component`` and ``reportingComponent`` of the Events written."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_CHARS = re.compile(r"[^a-z0-9.-]+")


def label_value(value: str) -> str:
    """``value`` as a label value: itself when it is one (63 characters at most, letters,
    digits, ``-_.``), else ``h-`` and 40 hex digits of its SHA-256 (readers compare the
    object's own field, so a hash never makes two nodes one)."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return value
    return "h-" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:40]


def object_name(base: str, suffix: str, limit: int = 253) -> str:
    """A DNS subdomain name from ``base`` (lower-cased, other characters as ``-``) and
    ``suffix``, within ``limit`` characters."""
    clean = _NAME_CHARS.sub("-", base.lower()).strip("-.") or "x"
    room = limit - len(suffix) - 1
    return f"{clean[:room].rstrip('-.')}-{suffix}"


def _reason_word(action: Action) -> str:
    words = re.split(r"[^A-Za-z0-9]+", action.value.split(":", 1)[-1])
    return "".join(w[:1].upper() + w[1:] for w in words if w)


def _seconds(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def audit_object(rec: AuditRecord, name: str | None = None) -> dict[str, Any]:
    """The ``MaintenanceAudit`` object of one record (its name unique, never reused; or
    ``name``: a record that must exist once whoever writes it, as a request's)."""
    labels = {NODE_LABEL: label_value(rec.node)}
    if rec.maintenance:
        labels[MAINTENANCE_LABEL] = label_value(rec.maintenance)
    stamp = rec.at.astimezone(dt.UTC).strftime("%Y%m%d%H%M%S%f")
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": AUDIT_KIND,
        "metadata": {
            "name": name or object_name(rec.maintenance or rec.node,
                                        f"{stamp}-{uuid.uuid4().hex[:8]}"),
            "labels": labels,
        },
        "spec": rec.as_dict(),
    }


def request_record_name(maintenance: str) -> str:
    """The name of a maintenance's request record (``<maintenance>-request``): its creator
    and the operator write it under this one name, so a second write is a ``409``, never a
    second record."""
    return object_name(maintenance, "request")


def record_of(obj: dict[str, Any]) -> AuditRecord:
    """The audit record an ``MaintenanceAudit`` object holds (``ValueError``: not one).

    Its ``spec`` is ``AuditRecord.as_dict``'s shape; a record written before identities
    were recorded (no ``groups``, ``via``, ``onBehalfOf``, ``outcome``, ``rule``) reads back
    with their defaults: no groups, ``local``, accepted."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{AUDIT_PLURAL}.{GROUP} object without a spec")
    return AuditRecord.from_dict({**spec, "at": str(spec["at"])})


def event_object(rec: AuditRecord, namespace: str,
                 involved: dict[str, Any] | None) -> dict[str, Any]:
    """The ``core/v1`` Event of one record, about the ``NodeMaintenance`` ``involved``
    (its ``metadata``; None: about the Node, as a record without a maintenance is).

    A legacy-style Event (``firstTimestamp``/``lastTimestamp``/``count``, no ``eventTime``),
    which every API server version accepts and ``kubectl describe`` shows. A record the
    policy denied is a ``Warning`` (reason ``RebootDenied``, the rule in its message), never
    worded as an act that was done."""
    if involved is not None:
        ref: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                               "name": involved.get("name", rec.maintenance)}
        for key in ("uid", "resourceVersion"):
            if involved.get(key):
                ref[key] = involved[key]
    else:
        ref = {"apiVersion": "v1", "kind": "Node", "name": rec.node}
    denied = rec.outcome != "accepted"
    words = f"{rec.action.value} {rec.outcome} to {rec.actor}" if denied \
        else f"{rec.action.value} by {rec.actor}"
    if rec.on_behalf_of:
        words += f" on behalf of {rec.on_behalf_of}"
    words += f": {rec.reason}"
    if rec.detail:
        words += f" ({rec.detail})"
    if denied and rec.rule:
        words += f" [{rec.rule}]"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": object_name(str(ref["name"]), uuid.uuid4().hex[:16]),
                     "namespace": namespace},
        "involvedObject": ref,
        "reason": _reason_word(rec.action) + (rec.outcome.capitalize() if denied else ""),
        "message": words[:1024],
        "type": "Warning" if denied else "Normal",
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": socket.gethostname()[:128] or EVENT_COMPONENT,
        "action": rec.action.value,
        "firstTimestamp": _seconds(rec.at),
        "lastTimestamp": _seconds(rec.at),
        "count": 1,
    }
