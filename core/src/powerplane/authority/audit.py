"""Audit records: what a person asked for and who they were, kept apart from what the machine did.

One record per accepted act, written and made durable **before** the act (an act whose
record cannot be written is not performed: :class:`~powerplane.errors.AuditNotRecorded`),
and one per denial (who, what, which rule), rate-limited per identity
(:class:`DenialLimiter`) so a loop cannot fill a disk. The identity is the authenticated
one (:class:`~powerplane.authority.identity.Identity`): user, groups and the platform that
vouched for them; ``on_behalf_of`` is what the requester added in words.

Where records go: the lifecycle store's audit when the deployment has a ``lifecycle:``
section, else an append-only JSON-lines file (:class:`JsonLinesAudit`: ``audit: {path:
FILE}``, by default ``$XDG_STATE_HOME/powerplane/audit.jsonl``), one record a line, each
line written with one ``write`` on a file opened for appending and ``fsync``-ed before the
act. A line (the JSON of :meth:`AuditRecord.as_dict`)::

    {"at": "2026-12-06T21:40:00+00:00", "actor": "alice", "groups": ["plant-eng"],
     "via": "local", "onBehalfOf": null, "action": "servers:reboot", "outcome": "accepted",
     "rule": "role admin allows it (tier admin)", "reason": "kernel update",
     "node": "node-1", "maintenance": "", "source": "Server/node-1", "detail": "...",
     "recordedBy": null}

Records never hold a secret (no config value is copied in).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from powerplane.authority.actions import Action
from powerplane.errors import AuditNotRecorded

__all__ = ["AuditRecord", "AuditSink", "DenialLimiter", "JsonLinesAudit", "default_audit_path"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class AuditRecord:
    """One act a person asked for (accepted), or one they were refused (denied)."""

    actor: str
    """The authenticated user (never a name the requester typed)."""
    action: Action
    reason: str
    node: str
    maintenance: str = ""
    """The maintenance it joins to (empty for a direct call)."""
    source: str = ""
    at: dt.datetime = field(default_factory=_now)
    detail: str = ""
    """What the ceremony added (``hazard acknowledged: ...``), never a secret."""
    groups: tuple[str, ...] = ()
    """The authenticated groups."""
    via: str = "local"
    """Who authenticated the actor: ``local``, ``kubernetes``, ``oidc``."""
    on_behalf_of: str = ""
    """Free text the requester added; it authorized nothing."""
    outcome: str = "accepted"
    """``accepted`` (the act follows its record), ``denied`` (by policy) or
    ``regression`` (a status the executor found contradicting its dispatch ledger)."""
    rule: str = ""
    """The policy rule that decided it."""
    recorded_by: str = ""
    """Who wrote the record, where that is not the actor: the executor (a request whose
    creator wrote no record, a deletion, a regression it found) or a gateway that verified
    the actor itself (``via`` says by what); empty: the actor wrote it."""

    def __post_init__(self) -> None:
        if not self.source:
            object.__setattr__(self, "source", f"Server/{self.node}")
        object.__setattr__(self, "groups", tuple(self.groups))

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (one line of the audit file; ``maintenance audit -o json``)."""
        return {
            "at": self.at.isoformat(),
            "actor": self.actor,
            "groups": list(self.groups),
            "via": self.via,
            "onBehalfOf": self.on_behalf_of or None,
            "action": self.action.value,
            "outcome": self.outcome,
            "rule": self.rule,
            "reason": self.reason,
            "node": self.node,
            "maintenance": self.maintenance,
            "source": self.source,
            "detail": self.detail,
            "recordedBy": self.recorded_by or None,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AuditRecord:
        """A record read back from :meth:`as_dict`'s shape."""
        return cls(
            actor=str(doc["actor"]), action=Action(doc["action"]), reason=str(doc["reason"]),
            node=str(doc["node"]), maintenance=str(doc.get("maintenance") or ""),
            source=str(doc.get("source") or ""), at=dt.datetime.fromisoformat(doc["at"]),
            detail=str(doc.get("detail") or ""), groups=tuple(doc.get("groups") or ()),
            via=str(doc.get("via") or "local"), on_behalf_of=str(doc.get("onBehalfOf") or ""),
            outcome=str(doc.get("outcome") or "accepted"), rule=str(doc.get("rule") or ""),
            recorded_by=str(doc.get("recordedBy") or ""),
        )

    def extra(self) -> dict[str, Any]:
        """The fields beyond the first audit schema's (actor, action, reason, node,
        maintenance, source, at, detail), for a store that keeps them in one column."""
        return {"groups": list(self.groups), "via": self.via,
                "onBehalfOf": self.on_behalf_of or None, "outcome": self.outcome,
                "rule": self.rule, "recordedBy": self.recorded_by or None}


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. :meth:`append` returns once every record is durable, or
    raises :class:`~powerplane.errors.AuditNotRecorded` (then the act is not performed)."""

    description: str

    def append(self, records: Sequence[AuditRecord]) -> None: ...

    def records(self, node: str | None = None) -> list[AuditRecord]: ...


def default_audit_path() -> Path:
    """``$XDG_STATE_HOME/powerplane/audit.jsonl`` (``~/.local/state`` when unset)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".local", "state")
    return Path(base) / "powerplane" / "audit.jsonl"


class JsonLinesAudit:
    """An append-only JSON-lines audit file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.description = f"audit file {self.path}"
        self._lock = threading.Lock()

    def append(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        data = "".join(json.dumps(r.as_dict(), ensure_ascii=False, separators=(",", ":"))
                       + "\n" for r in records).encode("utf-8")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise AuditNotRecorded(
                    f"the audit record could not be written: the folder of {self.path} "
                    f"cannot be made ({exc.strerror or exc}): nothing was done; set "
                    "audit.path in the deployment file to a file this user can append to"
                ) from None
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                             | getattr(os, "O_CLOEXEC", 0), 0o600)
                try:
                    view = memoryview(data)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise AuditNotRecorded(
                    f"the audit record could not be written to {self.path} "
                    f"({exc.strerror or exc}): nothing was done; set audit.path in the "
                    "deployment file to a file this user can append to") from None

    def records(self, node: str | None = None) -> list[AuditRecord]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                rec = AuditRecord.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line of a crashed writer: not a record
            if node is None or rec.node == node:
                out.append(rec)
        return out


class DenialLimiter:
    """At most ``burst`` denial records per identity, then one per ``every_s`` seconds; the
    next one recorded says how many were left out."""

    def __init__(self, burst: int = 20, every_s: float = 6.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.every_s = every_s
        self.clock = clock
        self._buckets: dict[str, tuple[float, float, int]] = {}
        self._lock = threading.Lock()

    def admit(self, who: str) -> int | None:
        """``None``: do not record this denial; else how many were left out before it."""
        with self._lock:
            now = self.clock()
            tokens, last, dropped = self._buckets.get(who, (float(self.burst), now, 0))
            tokens = min(float(self.burst), tokens + (now - last) / self.every_s)
            if tokens < 1.0:
                self._buckets[who] = (tokens, now, dropped + 1)
                return None
            self._buckets[who] = (tokens - 1.0, now, 0)
            return int(dropped)
