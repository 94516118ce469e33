"""Audit records: what a person asked for and who they were, kept apart from what the machine did.

One record per accepted act, written and made durable **before** the act (an act whose
record cannot be written is not performed: :class:`~powerplane.errors.AuditNotRecorded`),
and one per denial (who, what, which rule), repeats of one denial folded into one record
with a count (:mod:`.folding`) so a loop cannot fill a disk, and none is dropped. The
identity is the authenticated one (:class:`~powerplane.authority.identity.Identity`):
user, groups and the platform that vouched for them; ``on_behalf_of`` is what the
requester added in words.

Where records go: the lifecycle store's audit when the deployment has a ``lifecycle:``
section, else an append-only JSON-lines file (:class:`JsonLinesAudit`: ``audit: {path:
FILE}``, by default ``$XDG_STATE_HOME/powerplane/audit.jsonl``), one record a line, the
lines of one call written with one ``write`` on a file opened for appending and
``fsync``-ed once, before the first act. A line (the JSON of :meth:`AuditRecord.as_dict`)::

    {"at": "2026-12-06T21:40:00+00:00", "actor": "alice", "groups": ["plant-eng"],
     "via": "local", "onBehalfOf": null, "action": "servers:reboot", "outcome": "accepted",
     "rule": "role admin allows it (tier admin)", "reason": "kernel update",
     "node": "node-1", "maintenance": "", "source": "Server/node-1", "detail": "...",
     "recordedBy": null}

Records never hold a secret (no config value is copied in).

A fleet call's records are one :class:`AuditBatch`: what its acts share (the identity, the
action, the reason, the outcome, and the time: one clock reading for the call, the time it
was authorized) is held once, and per act only its node and the decision that allowed it.
:func:`encode_records` is the one place a record becomes bytes: every record's line, in
order, in one pass, a batch's shared fields encoded once per decision.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, overload, runtime_checkable

from powerplane.authority.actions import Action
from powerplane.authority.chain import GENESIS, Entry, canonical, entries_of_lines
from powerplane.errors import AuditNotRecorded

if TYPE_CHECKING:
    from powerplane.authority.policy import Decision
    from powerplane.authority.seal import Signer

__all__ = ["AuditBatch", "AuditRecord", "AuditSink", "JsonLinesAudit",
           "default_audit_path", "encode_records", "now"]


def now() -> dt.datetime:
    """The time of a record: aware, UTC (one reading per call's records)."""
    return dt.datetime.now(dt.UTC)


_now = now


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


class AuditBatch(Sequence[AuditRecord]):
    """The accepted (or denied) acts of one call, as records: one identity, action, reason,
    outcome and time for all of them, and per act its node and the :class:`Decision
    <powerplane.authority.policy.Decision>` that decided it (its ``rule`` is the record's).

    A sequence of :class:`AuditRecord` for any sink (each record made when it is read);
    :func:`encode_records` encodes it without making them. Nothing per act: the nodes and
    the decisions are the two sequences it was given (``decisions[i]`` decided
    ``nodes[i]``), no object is made per act.
    """

    __slots__ = ("action", "actor", "at", "decisions", "detail", "groups", "maintenance",
                 "nodes", "on_behalf_of", "outcome", "reason", "source_prefix", "via")

    def __init__(
        self, *, actor: str, action: Action, reason: str, nodes: Sequence[str],
        decisions: Sequence[Decision], at: dt.datetime,
        groups: tuple[str, ...] = (), via: str = "local", on_behalf_of: str = "",
        outcome: str = "accepted", maintenance: str = "", detail: str = "",
    ) -> None:
        self.actor = actor
        self.action = action
        self.reason = reason
        if len(nodes) != len(decisions):
            raise ValueError("an audit batch needs one decision per node")
        self.nodes = nodes
        """The node of each record, in order."""
        self.decisions = decisions
        """The decision of each record (its rule), in the order of :attr:`nodes`."""
        self.at = at
        self.groups = tuple(groups)
        self.via = via
        self.on_behalf_of = on_behalf_of
        self.outcome = outcome
        self.maintenance = maintenance
        self.detail = detail
        self.source_prefix = "Server/"
        """Each record's ``source`` is this and its node (as :class:`AuditRecord`'s default)."""

    def __len__(self) -> int:
        return len(self.nodes)

    @overload
    def __getitem__(self, index: int) -> AuditRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[AuditRecord]: ...

    def __getitem__(self, index: int | slice) -> AuditRecord | list[AuditRecord]:
        if isinstance(index, slice):
            return [self._record(node, decision) for node, decision
                    in zip(self.nodes[index], self.decisions[index], strict=True)]
        return self._record(self.nodes[index], self.decisions[index])

    def __iter__(self) -> Iterator[AuditRecord]:
        record = self._record
        for node, decision in zip(self.nodes, self.decisions, strict=True):
            yield record(node, decision)

    def _record(self, node: str, decision: Decision) -> AuditRecord:
        return AuditRecord(
            actor=self.actor, action=self.action, reason=self.reason, node=node,
            maintenance=self.maintenance, source=self.source_prefix + node, at=self.at,
            detail=self.detail, groups=self.groups, via=self.via,
            on_behalf_of=self.on_behalf_of, outcome=self.outcome, rule=decision.rule)


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""The encoder of every audit line: compact, UTF-8 text as it is (no ``\\u`` escapes but
those JSON requires), keys in the order given."""


def _head(at: dt.datetime, actor: str, groups: tuple[str, ...], via: str, on_behalf_of: str,
          action: Action, outcome: str, rule: str, reason: str) -> str:
    """The JSON of a record's fields before ``node``, without the closing brace: the part
    the records of one call share."""
    return _JSON.encode({
        "at": at.isoformat(), "actor": actor, "groups": list(groups), "via": via,
        "onBehalfOf": on_behalf_of or None, "action": action.value, "outcome": outcome,
        "rule": rule, "reason": reason,
    })[:-1]


@dataclass(frozen=True)
class Tail:
    """Where a trail stands (its last entry): what the next entry chains to."""

    seq: int = 0
    """The last entry's place (0: the trail is empty)."""
    hash: str = GENESIS
    """The last entry's chain hash (``""``: empty)."""
    at: dt.datetime | None = None
    """The last entry's time: no later entry is stamped before it (time never goes back
    in a trail, whichever writer's clock is behind)."""


def encode_records(records: Sequence[AuditRecord], tail: Tail = Tail(),
                   signer: Signer | None = None, *,
                   chained: bool = True) -> tuple[bytes, Tail]:
    """The lines of ``records``, in order, chained to ``tail`` (:mod:`.chain`), as one UTF-8
    buffer, and the trail's new tail: each line the compact JSON of
    :meth:`AuditRecord.as_dict` (keys in its order), then ``seq`` and ``prev``, then a
    newline; with a ``signer``, a signed checkpoint line after them. A record stamped
    before the tail's time is written with the tail's (never back in time).

    The one place a record becomes bytes, one pass over the records: the fields records
    share (everything before ``node``) are encoded once per distinct set (an
    :class:`AuditBatch`: once per decision), and per record only its node, maintenance,
    source, detail and chain fields.

    ``chained=False`` writes the lines as they were before the trail was chained (no
    ``seq``, no ``prev``, no hash, no checkpoint): for the benchmarks alone, which measure
    what the chain costs (a sink's private ``_chained``); no deployment reaches it.
    """
    enc = _JSON.encode
    lines: list[bytes] = []
    add = lines.append
    seq, prev, floor = tail.seq, tail.hash, tail.at
    sha = hashlib.sha256
    if isinstance(records, AuditBatch):
        heads: dict[int, str] = {}
        at = records.at if floor is None or records.at >= floor else floor
        floor = at
        tail_m, tail_d = enc(records.maintenance), enc(records.detail)
        source = enc(records.source_prefix)[:-1]  # the opening quote and the prefix
        shared = (at, records.actor, records.groups, records.via,
                  records.on_behalf_of, records.action, records.outcome)
        last: object = None
        head = ""
        for node, decision in zip(records.nodes, records.decisions, strict=True):
            if decision is not last:  # a fleet's nodes nearly all share one decision
                last = decision
                head = heads.get(id(decision), "")
                if not head:
                    head = heads[id(decision)] = _head(*shared, decision.rule, records.reason)
            name = enc(node)
            if not chained:
                add(f'{head},"node":{name},"maintenance":{tail_m},"source":{source}{name[1:]},'
                    f'"detail":{tail_d},"recordedBy":null}}'.encode())
                continue
            seq += 1
            line = (f'{head},"node":{name},"maintenance":{tail_m},"source":{source}{name[1:]},'
                    f'"detail":{tail_d},"recordedBy":null,"seq":{seq},"prev":"{prev}"}}'
                    ).encode()
            prev = sha(line).hexdigest()
            add(line)
    else:
        found: dict[tuple[Any, ...], str] = {}
        for rec in records:
            at = rec.at if floor is None or rec.at >= floor else floor
            floor = at
            key = (at, rec.actor, rec.groups, rec.via, rec.on_behalf_of, rec.action,
                   rec.outcome, rec.rule, rec.reason)
            head = found.get(key, "")
            if not head:
                head = found[key] = _head(*key)
            if not chained:
                add(f'{head},"node":{enc(rec.node)},"maintenance":{enc(rec.maintenance)},'
                    f'"source":{enc(rec.source)},"detail":{enc(rec.detail)},'
                    f'"recordedBy":{enc(rec.recorded_by or None)}}}'.encode())
                continue
            seq += 1
            line = (f'{head},"node":{enc(rec.node)},"maintenance":{enc(rec.maintenance)},'
                    f'"source":{enc(rec.source)},"detail":{enc(rec.detail)},'
                    f'"recordedBy":{enc(rec.recorded_by or None)},"seq":{seq},'
                    f'"prev":"{prev}"}}').encode()
            prev = sha(line).hexdigest()
            add(line)
    if signer is not None and lines and chained:
        body = {"entries": seq, "head": prev, "at": (floor or _now()).isoformat(),
                "key": signer.seal.id}
        seq += 1
        line = canonical({"checkpoint": body, "signature": signer.sign(body), "seq": seq,
                          "prev": prev})
        prev = sha(line).hexdigest()
        add(line)
    lines.append(b"")
    return b"\n".join(lines), Tail(seq, prev, floor)


def tail_of(last: bytes) -> Tail:
    """The tail a trail's last line gives (``ValueError``: it is not a chained entry)."""
    entry = entries_of_lines([last])[0]
    if entry.seq is None or entry.prev is None:
        raise ValueError("not a chained entry")
    return Tail(entry.seq, entry.hash, entry.at)


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. :meth:`append` returns once every record is durable, or
    raises :class:`~powerplane.errors.AuditNotRecorded` (then the act is not performed)."""

    description: str

    def append(self, records: Sequence[AuditRecord]) -> None: ...

    def records(self, node: str | None = None) -> list[AuditRecord]: ...

    def entries(self) -> list[Entry]:
        """The whole trail as stored, in order (``powerplane audit verify``)."""
        ...


def default_audit_path() -> Path:
    """``$XDG_STATE_HOME/powerplane/audit.jsonl`` (``~/.local/state`` when unset)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".local", "state")
    return Path(base) / "powerplane" / "audit.jsonl"


class JsonLinesAudit:
    """An append-only, chained JSON-lines audit file (see the module docstring).

    ``signer``: where the deployment names a key, each append ends with a signed
    checkpoint (:mod:`.seal`). Appends from several processes are serialized by an
    exclusive ``flock`` on the file: each reads the trail's last line, chains to it, and
    writes and ``fsync``-s its lines before the next may.
    """

    _chained = True
    """False in a benchmark alone (``bench/``: with and without the chain, side by side);
    no deployment option reaches it."""

    def __init__(self, path: str | os.PathLike[str],
                 signer: Signer | Callable[[], Signer] | None = None) -> None:
        self.path = Path(path)
        self.description = f"audit file {self.path}"
        self._signer = signer
        self._lock = threading.Lock()

    @property
    def signer(self) -> Signer | None:
        """The key that seals each append (loaded on first use), or None."""
        if callable(self._signer) and not hasattr(self._signer, "sign"):
            self._signer = self._signer()
        return self._signer  # type: ignore[return-value]

    def append(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
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
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT
                             | getattr(os, "O_CLOEXEC", 0), 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # one appender of the trail at a time
                    if self._chained:
                        data, _ = encode_records(records, self._tail(fd), self.signer)
                    else:
                        data, _ = encode_records(records, chained=False)
                    view = memoryview(data)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                    os.fsync(fd)
                finally:
                    os.close(fd)  # the lock goes with it
            except OSError as exc:
                raise AuditNotRecorded(
                    f"the audit record could not be written to {self.path} "
                    f"({exc.strerror or exc}): nothing was done; set audit.path in the "
                    "deployment file to a file this user can append to") from None

    def _tail(self, fd: int) -> Tail:
        """The trail's tail: its last line read from the end (a trail whose last line is
        not a chained entry fails to append: nothing is chained to what cannot be
        named)."""
        size = os.fstat(fd).st_size
        if size == 0:
            return Tail()
        chunk = 4096
        while True:
            start = max(0, size - chunk)
            data = os.pread(fd, size - start, start)
            body = data.rstrip(b"\n")
            cut = body.rfind(b"\n")
            if cut >= 0 or start == 0:
                last = body[cut + 1:]
                break
            chunk *= 4
        try:
            return tail_of(last)
        except (ValueError, IndexError):
            raise AuditNotRecorded(
                f"the audit file {self.path} does not end with a chained record (a line "
                "written before the trail was chained, or one damaged): nothing is chained "
                "to it, and nothing was done; run `powerplane audit verify`, keep the file, "
                "and start a new one") from None

    def entries(self) -> list[Entry]:
        """Every entry of the trail, as stored (for :func:`~.chain.verify`)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return entries_of_lines(data.split(b"\n"))

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
                doc = json.loads(line)
                if "checkpoint" in doc:
                    continue
                rec = AuditRecord.from_dict(doc)
            except (ValueError, KeyError, TypeError):
                continue  # not a record: `powerplane audit verify` says which and why
            if node is None or rec.node == node:
                out.append(rec)
        return out
