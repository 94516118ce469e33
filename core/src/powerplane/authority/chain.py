"""The chained trail: every audit record names the hash of the one before it in its trail.

A trail (the audit file, the lifecycle store's audit table, one Kubernetes writer's records)
is a sequence of entries, each a JSON object in its **canonical encoding**: compact JSON
(``,`` and ``:`` with no space), UTF-8 as it is (no ``\\u`` escapes but those JSON needs),
keys in the order :meth:`~powerplane.authority.audit.AuditRecord.as_dict` gives them, and
last the two chain fields: ``seq``, the entry's place in its trail (1, 2, ...), and
``prev``, the SHA-256 (hex) of the canonical encoding of the entry before it in the trail,
or ``""`` for the trail's first. An audit file's line *is* that encoding; a store rebuilds
it from its columns, byte for byte.

Two kinds of entry: a **record** (an act or a denial) and a **checkpoint**, written after
each append where the deployment names a signing key (:mod:`.seal`)::

    {"checkpoint":{"entries":1234,"head":"<hash of the entry before>","at":"2026-...",
     "key":"<key id>"},"signature":"<base64 Ed25519 over the checkpoint's encoding>",
     "seq":1235,"prev":"<hash of the entry before>"}

:func:`verify` walks a trail and names the first bad entry by its position (1-based) and
what is wrong: changed, missing (deleted), out of order, inserted (a copy), time going
backwards, not readable, a checkpoint whose signature does not verify or whose signer is
unknown. What the chain alone catches, and what only a signed checkpoint does, is in
docs/reference/authority.md ("Audit records: the chained trail").
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GENESIS", "Entry", "Verdict", "canonical", "digest", "entries_of_lines", "verify"]

GENESIS = ""
"""The ``prev`` of a trail's first entry."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def canonical(doc: dict[str, Any]) -> bytes:
    """The canonical encoding of an entry (``doc`` with its ``prev``, keys in order)."""
    return _ENCODER.encode(doc).encode("utf-8")


def digest(encoded: bytes) -> str:
    """The chain hash of an entry's canonical encoding (SHA-256, hex)."""
    return hashlib.sha256(encoded).hexdigest()


@dataclass
class Entry:
    """One entry of a trail as read back: its position, its bytes (the canonical encoding
    as stored, or rebuilt from a store's columns) and what it says."""

    position: int
    """1-based, in the trail's order."""
    raw: bytes
    doc: dict[str, Any] | None = None
    """The parsed entry (None: not readable JSON)."""
    hash: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.hash = digest(self.raw)

    @property
    def prev(self) -> str | None:
        found = self.doc.get("prev") if self.doc is not None else None
        return found if isinstance(found, str) else None

    @property
    def seq(self) -> int | None:
        found = self.doc.get("seq") if self.doc is not None else None
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    @property
    def is_checkpoint(self) -> bool:
        return self.doc is not None and "checkpoint" in self.doc

    @property
    def at(self) -> dt.datetime | None:
        if self.doc is None:
            return None
        raw = (self.doc["checkpoint"].get("at") if self.is_checkpoint
               else self.doc.get("at"))
        try:
            found = dt.datetime.fromisoformat(str(raw))
        except ValueError:
            return None
        return found if found.tzinfo is not None else found.replace(tzinfo=dt.UTC)


def entries_of_lines(lines: Iterable[bytes]) -> list[Entry]:
    """A trail's entries from the lines of a file (blank lines skipped)."""
    out: list[Entry] = []
    for raw in lines:
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            doc = None
        out.append(Entry(len(out) + 1, line, doc if isinstance(doc, dict) else None))
    return out


@dataclass
class Verdict:
    """What :func:`verify` found."""

    intact: bool
    records: int
    """How many records the trail holds (checkpoints aside)."""
    head: str
    """The hash of the trail's last entry (``""``: empty)."""
    first_bad: int | None = None
    """The position of the first bad entry (1-based)."""
    problem: str = ""
    """What is wrong with it, in words."""
    checkpoints: int = 0
    """Checkpoints whose signature verified."""
    unsealed: int = 0
    """Records after the last verified checkpoint (none where no key is configured)."""
    sealed: bool = False
    """Whether the trail was checked against a signing key."""

    def as_dict(self) -> dict[str, Any]:
        return {"intact": self.intact, "records": self.records, "head": self.head,
                "firstBad": self.first_bad, "problem": self.problem or None,
                "checkpoints": self.checkpoints, "unsealed": self.unsealed,
                "sealed": self.sealed}

    def words(self, where: str) -> str:
        """One line for people."""
        if not self.intact:
            return (f"{where}: NOT intact: entry {self.first_bad}: {self.problem} "
                    f"({self.records} records read)")
        sealed = ""
        if self.sealed:
            sealed = (f"; {self.checkpoints} signed checkpoint(s) verified"
                      + (f", {self.unsealed} record(s) after the last one" if self.unsealed
                         else ""))
        return (f"{where}: intact: {self.records} record(s), every one chained to the one "
                f"before{sealed}; head {self.head[:16] or '(empty)'}")


def _describe(entry: Entry) -> str:
    doc = entry.doc or {}
    if entry.is_checkpoint:
        return "a checkpoint"
    return (f"{doc.get('action', '?')} of {doc.get('node', '?')} by {doc.get('actor', '?')} "
            f"at {doc.get('at', '?')}")


def _out_of_place(entries: Sequence[Entry], i: int, expected: int) -> str:
    """Why entry ``i`` carries another sequence number than ``expected``."""
    entry = entries[i]
    seq = entry.seq or 0
    for e in entries[:i]:
        if e.raw == entry.raw:
            return f"inserted: a copy of entry {e.position} ({_describe(e)})"
    if seq < expected:
        return (f"out of order or inserted: it carries place {seq} where place {expected} "
                "was due")
    if any(e.seq == expected for e in entries[i + 1:]):
        return (f"out of order: it carries place {seq}; place {expected} comes later in "
                "the trail")
    gap = seq - expected
    return (f"missing: {gap} entr{'y' if gap == 1 else 'ies'} before it "
            f"(place{'' if gap == 1 else 's'} {expected}"
            f"{'' if gap == 1 else f'-{seq - 1}'}) not in the trail (deleted)")


def verify(entries: Sequence[Entry], *, seal: Any = None) -> Verdict:
    """Walk ``entries`` (a whole trail, in order) and say whether it is intact (see the
    module docstring). ``seal``: a :class:`~powerplane.authority.seal.Seal` to check the
    checkpoints against (None: no key; checkpoints are chained but their signatures are not
    checked, and the verdict says so)."""
    records = sum(1 for e in entries if not e.is_checkpoint)
    head = entries[-1].hash if entries else GENESIS
    verdict = Verdict(True, records, head, sealed=seal is not None)
    expected = GENESIS
    last_at: dt.datetime | None = None
    since_checkpoint = 0
    first_unsealed = 0
    for i, entry in enumerate(entries):
        if entry.doc is None:
            return _bad(verdict, entry.position, "not readable: not a JSON object (torn "
                        "or edited)")
        if entry.prev is None or entry.seq is None:
            return _bad(verdict, entry.position, "it carries no chain fields (seq, prev): "
                        "written before the trail was chained, or stripped")
        if entry.seq != i + 1:
            return _bad(verdict, entry.position, _out_of_place(entries, i, i + 1))
        if entry.prev != expected:
            if i == 0:
                return _bad(verdict, entry.position, "it names an entry before it that is "
                            "not in the trail: the trail's beginning is missing")
            before = entries[i - 1]
            return _bad(verdict, before.position,
                        f"changed: its content no longer matches the hash the entry after it "
                        f"names ({_describe(before)})")
        at = entry.at
        if at is None:
            return _bad(verdict, entry.position, "its time is not readable")
        if last_at is not None and at < last_at:
            return _bad(verdict, entry.position,
                        f"time going backwards: {at.isoformat()} after "
                        f"{last_at.isoformat()}")
        last_at = at
        if entry.is_checkpoint:
            problem = _checkpoint_problem(entry, i, entries[i - 1] if i else None, seal)
            if problem:
                return _bad(verdict, entry.position, problem)
            if seal is not None:
                verdict.checkpoints += 1
                since_checkpoint = 0
        else:
            if since_checkpoint == 0:
                first_unsealed = entry.position
            since_checkpoint += 1
        expected = entry.hash
    verdict.unsealed = since_checkpoint if seal is not None else 0
    if verdict.unsealed:  # with a key, every append ends with its checkpoint
        return _bad(verdict, first_unsealed,
                    f"not sealed: {verdict.unsealed} record(s) at the end are not covered "
                    "by a signed checkpoint (the checkpoint after them was cut off, or they "
                    "were written without the key)")
    return verdict


def _checkpoint_problem(entry: Entry, entries_before: int, before: Entry | None,
                        seal: Any) -> str:
    assert entry.doc is not None
    body = entry.doc.get("checkpoint")
    if not isinstance(body, dict):
        return "a checkpoint without its fields"
    if body.get("entries") != entries_before:
        return (f"a checkpoint counting {body.get('entries')} entries where the trail holds "
                f"{entries_before} before it")
    if body.get("head") != (before.hash if before is not None else GENESIS):
        return "a checkpoint naming another head than the entry before it"
    if seal is None:
        return ""
    return str(seal.problem(body, entry.doc.get("signature")) or "")


def _bad(verdict: Verdict, position: int, problem: str) -> Verdict:
    verdict.intact = False
    verdict.first_bad = position
    verdict.problem = problem
    return verdict
