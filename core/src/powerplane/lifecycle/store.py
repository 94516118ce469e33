"""The embedded store: SQLite, one row per maintenance plus an append-only audit table.

Every write of a maintenance names the resource version it read; a write that finds
another version raises the private signal :class:`_Conflict` (optimistic concurrency, so
several runners may reconcile at once): the writer reads again and retries; it never
reaches a person (one that retrying does not settle is :class:`ConcurrentChange`).
A partial unique index keeps one active maintenance per node.
The database runs in WAL mode, so a process killed at any point loses nothing committed.

:meth:`Store.active_phases` (which the guard asks before every step) answers from the rows
it last read, with this connection's own committed writes applied, while SQLite's
``PRAGMA data_version`` says no other connection (of this process or another) has
committed since; otherwise it reads them again.

A store that cannot be used (not an SQLite file, a directory, read-only, under a regular
file, locked by another process past ``lifecycle.busy_timeout_s``) raises
:class:`StoreError`, naming the file and the cause (exit 1). A value that is not text
(a name or reason holding bytes no encoding produced) is :class:`InvalidText` (exit 2, bad
input): the store is called damaged only when a row it holds does not read back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError

from powerplane.authority.audit import Tail
from powerplane.authority.chain import Entry, canonical, digest
from powerplane.errors import LifecycleError
from powerplane.lifecycle.audit import Action, AuditRecord
from powerplane.lifecycle.ledger import (
    DISPATCH,
    NOT_APPLIED,
    LedgerConflict,
    LedgerEntry,
    LedgerKind,
)
from powerplane.lifecycle.model import (
    TERMINAL_PHASES,
    Dispatch,
    Evidence,
    NodeMaintenance,
    Phase,
    utcnow,
)

if TYPE_CHECKING:
    from powerplane.authority.seal import Signer
    from powerplane.lifecycle.ports import MaintenanceStore

__all__ = ["AlreadyActive", "ConcurrentChange", "InvalidText", "NotFound", "Store",
           "StoreError", "find_maintenance"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS maintenance (
    name TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    phase TEXT NOT NULL,
    active INTEGER NOT NULL,
    resource_version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_active_per_node ON maintenance(node) WHERE active = 1;
CREATE INDEX IF NOT EXISTS by_node ON maintenance(node, created_at);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    node TEXT NOT NULL,
    maintenance TEXT NOT NULL,
    source TEXT NOT NULL,
    detail TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS dispatch_ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    maintenance TEXT NOT NULL,
    kind TEXT NOT NULL,
    verb TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    attempt_id TEXT NOT NULL,
    at TEXT NOT NULL,
    runner TEXT NOT NULL,
    before TEXT,
    UNIQUE (maintenance, kind, verb, attempt)
);
CREATE TRIGGER IF NOT EXISTS dispatch_ledger_no_update BEFORE UPDATE ON dispatch_ledger
BEGIN SELECT RAISE(ABORT, 'the dispatch ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS dispatch_ledger_no_delete BEFORE DELETE ON dispatch_ledger
BEGIN SELECT RAISE(ABORT, 'the dispatch ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""


_PHASE_OF: dict[str, Phase] = {p.value: p for p in Phase}
"""A phase by its stored value (one dict lookup per row, not an enum call)."""


def _phase(value: str) -> Phase:
    """The phase stored as ``value``; a value no phase has raises ``ValueError`` (a
    damaged row, which the store reports as such)."""
    found = _PHASE_OF.get(value)
    return found if found is not None else Phase(value)


_UPDATE = ("UPDATE maintenance SET phase = ?, active = ?, resource_version = ?, updated_at = ?, "
           "body = ? WHERE name = ? AND resource_version = ?")


class _Conflict(Exception):
    """Signal: another writer changed the maintenance since it was read; read again, retry.

    Not an error of the tree (not a :class:`~powerplane.errors.PowerplaneError`): the
    service and the reconciler retry on it, and never show it to a person.
    """


StoreConflict = _Conflict
"""The signal's name where the service, the reconciler and tests import it."""


class ConcurrentChange(LifecycleError):
    """Other writers kept changing the maintenance and retrying did not settle: nothing was
    recorded; try again (exit 1)."""

    exit_code = 1


class AlreadyActive(LifecycleError):
    """The node already has an active maintenance."""

    exit_code = 2

    def __init__(self, node: str, name: str) -> None:
        self.node = node
        self.name = name
        super().__init__(f"node {node} already has an active maintenance: {name}")


class NotFound(LifecycleError):
    """No such maintenance (or no maintenance for that node)."""

    exit_code = 2


def find_maintenance(store: MaintenanceStore, name_or_node: str) -> NodeMaintenance:
    """What every store's ``find`` answers: the maintenance by that name, else the latest
    of the node by that name (its active one, else its most recent); raises ``NotFound``.

    Through the store's own ``get`` and ``latest_for``, so each store keeps its own reads.
    """
    try:
        return store.get(name_or_node)
    except NotFound:
        found = store.latest_for(name_or_node)
        if found is None:
            raise NotFound(f"no maintenance named {name_or_node!r} and none for a node "
                           f"of that name") from None
        return found


class InvalidText(LifecycleError):
    """A value given to the store is not valid text (it cannot be encoded as UTF-8): bad
    input, nothing recorded; the store itself is fine (exit 2)."""

    exit_code = 2


def _body(m: NodeMaintenance) -> str:
    """The row body of ``m``; a value in it that is not text is :class:`InvalidText`."""
    try:
        return m.model_dump_json(by_alias=True)
    except PydanticSerializationError as exc:
        raise InvalidText(f"maintenance {m.name} cannot be recorded: {exc}; nothing was "
                          "recorded") from None


class StoreError(LifecycleError):
    """The lifecycle store cannot be opened, read or written; names the file and the cause."""

    exit_code = 1

    def __init__(self, path: Path, cause: str) -> None:
        self.path = path
        self.cause = cause
        super().__init__(f"lifecycle store {path}: {cause}")


def _cause(exc: BaseException, path: Path, busy_timeout_s: float) -> str:
    """Why the store failed, in words, with what to do about it."""
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc} (check lifecycle.store and the permissions on its path)"
    if isinstance(exc, ValueError):
        return "a row does not read back as a maintenance (the file is damaged)"
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", "") or ""
    if "locked" in text or "busy" in text or name.startswith("SQLITE_BUSY"):
        return (f"database is locked: another process held it for more than "
                f"lifecycle.busy_timeout_s = {busy_timeout_s:g} s; try again when it is done")
    if "readonly" in text or "read-only" in text or name.startswith("SQLITE_READONLY"):
        return ("read-only: this user cannot write the store (SQLite also writes "
                f"{path.name}-wal and {path.name}-shm beside it, so the directory must be "
                "writable too)")
    if "not a database" in text or "malformed" in text or name.startswith(
        ("SQLITE_NOTADB", "SQLITE_CORRUPT")
    ):
        return (f"not a usable SQLite database ({text}); move it aside or point "
                "lifecycle.store at another file")
    if "unable to open" in text or name.startswith("SQLITE_CANTOPEN"):
        return f"{text} (check lifecycle.store and the permissions on its path)"
    return f"{type(exc).__name__}: {text}"


class Store:
    """One SQLite file holding maintenances and the audit trail."""

    _chained = True
    """False in a benchmark alone (``bench/``: the audit rows written with no chain fields,
    to measure what the chain costs, side by side); no deployment option reaches it."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        """How long an operation waits for another process's lock (``busy_timeout_s``)."""
        if self.path.is_dir():
            raise StoreError(self.path, "is a directory; lifecycle.store must name a file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocker = next((p for p in self.path.parents if p.exists() and not p.is_dir()), None)
            why = (f"{blocker} is a file, not a directory" if blocker is not None
                   else exc.strerror or str(exc))
            raise StoreError(
                self.path, f"its directory {self.path.parent} cannot be created: {why}"
            ) from None
        self._db: sqlite3.Connection | None = None
        with self._errors():
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        try:
            with self._errors():
                self._db.execute("PRAGMA journal_mode=WAL")
                # FULL: every commit is on disk before it returns (WAL with NORMAL may lose
                # the last commits to a power cut): an audit record or a dispatch's record
                # is durable before the act it records, as the audit file's fsync makes it
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(_SCHEMA)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(audit)")}
                if "extra" not in columns:  # a store made before identities were recorded
                    self._db.execute("ALTER TABLE audit ADD COLUMN extra TEXT NOT NULL "
                                     "DEFAULT '{}'")
                for name, kind in (("kind", "TEXT NOT NULL DEFAULT 'record'"),
                                   ("seq", "INTEGER"), ("prev", "TEXT")):
                    if name not in columns:  # a store made before the trail was chained
                        self._db.execute(f"ALTER TABLE audit ADD COLUMN {name} {kind}")
        except StoreError:
            self._db.close()
            raise
        self.writes = 0
        """Maintenance rows written by this process (created or updated)."""
        self._phases: tuple[int, dict[str, tuple[str, Phase]]] | None = None
        """``(data_version, {name: (node, phase)})``: the active rows as of that data
        version, with this connection's own committed writes applied since (None: not
        read yet, or a write of this connection failed in a way that leaves it unsure)."""
        self.after_write: Callable[[NodeMaintenance], None] | None = None
        """Called after every committed maintenance write (progress output, tests)."""

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn what SQLite (or a damaged row) raises into a :class:`StoreError`."""
        try:
            yield
        except UnicodeEncodeError as exc:  # our input, not the file: never "damaged"
            if self._db is not None and self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            bad = exc.object[exc.start:exc.end] if isinstance(exc.object, str) else ""
            raise InvalidText(
                f"a value is not valid UTF-8 text ({bad!r}: bytes the locale could not "
                f"decode); nothing was recorded, and the store {self.path} is unchanged"
            ) from None
        except (sqlite3.Error, ValueError, OSError) as exc:
            if self._db is not None and self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise StoreError(self.path, _cause(exc, self.path, self.busy_timeout_s)) from None

    @property
    def db(self) -> sqlite3.Connection:
        assert self._db is not None
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # -- maintenances ------------------------------------------------------------------------
    def create(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Insert a new maintenance (version 1) and, in the same transaction, its audit record."""
        m.resource_version = 1
        now = dt.datetime.now(dt.UTC).isoformat()
        body = _body(m)
        phases, self._phases = self._phases, None
        with self._errors():
            try:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.execute(
                    "INSERT INTO maintenance VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (m.name, m.node, m.phase.value, int(m.phase not in TERMINAL_PHASES), 1,
                     m.created_at.isoformat(), now, body),
                )
                if audit is not None:
                    self._insert_audit(audit)
                self.db.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                self.db.execute("ROLLBACK")
                active = self.active_for(m.node)
                if active is not None:
                    raise AlreadyActive(m.node, active.name) from exc
                raise ConcurrentChange(f"maintenance {m.name} already exists; try again") \
                    from exc
        self._written(m, phases)
        return m

    def update(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Write ``m`` if its version is still current; bumps the version. Raises ``_Conflict``.

        A store that cannot be written raises :class:`StoreError` (the version is kept).
        """
        expected = m.resource_version
        m.resource_version = expected + 1
        now = dt.datetime.now(dt.UTC).isoformat()
        try:
            body = _body(m)
        except InvalidText:
            m.resource_version = expected
            raise
        phases, self._phases = self._phases, None
        row = (m.phase.value, int(m.phase not in TERMINAL_PHASES), m.resource_version, now,
               body, m.name, expected)
        try:
            with self._errors():
                try:
                    if audit is None:
                        # one statement is its own transaction (autocommit): it takes the
                        # write lock (waiting up to busy_timeout_s) and commits or changes
                        # nothing, as BEGIN IMMEDIATE ... COMMIT around it would
                        cur = self.db.execute(_UPDATE, row)
                        if cur.rowcount != 1:
                            raise _Conflict(
                                f"maintenance {m.name} changed since version {expected}")
                    else:
                        self.db.execute("BEGIN IMMEDIATE")
                        cur = self.db.execute(_UPDATE, row)
                        if cur.rowcount != 1:
                            self.db.execute("ROLLBACK")
                            raise _Conflict(
                                f"maintenance {m.name} changed since version {expected}")
                        self._insert_audit(audit)
                        self.db.execute("COMMIT")
                except sqlite3.IntegrityError as exc:
                    if self.db.in_transaction:
                        self.db.execute("ROLLBACK")
                    raise _Conflict(f"maintenance {m.name} could not be written: {exc}") from exc
        except _Conflict:
            m.resource_version = expected
            self._phases = phases  # nothing was written
            raise
        except StoreError:
            m.resource_version = expected
            raise
        self._written(m, phases)
        return m

    def _written(
        self, m: NodeMaintenance, phases: tuple[int, dict[str, tuple[str, Phase]]] | None
    ) -> None:
        """After a committed write of ``m``: count it, carry it into the active rows read
        before it (still those of their data version: this connection's own commit does
        not change it, anyone else's commit does), tell ``after_write``."""
        if phases is not None:
            if m.phase in TERMINAL_PHASES:
                phases[1].pop(m.name, None)
            else:
                phases[1][m.name] = (m.node, m.phase)
            self._phases = phases
        self.writes += 1
        if self.after_write is not None:
            self.after_write(m)

    def _one(self, sql: str, args: tuple[str, ...]) -> NodeMaintenance | None:
        with self._errors():
            row = self.db.execute(sql, args).fetchone()
            return NodeMaintenance.model_validate_json(row[0]) if row else None

    def get(self, name: str) -> NodeMaintenance:
        found = self._one("SELECT body FROM maintenance WHERE name = ?", (name,))
        if found is None:
            raise NotFound(f"no maintenance named {name!r}")
        return found

    def active_for(self, node: str) -> NodeMaintenance | None:
        return self._one("SELECT body FROM maintenance WHERE node = ? AND active = 1", (node,))

    def latest_for(self, node: str) -> NodeMaintenance | None:
        """The active maintenance of ``node``, else its most recent one."""
        active = self.active_for(node)
        if active is not None:
            return active
        return self._one(
            "SELECT body FROM maintenance WHERE node = ? ORDER BY created_at DESC, rowid DESC "
            "LIMIT 1",
            (node,),
        )

    def find(self, name_or_node: str) -> NodeMaintenance:
        """A maintenance by name, else the latest of a node by that name."""
        return find_maintenance(self, name_or_node)

    def all(self, active_only: bool = False) -> list[NodeMaintenance]:
        sql = "SELECT body FROM maintenance"
        if active_only:
            sql += " WHERE active = 1"
        sql += " ORDER BY created_at, rowid"
        with self._errors():
            return [NodeMaintenance.model_validate_json(r[0]) for r in self.db.execute(sql)]

    def active(self) -> list[NodeMaintenance]:
        return self.all(active_only=True)

    def active_phases(self) -> list[tuple[str, str, Phase]]:
        """``(name, node, phase)`` of every active maintenance, without reading the bodies.

        The rows as last read, with this connection's own committed writes applied since,
        while ``PRAGMA data_version`` is what it was at that read (it is unchanged by this
        connection's own commits and changed by any other connection's): a commit by
        anyone else, in this process or another, makes it read them again.
        """
        with self._errors():
            version = self.db.execute("PRAGMA data_version").fetchone()[0]
            cached = self._phases
            if cached is None or cached[0] != version:
                rows = {
                    name: (node, _phase(phase)) for name, node, phase in
                    self.db.execute("SELECT name, node, phase FROM maintenance WHERE active = 1")
                }
                cached = self._phases = (version, rows)
            return [(name, node, phase) for name, (node, phase) in cached[1].items()]

    # -- audit -------------------------------------------------------------------------------
    def _insert_audit(self, rec: AuditRecord) -> None:
        """Insert one record, chained to the trail's last entry (inside the caller's
        transaction: ``BEGIN IMMEDIATE`` holds every other writer off, so the tail read
        here is the tail written to)."""
        self._insert_audits((rec,))

    def _insert_audits(self, records: Sequence[AuditRecord],
                       signer: Signer | None = None) -> None:
        if not self._chained:
            for rec in records:
                self.db.execute(
                    "INSERT INTO audit (at, actor, action, reason, node, maintenance, "
                    "source, detail, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (rec.at.isoformat(), rec.actor, rec.action.value, rec.reason, rec.node,
                     rec.maintenance, rec.source, rec.detail,
                     json.dumps(rec.extra(), separators=(",", ":"))))
            return
        tail = self._audit_tail()
        seq, prev, floor = tail.seq, tail.hash, tail.at
        last: tuple[Any, ...] = ()
        for rec in records:
            if floor is not None and rec.at < floor:  # time never goes back in a trail
                rec = dataclasses.replace(rec, at=floor)
            floor = rec.at
            seq += 1
            prev_here = prev
            prev = digest(canonical({**rec.as_dict(), "seq": seq, "prev": prev_here}))
            values = (rec.at.isoformat(), rec.actor, rec.action.value, rec.reason, rec.node,
                      rec.maintenance, rec.source, rec.detail,
                      json.dumps(rec.extra(), separators=(",", ":")), "record", seq,
                      prev_here)
            row = self.db.execute(
                "INSERT INTO audit (at, actor, action, reason, node, maintenance, source, "
                "detail, extra, kind, seq, prev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values)
            last = (row.lastrowid, *values)
        if signer is not None and records:
            assert floor is not None
            body = {"entries": seq, "head": prev, "at": floor.isoformat(),
                    "key": signer.seal.id}
            extra = {"checkpoint": body, "signature": signer.sign(body)}
            values = (floor.isoformat(), "", "", "", "", "", "", "",
                      json.dumps(extra, separators=(",", ":")), "checkpoint", seq + 1, prev)
            row = self.db.execute(
                "INSERT INTO audit (at, actor, action, reason, node, maintenance, source, "
                "detail, extra, kind, seq, prev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values)
            last = (row.lastrowid, *values)
            seq, prev = seq + 1, digest(canonical({**extra, "seq": seq + 1, "prev": prev}))
        if last:
            self._tail_seen = (last, Tail(seq, prev, floor))

    _ENTRY_SQL = ("SELECT id, at, actor, action, reason, node, maintenance, source, detail, "
                  "extra, kind, seq, prev FROM audit")

    _tail_seen: tuple[tuple[Any, ...], Tail] | None = None
    """The last row this store wrote, as the table returns it, and the tail it makes: the
    next append reads the last row and, where it is that row to the byte (no other writer
    appended, nothing rolled back), chains to it without rebuilding its encoding."""

    def _audit_tail(self) -> Tail:
        row = self.db.execute(self._ENTRY_SQL + " ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return Tail()
        seen = self._tail_seen
        if seen is not None and seen[0] == tuple(row):
            return seen[1]
        entry = self._entry(row, 0)
        if entry.seq is None or entry.prev is None:
            raise StoreError(self.path, "its audit trail ends with a record that is not "
                             "chained (written before the trail was chained, or damaged): "
                             "nothing is chained to it; run `powerplane audit verify`, keep "
                             "the store, and start a new one")
        return Tail(entry.seq, entry.hash, entry.at)

    @staticmethod
    def _entry(row: Any, position: int) -> Entry:
        """A row of the audit table as a trail entry: its canonical encoding rebuilt from
        its columns, byte for byte what was hashed when it was written."""
        extra = json.loads(row[9] or "{}")
        if row[10] == "checkpoint":
            doc: dict[str, Any] = {**extra, "seq": row[11], "prev": row[12]}
        else:
            rec = AuditRecord.from_dict({
                "actor": row[2], "action": Action(row[3]), "reason": row[4], "node": row[5],
                "maintenance": row[6], "source": row[7], "at": row[1], "detail": row[8],
                **extra})
            doc = rec.as_dict()
            if row[11] is not None:
                doc["seq"] = row[11]
            if row[12] is not None:
                doc["prev"] = row[12]
        return Entry(position, canonical(doc), doc)

    def audit_entries(self) -> list[Entry]:
        """The whole audit trail as entries (for ``powerplane audit verify``); a row that
        cannot be read as one is an unreadable entry, never skipped."""
        out: list[Entry] = []
        with self._errors():
            for i, row in enumerate(self.db.execute(self._ENTRY_SQL + " ORDER BY id"),
                                    start=1):
                try:
                    out.append(self._entry(row, i))
                except (ValueError, KeyError, TypeError) as exc:
                    out.append(Entry(i, f"row {row[0]}: {exc}".encode()))
        return out

    # -- the dispatch ledger (powerplane.lifecycle.ledger) --------------------------------
    def record_dispatch(self, m: NodeMaintenance, d: Dispatch) -> None:
        """Record ``d`` before it is sent: once per (maintenance, verb, attempt); the same
        attempt id again is a no-op, another one a :class:`LedgerConflict`."""
        self._ledger_write(m, d, DISPATCH)

    def record_not_applied(self, m: NodeMaintenance, d: Dispatch) -> None:
        """Record that evidence showed ``d`` did not take effect (once)."""
        self._ledger_write(m, d, NOT_APPLIED)

    def _ledger_write(self, m: NodeMaintenance, d: Dispatch, kind: LedgerKind) -> None:
        before = d.before.model_dump_json(by_alias=True) if d.before is not None else None
        with self._errors():
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute(
                "SELECT attempt_id FROM dispatch_ledger WHERE maintenance = ? AND kind = ? "
                "AND verb = ? AND attempt = ?", (m.name, kind.value, d.verb, d.attempt)).fetchone()
            if row is None:
                self.db.execute(
                    "INSERT INTO dispatch_ledger (maintenance, kind, verb, attempt, "
                    "attempt_id, at, runner, before) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (m.name, kind.value, d.verb, d.attempt, d.attempt_id,
                     utcnow().isoformat(), d.runner, before))
            self.db.execute("COMMIT")
        if row is not None and row[0] != d.attempt_id:
            raise LedgerConflict(
                f"{d.verb} attempt {d.attempt} of {m.name} is already in the dispatch ledger "
                f"of {self.path} as attempt id {row[0]} (this one is {d.attempt_id}): it may "
                "have been sent")

    def ledger(self, m: NodeMaintenance) -> list[LedgerEntry]:
        """``m``'s ledger, oldest first."""
        with self._errors():
            rows = self.db.execute(
                "SELECT id, kind, verb, attempt, attempt_id, at, runner, before FROM "
                "dispatch_ledger WHERE maintenance = ? ORDER BY id", (m.name,)).fetchall()
            return [LedgerEntry(kind=LedgerKind(r[1]), verb=r[2], attempt=int(r[3]),
                                attempt_id=r[4], at=dt.datetime.fromisoformat(r[5]),
                                runner=r[6],
                                before=Evidence.model_validate_json(r[7]) if r[7] else None,
                                name=f"{self.path} dispatch_ledger row {r[0]}")
                    for r in rows]

    def append_audit(self, rec: AuditRecord) -> None:
        """Append one audit record on its own."""
        self.append_audits((rec,))

    def append_audits(self, records: Sequence[AuditRecord],
                      signer: Signer | None = None) -> None:
        """Append a call's audit records together: one transaction, one commit, chained;
        with a ``signer``, a signed checkpoint after them."""
        with self._errors():
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self._insert_audits(records, signer)
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def audit(self, node: str | None = None) -> list[AuditRecord]:
        sql = ("SELECT at, actor, action, reason, node, maintenance, source, detail, extra "
               "FROM audit WHERE kind = 'record'")
        args: tuple[str, ...] = ()
        if node is not None:
            sql += " AND node = ?"
            args = (node,)
        sql += " ORDER BY id"
        with self._errors():
            return [
                AuditRecord.from_dict({
                    "actor": r[1], "action": Action(r[2]), "reason": r[3], "node": r[4],
                    "maintenance": r[5], "source": r[6], "at": r[0], "detail": r[7],
                    **json.loads(r[8] or "{}")})
                for r in self.db.execute(sql, args)
            ]
