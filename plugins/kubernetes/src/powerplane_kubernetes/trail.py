"""The audit trails on the API server: one chained trail per concurrent writer.

Several writers create ``MaintenanceAudit`` objects (:mod:`.audit`): the executor (the
operator's replicas, ``maintenance run`` acting as the executor), a requester about itself
(``maintenance request`` writes its request record), the Servers gateway. Each chains its
own records, as core chains the audit file and the SQLite store's table
(:mod:`powerplane.authority.chain`): every record's ``spec`` carries

* ``trail``: the writer, named ``<user>@<host>/<token>``: the user the API server
  authenticated the writing client as (a ``SelfSubjectReview``: the identity the audit
  admission policy binds the record to, as its actor or as its ``recordedBy``), the host it
  runs on (in a pod, the pod's name) and a token drawn when the store is made;
* ``seq``: the record's place in its trail (1, 2, ...);
* ``prev``: the SHA-256 of the entry before it in its trail (``""`` for the first), taken
  over the chain's canonical encoding of that entry: the record's fields in the order of
  ``AuditRecord.as_dict``, then ``trail``, ``seq`` and ``prev``.

**Why one trail per store a process makes, not one per identity.** The operator's
replicas run concurrently under one ServiceAccount, as can two ``maintenance request``
commands of one person on one machine, or the gateway's workers: two writers appending to
one trail would both chain to the same last record (a fork, which verification must call
tampering), unless every append read the trail's tail and wrote under a lock on the API
server (two more requests per record, and a lock a crashed writer holds). A trail per
writer needs no coordination and no request beyond the record's own ``POST``: within a
store, appends are serialized by a thread lock (the executor writes from worker threads);
the token keeps two processes of one identity on one host (and a process that reuses a
dead one's pid) apart. The Servers gateway, which opens a store per request acting as its
caller, gives the stores of one caller that caller's one trail in its process
(:class:`~powerplane_kubernetes.gateway.KubernetesGateway`). **Why not the site Lease.**
It serializes only the executor's work on a site's nodes: requesters, the gateway and
records of no site's work (a request's record, a denial) are not under it, and a handover
leaves a window in which the old holder may still finish a write; it would fork exactly
where the operator hands over.

A trail ends with its writer; an inspector keeps each trail's head (``powerplane audit
verify`` prints it): a whole trail deleted below the API server, or its newest records cut
off, is caught against the heads kept (as the audit file's tail is), and with a signing
key the last record of each append carries its checkpoint.

**Signed checkpoints.** Where a key is given (:class:`~powerplane.authority.seal.Signer`),
each record carries its checkpoint in the same object (one write: a record and its seal
never part): ``checkpoint`` (``entries``: the entries of the trail up to and including the
record, ``head``: the record's hash, ``at``, ``key``) and ``signature``, the Ed25519
signature over the checkpoint's canonical encoding. Read back, it is the entry after the
record (place ``seq + 1``, its ``prev`` the record's hash), and the next record chains to
it: the trail verifies with core's :func:`~powerplane.authority.chain.verify`, unchanged.

**A write whose outcome is unknown** (no answer, a 5xx): the record may have been stored.
The next append first reads that object by its name: stored, the trail goes on after it;
absent, its place is written again. Nothing is chained to a record that may not exist, and
no place is written twice.

**Reading** (:func:`trails_of`): every object listed, grouped by ``spec.trail`` (objects
with none: one group, which does not verify: written before the trail was chained), each
trail in the order of its records' ``seq`` (then of their ``resourceVersion``: a copy sits
beside its original). A record's place is its ``seq``, which its hash covers: a restore
below the API server gives every object it puts a new ``resourceVersion``, so storage
order says nothing a hash covers.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from powerplane.lifecycle import Action, AuditEntry, AuditRecord, encode_entry
from powerplane_kubernetes.crd import AUDIT_PLURAL, GROUP, TRAIL_LABEL
from powerplane_kubernetes.errors import answer_of

__all__ = ["CHAIN_FIELDS", "NO_TRAIL", "Link", "ObjectEntry", "Sealer", "TrailWriter",
           "trail_name", "trails_of"]

RECORD_KEYS: tuple[str, ...] = tuple(
    AuditRecord(actor="", action=next(iter(Action)), reason="", node="").as_dict())
"""A record's fields, in the order its canonical encoding has them."""
CHAIN_FIELDS = ("trail", "seq", "prev", "checkpoint", "signature")
"""What the chain adds to a ``MaintenanceAudit``'s ``spec``."""
NO_TRAIL = "(records written before the trail was chained)"
"""The group of the objects that name no trail."""


class Sealer(Protocol):
    """What signs a checkpoint (core's ``Signer``)."""

    @property
    def seal(self) -> Any: ...

    def sign(self, body: dict[str, Any]) -> str: ...


def trail_name(user: str, host: str | None = None, token: str | None = None) -> str:
    """The trail of a store writing as ``user`` (see the module docstring)."""
    return (f"{user}@{host or socket.gethostname() or 'unknown-host'}/"
            f"{token or uuid.uuid4().hex[:12]}")


def _hash(doc: dict[str, Any]) -> str:
    """The chain hash of an entry (SHA-256 of its canonical encoding, as core's)."""
    return hashlib.sha256(encode_entry(doc)).hexdigest()


@dataclass(frozen=True)
class Link:
    """Where a trail stands: its last entry's place, hash and time."""

    seq: int = 0
    hash: str = ""
    at: dt.datetime | None = None


class TrailWriter:
    """One writer's trail: chains each record to the last (see the module docstring).

    :meth:`chain` gives a record its chain fields and the link it makes; the caller writes
    it, then says how it went: :meth:`written` (stored), or :meth:`unsure` (no answer: the
    next append asks first), or nothing (refused: nothing stored, the place is free).
    Hold :attr:`lock` from :meth:`chain` to the end of the write."""

    def __init__(self, trail: str) -> None:
        self.trail = trail
        self.tail = Link()
        self.lock = threading.Lock()
        self.pending: tuple[str, Link] | None = None
        """The object of a write whose outcome is unknown, and the link it made."""

    def chain(self, rec: AuditRecord,
              signer: Sealer | None = None) -> tuple[AuditRecord, dict[str, Any], Link]:
        """``rec`` (stamped no earlier than the trail's last entry: time never goes back in
        a trail), the fields to add to its ``spec``, and the link it makes."""
        tail = self.tail
        if tail.at is not None and rec.at < tail.at:
            rec = replace(rec, at=tail.at)
        seq = tail.seq + 1
        fields: dict[str, Any] = {"trail": self.trail, "seq": seq, "prev": tail.hash}
        head = _hash({**rec.as_dict(), **fields})
        link = Link(seq, head, rec.at)
        if signer is not None:
            body = {"entries": seq, "head": head, "at": rec.at.isoformat(),
                    "key": signer.seal.id}
            signature = signer.sign(body)
            fields["checkpoint"] = body
            fields["signature"] = signature
            link = Link(seq + 1, _hash({"checkpoint": body, "signature": signature,
                                        "seq": seq + 1, "prev": head}), rec.at)
        return rec, fields, link

    def written(self, link: Link) -> None:
        self.tail = link
        self.pending = None

    def unsure(self, name: str, link: Link) -> None:
        self.pending = (name, link)

    def append(self, rec: AuditRecord, build: Callable[[AuditRecord], dict[str, Any]],
               create: Callable[[dict[str, Any]], object],
               read: Callable[[str], dict[str, Any] | None],
               signer: Sealer | None = None) -> AuditRecord:
        """Write ``rec`` chained (see the module docstring): ``build`` makes its object,
        ``create`` posts it (what it raises passes to the caller: a refusal leaves the
        place free; no answer makes the next append ``read`` the object first, by name).
        Returns the record as written (its time no earlier than the trail's last)."""
        with self.lock:
            if self.pending is not None:
                name, link = self.pending
                found = read(name)
                spec = (found or {}).get("spec") or {}
                if spec.get("trail") == self.trail and spec.get("seq") == (
                        link.seq - (1 if "checkpoint" in spec else 0)):
                    self.written(link)
                else:
                    self.pending = None
            rec, fields, link = self.chain(rec, signer)
            obj = build(rec)
            obj["spec"].update(fields)
            obj["metadata"].setdefault("labels", {})[TRAIL_LABEL] = _label(self.trail)
            try:
                create(obj)
            except BaseException as exc:
                if not _refused(exc):
                    self.unsure(str(obj["metadata"]["name"]), link)
                raise
            self.written(link)
            return rec


def _label(trail: str) -> str:
    from powerplane_kubernetes.audit import label_value

    return label_value(trail)


def _refused(exc: BaseException) -> bool:
    """Whether the API server answered, refusing: nothing was stored (a 4xx but a
    timeout's 408)."""
    answer = answer_of(exc)
    return answer is not None and 400 <= answer.code < 500 and answer.code != 408


@dataclass
class ObjectEntry(AuditEntry):
    """An entry of a trail and the object that holds it (``where``: ``kubectl get``'s
    ``maintenanceaudits.powerplane.io/<name>``)."""

    where: str = field(default="")


def _at(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def _entries(spec: dict[str, Any], position: int, where: str) -> list[AuditEntry]:
    """The entries one object holds: its record, and its checkpoint where it has one."""
    doc: dict[str, Any] = {k: _at(spec.get(k)) for k in RECORD_KEYS}
    for key in ("trail", "seq", "prev"):
        if key in spec and spec[key] is not None:
            doc[key] = spec[key]
    record = ObjectEntry(position, encode_entry(doc), doc, where=where)
    out: list[AuditEntry] = [record]
    if spec.get("checkpoint") is not None:
        seq = spec.get("seq")
        cp = {"checkpoint": spec["checkpoint"], "signature": spec.get("signature"),
              "seq": seq + 1 if isinstance(seq, int) else None, "prev": record.hash}
        out.append(ObjectEntry(position + 1, encode_entry(cp), cp, where=where))
    return out


def _order(obj: dict[str, Any]) -> tuple[int, int]:
    seq = (obj.get("spec") or {}).get("seq")
    raw = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return (seq if isinstance(seq, int) else 1 << 62, int(raw) if raw.isdigit() else 0)


def trails_of(objects: Iterable[dict[str, Any]]) -> dict[str, list[AuditEntry]]:
    """Each trail's entries, in order (see the module docstring), each naming its object."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        trail = (obj.get("spec") or {}).get("trail")
        groups.setdefault(trail if isinstance(trail, str) and trail else NO_TRAIL,
                          []).append(obj)
    out: dict[str, list[AuditEntry]] = {}
    for trail in sorted(groups):
        entries: list[AuditEntry] = []
        for obj in sorted(groups[trail], key=_order):
            where = (f"{AUDIT_PLURAL}.{GROUP}/"
                     f"{(obj.get('metadata') or {}).get('name') or '?'}")
            spec = obj.get("spec")
            entries.extend(_entries(spec, len(entries) + 1, where) if isinstance(spec, dict)
                           else [ObjectEntry(len(entries) + 1, b"(no spec)", where=where)])
        out[trail] = entries
    return out
