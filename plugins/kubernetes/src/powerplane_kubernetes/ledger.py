"""The dispatch ledger on the API server: one ``MaintenanceDispatch`` object per entry.

Core's ledger (``powerplane.lifecycle.ledger``) is what at most once rests on: entries only
grow, and no one but the executor writes them. Here each entry is a cluster-scoped
``MaintenanceDispatch`` (:mod:`.crd`) named after the maintenance, the verb, the attempt
and the kind (:func:`entry_name`): the API server's create-only semantics do the rest. A
``POST`` of an entry that exists is a ``409``: the entry is read, and the same attempt id
is this runner's own retry, another one a :class:`~powerplane.lifecycle.ledger.LedgerConflict`
(it may have been sent: nothing is sent). The objects are immutable (CEL ``self ==
oldSelf``); the generated roles let the executor create, get, list and watch them and no
role update or delete them, and an admission policy refuses a create by anyone who is not
the executor (``powerplane_kubernetes.operator.manifests``).

Reading: where the executor's watch feeds the store (:meth:`Ledger.seen`), a maintenance
the watch saw created has its whole ledger at hand (its entries can only be made after
it); any other is listed once by label (``powerplane.io/maintenance``) and then followed
by the watch. Without a watch (``maintenance run``), each read lists.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx2
from lightkube import Client
from lightkube.generic_resource import GenericGlobalResource, create_global_resource

from powerplane.lifecycle import (
    Dispatch,
    Evidence,
    LedgerConflict,
    LedgerEntry,
    LedgerKind,
    NodeMaintenance,
    TemporaryPortError,
)
from powerplane_kubernetes.audit import label_value, object_name
from powerplane_kubernetes.crd import (
    DISPATCH_KIND,
    DISPATCH_PLURAL,
    GROUP,
    MAINTENANCE_LABEL,
    NODE_LABEL,
    VERSION,
)
from powerplane_kubernetes.errors import answer_of

__all__ = ["DispatchResource", "Ledger", "entry_name", "entry_object", "entry_of"]

DispatchResource: type[GenericGlobalResource] = create_global_resource(
    GROUP, VERSION, DISPATCH_KIND, DISPATCH_PLURAL)
"""lightkube's class of ``maintenancedispatches.powerplane.io``."""

_PASSING = frozenset({408, 429, 500, 502, 503, 504})
"""Answers that may pass: the entry is not written, nothing is sent, tried again."""


def entry_name(maintenance: str, kind: LedgerKind, verb: str, attempt: int) -> str:
    """The one name of a ledger entry (so a second write of it is a ``409``)."""
    suffix = f"{verb}-{attempt}" + ("-not-applied" if kind is LedgerKind.NOT_APPLIED else "")
    return object_name(maintenance, suffix)


def entry_object(m: NodeMaintenance, d: Dispatch, kind: LedgerKind,
                 at: dt.datetime) -> dict[str, Any]:
    """The ``MaintenanceDispatch`` of ``d``'s entry of ``kind``."""
    spec: dict[str, Any] = {
        "maintenance": m.name, "node": m.node, "kind": kind.value, "verb": d.verb,
        "attempt": d.attempt, "attemptId": d.attempt_id, "at": at.isoformat(),
        "runner": d.runner,
    }
    if d.before is not None:
        spec["before"] = d.before.model_dump(mode="json", by_alias=True)
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": DISPATCH_KIND,
        "metadata": {"name": entry_name(m.name, kind, d.verb, d.attempt),
                     "labels": {MAINTENANCE_LABEL: label_value(m.name),
                                NODE_LABEL: label_value(m.node)}},
        "spec": spec,
    }


def entry_of(obj: dict[str, Any]) -> LedgerEntry:
    """The ledger entry a ``MaintenanceDispatch`` holds (``ValueError``: not one)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{DISPATCH_PLURAL}.{GROUP} object without a spec")
    before = spec.get("before")
    return LedgerEntry(
        kind=LedgerKind(str(spec["kind"])), verb=str(spec["verb"]),
        attempt=int(spec["attempt"]),
        attempt_id=str(spec["attemptId"]), at=dt.datetime.fromisoformat(str(spec["at"])),
        runner=str(spec.get("runner") or ""),
        before=Evidence.model_validate(before) if isinstance(before, dict) else None,
        name=str((obj.get("metadata") or {}).get("name") or ""))


def _plain(obj: Any) -> dict[str, Any]:
    out = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    assert isinstance(out, dict)
    return out


class Ledger:
    """A store's ledger entries on the API server (see the module docstring).

    ``errors(what)`` is the store's context that turns what the client raises into its
    error (naming ``what``); ``clock`` stamps entries.
    """

    def __init__(self, client: Client,
                 errors: Callable[[str], AbstractContextManager[None]],
                 clock: Callable[[], dt.datetime]) -> None:
        self.client = client
        self._errors = errors
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, LedgerEntry]] = {}
        """Entries by maintenance and entry name, as the watch and this store's reads
        delivered them."""
        self._complete: set[str] = set()
        """Maintenances whose every entry is in :attr:`_entries` (created after the watch
        began, or listed once)."""
        self.watched = False
        """Whether the executor's watch of the entries feeds this ledger now."""

    # -- writes ----------------------------------------------------------------------------
    def record(self, m: NodeMaintenance, d: Dispatch, kind: LedgerKind) -> None:
        """Create ``d``'s entry of ``kind`` (once; see the module docstring)."""
        body = entry_object(m, d, kind, self.clock())
        name = body["metadata"]["name"]
        what = f"recording {kind} {d.verb} attempt {d.attempt} of {m.name} ({DISPATCH_PLURAL})"
        with self._errors(what):
            try:
                made = _plain(self.client.create(DispatchResource(**body)))
            except httpx2.HTTPStatusError as exc:
                answer = answer_of(exc)
                code = answer.code if answer is not None else 0
                if code in _PASSING:
                    raise TemporaryPortError(
                        f"{what}: HTTP {code}: not recorded, so not sent; tried again"
                    ) from None
                if code != 409:
                    raise
                made = _plain(self.client.get(DispatchResource, name))
            except (httpx2.TransportError, OSError) as exc:  # nothing left: not sent
                raise TemporaryPortError(f"{what}: {type(exc).__name__}: not recorded, so "
                                         "not sent; tried again") from None
        entry = entry_of(made)
        if entry.attempt_id != d.attempt_id:
            raise LedgerConflict(
                f"{d.verb} attempt {d.attempt} of {m.name} is already in the dispatch ledger "
                f"({DISPATCH_PLURAL}.{GROUP} {name}, attempt id {entry.attempt_id}, recorded "
                f"{entry.at.isoformat()} by {entry.runner or '?'}); this one is "
                f"{d.attempt_id}: it may have been sent")
        self._add(m.name, entry)

    # -- reads -----------------------------------------------------------------------------
    def entries(self, m: NodeMaintenance) -> list[LedgerEntry]:
        """Every entry of ``m``, oldest first."""
        with self._lock:
            if self.watched and m.name in self._complete:
                return sorted(self._entries.get(m.name, {}).values(), key=_order)
        with self._errors(f"listing the dispatch ledger of {m.name} ({DISPATCH_PLURAL})"):
            objs = [_plain(o) for o in self.client.list(
                DispatchResource, labels={MAINTENANCE_LABEL: label_value(m.name)})]
            found = [entry_of(o) for o in objs
                     if (o.get("spec") or {}).get("maintenance") == m.name]
        with self._lock:
            kept = self._entries.setdefault(m.name, {})
            for e in found:
                kept[e.name] = e
            if self.watched:
                self._complete.add(m.name)
            return sorted(kept.values(), key=_order)

    # -- the watch -------------------------------------------------------------------------
    def born(self, maintenance: str) -> None:
        """The executor's watch saw ``maintenance`` created after the ledger's watch began:
        every entry of it will come through that watch."""
        with self._lock:
            if self.watched:
                self._complete.add(maintenance)

    def seen(self, kind: str, obj: dict[str, Any]) -> None:
        """An entry the executor's watch delivered (``ADDED``; never changed or deleted,
        by every role: one that is, is ignored and logged by the watch)."""
        if kind != "ADDED":
            return
        try:
            entry = entry_of(obj)
        except (ValueError, KeyError, TypeError):
            return
        maintenance = str((obj.get("spec") or {}).get("maintenance") or "")
        if maintenance:
            self._add(maintenance, entry)

    def feeding(self, fed: bool) -> None:
        """The watch began (or stopped) feeding: what it has not seen is not known."""
        with self._lock:
            self.watched = fed
            self._complete.clear()

    def forget(self, maintenance: str) -> None:
        """``maintenance`` ended (or is gone): its entries need not be kept."""
        with self._lock:
            self._entries.pop(maintenance, None)
            self._complete.discard(maintenance)

    def _add(self, maintenance: str, entry: LedgerEntry) -> None:
        with self._lock:
            self._entries.setdefault(maintenance, {})[entry.name] = entry


def _order(e: LedgerEntry) -> tuple[dt.datetime, int, str]:
    return (e.at, 0 if e.kind is LedgerKind.DISPATCH else 1, e.name)
