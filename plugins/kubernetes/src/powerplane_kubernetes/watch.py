"""A watch of every ``NodeMaintenance``: the active ones kept as a cache, fed to the store.

:class:`MaintenanceWatch` lists the ``nodemaintenances`` once, then watches from the list's
``resourceVersion`` (lightkube's ``AsyncClient`` resumes a stream the server ends from the
last version it saw). ``410 Gone`` lists again at once (a second one in a row backs off as
a failure does); any other failure is tried again after core's backoff (:data:`BACKOFF`:
from :data:`BACKOFF_S`, its ceiling doubling to :data:`BACKOFF_MAX_S`, jittered); while it
has not listed, the cache is None and whoever reads it reads the store instead. Nothing
but cancelling its task ends it.

What it keeps: the active maintenances by name, each at its ``resourceVersion`` (a
terminal, deleted or unreadable object leaves the cache; an unreadable one is flagged for
the executor, whose next read of the store refuses it visibly). Every object it delivers
goes to the :class:`~powerplane_kubernetes.store.KubernetesStore` it feeds
(:meth:`~powerplane_kubernetes.store.KubernetesStore.observe`), which then answers reads
from the newest copy at hand and the safety rule's question (the active maintenances) from
:meth:`MaintenanceWatch.active_view`, with no request; the store is told whenever the watch
stops feeding it.

With ``records=True`` (the operator) it also watches the ``maintenanceaudits`` from the
first list's ``resourceVersion`` (no list of them: the trail only grows), and tells the
store the name of each record created (or deleted) since: an admission then writes a
request's record only when the watch has not seen it (one its creator wrote before the
watch began is written again, a ``409``: it is there). What it has not seen costs a
request; what it has seen is there (a record is never changed, and a deletion is seen as
well).

Who runs one: the operator (:mod:`.operator.run`), and any long-lived requester of the same
cluster (a gateway, a controller embedding the lifecycle), through :func:`following`: its
requests then cost the ``POST`` of the object and of its request record, and no list per
request. A copy in the cache may be milliseconds behind the API server: the executor's
admission is what decides (it takes the node's lock and runs the guard itself), so a
requester's answer from the cache is the same early refusal a list gives, never the
decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from powerplane import Backoff
from powerplane.lifecycle import NodeMaintenance, Phase

if TYPE_CHECKING:
    from lightkube import AsyncClient

    from powerplane_kubernetes.store import KubernetesStore

__all__ = ["BACKOFF", "BACKOFF_MAX_S", "BACKOFF_S", "SERVER_TIMEOUT_S", "MaintenanceWatch",
           "following"]

log = logging.getLogger("powerplane.kubernetes.watch")

BACKOFF_S = 0.2
"""The first wait before a failed list or watch is tried again (doubled per failure)."""
BACKOFF_MAX_S = 10.0
"""The longest wait before a failed list or watch is tried again."""
BACKOFF = Backoff(BACKOFF_S, BACKOFF_MAX_S)
"""Core's backoff from :data:`BACKOFF_S` to :data:`BACKOFF_MAX_S`, jittered."""
SERVER_TIMEOUT_S = 300
"""The server ends each watch after this long (lightkube resumes it from the last version)."""


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an error carries: a watch ``ERROR`` event's Status (lightkube's
    ``ApiError``), or the answer to the watch request itself (its body is a stream, unread)."""
    from powerplane_kubernetes.errors import answer_of

    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    if isinstance(code, int):
        status = getattr(exc, "status", None)
        inner = getattr(status, "code", None)
        return inner if isinstance(inner, int) else code
    answer = answer_of(exc)
    return answer.code if answer is not None else None


def _raw(obj: Any) -> dict[str, Any]:
    """An object the client delivered, as plain data."""
    out = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    assert isinstance(out, dict)
    return out


def at_or_below(m: NodeMaintenance, version: int | None) -> bool:
    """Whether ``m`` is at ``version`` or older (a cache behind what a reader saw)."""
    return version is not None and m.resource_version <= version


class MaintenanceWatch:
    """One list-then-watch of ``nodemaintenances`` (see the module docstring).

    ``on_event(what, wake)`` is told what happened (``"listed at 17"``, ``"ADDED nm-1"``,
    ``"410 Gone"``, ``"failed"``), and whether it is news a reader should act on (a list,
    an event: ``wake``) or only a record (a failure); ``on_object(kind, m)`` gets each
    object the list and the events delivered, as a maintenance (None: deleted or
    unreadable)."""

    def __init__(self, client: AsyncClient, store: KubernetesStore | None = None, *,
                 on_event: Callable[[str, bool], None] | None = None,
                 on_object: Callable[[str, NodeMaintenance | None], None] | None = None,
                 records: bool = False) -> None:
        self.client = client
        self.records = records
        """Whether the audit records are watched too (see the module docstring)."""
        self._version: str | None = None
        """The newest ``resourceVersion`` the list or an event gave (the records' watch
        starts, and starts again after a ``410``, from it)."""
        self._listed = asyncio.Event()
        self.store = store
        self.on_event = on_event
        self.on_object = on_object
        self.cache: dict[str, NodeMaintenance] | None = None
        """The active maintenances by name, as the last list and the events after it
        delivered them (None: not listed since it started or failed)."""
        self.ended: dict[str, int] = {}
        """Maintenances a reader saw terminal, at that version (:meth:`ended_at`), until
        the watch delivers it: a cached version at or below it is not active."""
        self.unreadable = False
        """An object that does not read as a maintenance was delivered (the executor's
        next read of the store refuses it; it sets this back)."""
        self.stopped = asyncio.Event()
        """Set: a backoff's wait ends and no reconnect follows (a stream in progress ends
        with its task's cancel, as :func:`following` does)."""

    # -- what it answers ---------------------------------------------------------------------
    def active(self) -> list[NodeMaintenance] | None:
        """The active maintenances, oldest first (None while it has not listed)."""
        cache = self.cache
        if cache is None:
            return None
        return sorted((m for m in list(cache.values())
                       if not at_or_below(m, self.ended.get(m.name))),
                      key=lambda m: (m.created_at, m.name))

    def active_view(self) -> list[tuple[str, str, Phase]] | None:
        """``(name, node, phase)`` of the active maintenances (None while it has not listed:
        the store lists). One copy taken at once: a store asks from a worker thread while
        the watch changes the cache on the event loop."""
        cache = self.cache
        if cache is None:
            return None
        return [(m.name, m.node, m.phase) for m in list(cache.values())
                if not at_or_below(m, self.ended.get(m.name))]

    def ended_at(self, name: str, version: int) -> None:
        """A reader saw ``name`` terminal at ``version``: not active at or below it."""
        if self.cache is not None and name in self.cache:
            self.ended[name] = version

    # -- the loop ---------------------------------------------------------------------------
    def _feeding(self, fed: bool) -> None:
        if self.store is not None:
            self.store.watched = fed
            self.store.active_view = self.active_view if fed else None

    def _tell(self, what: str, wake: bool) -> None:
        if self.on_event is not None:
            self.on_event(what, wake)

    def _cached(self, kind: str, obj: Any) -> None:
        from powerplane_kubernetes.store import from_object

        assert self.cache is not None
        raw = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        name = str((raw.get("metadata") or {}).get("name") or "")
        if self.store is not None:
            self.store.observe(kind, raw)
        m: NodeMaintenance | None = None
        if kind != "DELETED":  # no status yet: a request to admit (Pending)
            try:
                m = from_object(raw)
            except ValueError as exc:  # refused by the executor's next read of the store
                log.warning("nodemaintenance %s does not read as a maintenance: %s", name, exc)
                self.unreadable = True
        if m is None or m.phase.terminal:
            self.cache.pop(name, None)
            self.ended.pop(name, None)
        else:
            self.cache[name] = m
        if self.on_object is not None:
            self.on_object(kind, m)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), seconds)

    async def run(self, sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        """List, then watch, until the task is cancelled (:attr:`stopped` set ends a
        backoff's wait and the loop after it); ``sleep(seconds)`` waits out a backoff
        (default: that long, or until :attr:`stopped` is set)."""
        from powerplane_kubernetes.errors import map_error
        from powerplane_kubernetes.store import NodeMaintenanceResource

        wait = sleep or self._pause
        backoff = BACKOFF.retrying()
        version: str | None = None
        gone = 0  # 410s in a row: a second one backs off as a failure does
        records = (asyncio.create_task(self._watch_records(wait), name="watch records")
                   if self.records and self.store is not None else None)
        ledger = (asyncio.create_task(self._watch_ledger(wait), name="watch ledger")
                  if self.records and self.store is not None else None)
        try:
            while not self.stopped.is_set():
                try:
                    if version is None:
                        self.cache = None
                        self._feeding(False)
                        listed = self.client.list(NodeMaintenanceResource)
                        found = [obj async for obj in listed]
                        version = self._version = listed.resourceVersion
                        self._listed.set()
                        self.cache, self.ended = {}, {}
                        for obj in found:
                            self._cached("ADDED", obj)
                        del found
                        self._feeding(True)
                        self._tell(f"listed at {version}", True)
                    async for kind, obj in self.client.watch(
                            NodeMaintenanceResource, resource_version=version,
                            server_timeout=SERVER_TIMEOUT_S):
                        backoff.reset()
                        gone = 0
                        meta = obj.metadata
                        if meta is not None and meta.resourceVersion:
                            version = self._version = meta.resourceVersion
                        name = meta.name if meta is not None else "?"
                        if kind == "ADDED" and self.store is not None and meta is not None:
                            # made after the ledger's watch began: its entries all come
                            self.store.ledger_entries.born(str(meta.name))
                        if self.cache is not None:
                            self._cached(kind, obj)
                        self._tell(f"{kind} {name}", True)
                except Exception as exc:
                    if status_code(exc) == 410:
                        log.info("watch of nodemaintenances: 410 Gone (resourceVersion %s no "
                                 "longer kept): listing again", version)
                        self._tell("410 Gone", False)
                        version, gone = None, gone + 1
                        if gone == 1:
                            continue
                    else:
                        self._tell("failed", False)
                        log.warning("watch of nodemaintenances: %s; again in %g s",
                                    map_error(exc, "watch"), backoff.next_s)
                version, self.cache = None, None
                self._feeding(False)
                await wait(backoff.next_s)
                backoff.failed()
        finally:
            self.cache = None
            self._feeding(False)
            for task in (records, ledger):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task

    async def _watch_records(self, wait: Callable[[float], Awaitable[None]]) -> None:
        """The ``maintenanceaudits`` from the list's version on: each record's name to the
        store (see the module docstring). A ``410`` starts again from the newest version the
        maintenances' list and watch gave, at once where it moved since (else after the
        backoff); any other failure backs off (:data:`BACKOFF`). Records created in a gap
        are only not known: their admission writes them, a ``409``."""
        from powerplane_kubernetes.errors import map_error
        from powerplane_kubernetes.store import MaintenanceAuditResource

        assert self.store is not None
        await self._listed.wait()
        backoff = BACKOFF.retrying()
        version = self._version
        while not self.stopped.is_set():
            try:
                async for kind, obj in self.client.watch(
                        MaintenanceAuditResource, resource_version=version,
                        server_timeout=SERVER_TIMEOUT_S):
                    backoff.reset()
                    meta = obj.metadata
                    if meta is None or not meta.name:
                        continue
                    if meta.resourceVersion:
                        version = meta.resourceVersion
                    self.store.record_seen(meta.name, present=kind != "DELETED")
                    self._tell(f"record {kind} {meta.name}", False)
            except Exception as exc:
                if status_code(exc) == 410:  # from the maintenances' newest version, at
                    fresher = self._version  # once where it moved since, else after a wait
                    if fresher is not None and fresher != version:
                        version = fresher
                        continue
                    log.info("watch of maintenanceaudits: 410 Gone at %s; again in %g s",
                             version, backoff.next_s)
                else:
                    log.warning("watch of maintenanceaudits: %s; again in %g s",
                                map_error(exc, "watch"), backoff.next_s)
            await wait(backoff.next_s)
            backoff.failed()
            version = self._version or version


    async def _watch_ledger(self, wait: Callable[[float], Awaitable[None]]) -> None:
        """The ``maintenancedispatches`` (the dispatch ledger) from the list's version on,
        each entry to the store's ledger (:mod:`.ledger`): a maintenance the watch saw
        created has its whole ledger at hand, any other is listed once. A failure or a
        ``410`` starts again (from the maintenances' newest version) and forgets which
        ledgers were whole: what fell in the gap is listed again."""
        from powerplane_kubernetes.errors import map_error
        from powerplane_kubernetes.ledger import DispatchResource

        assert self.store is not None
        ledger = self.store.ledger_entries
        await self._listed.wait()
        backoff = BACKOFF.retrying()
        version = self._version
        while not self.stopped.is_set():
            ledger.feeding(True)
            try:
                async for kind, obj in self.client.watch(
                        DispatchResource, resource_version=version,
                        server_timeout=SERVER_TIMEOUT_S):
                    backoff.reset()
                    raw = _raw(obj)
                    meta = raw.get("metadata") or {}
                    if meta.get("resourceVersion"):
                        version = str(meta["resourceVersion"])
                    if kind != "ADDED":  # no role may change or delete one: say so
                        log.warning("a dispatch ledger entry was %s: %s", kind.lower(),
                                    meta.get("name"))
                    ledger.seen(kind, raw)
            except Exception as exc:
                ledger.feeding(False)
                if status_code(exc) == 410:
                    fresher = self._version
                    if fresher is not None and fresher != version:
                        version = fresher
                        continue
                    log.info("watch of maintenancedispatches: 410 Gone at %s; again in %g s",
                             version, backoff.next_s)
                else:
                    log.warning("watch of maintenancedispatches: %s; again in %g s",
                                map_error(exc, "watch"), backoff.next_s)
            ledger.feeding(False)
            await wait(backoff.next_s)
            backoff.failed()
            version = self._version or version


@contextlib.asynccontextmanager
async def following(store: KubernetesStore, *,
                    on_object: Callable[[str, NodeMaintenance | None], None] | None = None,
                    ) -> AsyncIterator[MaintenanceWatch]:
    """Feed ``store`` from a watch while the block runs (a long-lived requester: its
    requests then list nothing), on a client of its own made from the store's access; the
    watch is stopped and its client closed on the way out. Reads fall back to the store's
    own requests whenever the watch has not listed."""
    from powerplane_kubernetes.client import KubeApi

    api = KubeApi(store.access, store.config_dir, where=store.config_where)
    watch = MaintenanceWatch(api.client(), store, on_object=on_object)
    task = asyncio.create_task(watch.run(), name="watch nodemaintenances")
    try:
        yield watch
    finally:
        watch.stopped.set()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await api.aclose()
