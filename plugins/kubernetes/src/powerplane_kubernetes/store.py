"""The ``kubernetes`` store: maintenances as ``NodeMaintenance`` objects on the API server.

``lifecycle.store: {type: kubernetes}`` keeps each maintenance as a cluster-scoped
``NodeMaintenance`` (:mod:`.crd`) named as the maintenance, and its audit trail as
``MaintenanceAudit`` objects and Events (:mod:`.audit`). It satisfies core's
``MaintenanceStore`` with lightkube's synchronous ``Client`` (the protocol is synchronous:
the CLI and the SQLite store share it) and declares ``blocking = True``: the reconciler and
the admission make its calls from worker threads, so no request holds the event loop of
the operator (whose watch, cluster port and leases use lightkube's ``AsyncClient``).

Reads
    With an executor's watch feeding it (:meth:`KubernetesStore.observe`,
    :attr:`KubernetesStore.watched`), :meth:`KubernetesStore.get` answers from the newest
    copy at hand (its own last write or read, or the watch's) and costs no request; the
    safety rule reads the watch's cache of active maintenances
    (:attr:`KubernetesStore.active_view`), not a list per check. Every write names the
    version it read, so a copy behind the API server is a ``409``, and the name is read
    again.

Writes
    :meth:`KubernetesStore.update` sends ``PUT`` of the main resource only when ``spec``,
    ``requests`` or the metadata changed (``spec`` itself never may: the CRD's CEL rule),
    then ``PUT …/status`` (the only way ``status`` is written: the status subresource),
    each naming the ``resourceVersion`` it read. A ``409 Conflict`` restores
    ``m.resource_version`` and raises ``powerplane.lifecycle.StoreConflict``: the caller reads again
    and retries, as with the SQLite store. ``resource_version`` is the object's
    ``metadata.resourceVersion`` as an integer (a positive decimal integer, comparable, by
    KEP-5504; an API server answering anything else is a ``StoreError``). A maintenance
    that became terminal gets ``powerplane.io/active: "false"`` by a last main ``PUT``
    *after* its status: the label only narrows lists, every reader decides by the phase in
    the body, so a label left behind by a crash hides nothing and invents nothing. The
    SQLite store writes spec, status and audit in one transaction; here the main resource,
    the status and the audit record are separate requests, in that order: a crash between
    them leaves the earlier ones written (a retry re-reads and writes the rest), and an
    audit record is only written after the write it records.

Requests and admission
    Any client may create a ``NodeMaintenance`` (``kubectl apply``, a GitOps tool, a
    gateway, ``maintenance request``): the object with no status is a *pending* request
    (phase ``Pending``; an object made by hand has no labels either, and is listed all the
    same). :meth:`create` of a pending maintenance (as core's lifecycle makes one here,
    :attr:`KubernetesStore.deferred_admission`) is one ``POST`` of the object and one of
    its request record, under one name (:func:`~powerplane_kubernetes.audit.request_record_name`):
    a record that cannot be written takes the object back. The executor (the operator, or
    ``maintenance run``) admits every pending request through core's admission
    (``powerplane.lifecycle.admission``): it refuses every request while the
    ValidatingAdmissionPolicyBinding :data:`~powerplane_kubernetes.crd.REQUESTER_BINDING`
    (which binds ``spec.requestedBy`` to the API server's ``request.userInfo``) is not
    installed or does not deny (:meth:`KubernetesStore.requester_unbound`), asks the
    policy, the guard and the ceremony, takes the node's lock (:meth:`KubernetesStore.lock`),
    writes the request record when its creator did not (a ``409``: it did), then the
    status ``Requested`` (or ``Refused`` with the reason). A pending object that does not
    read as a maintenance at all is ``Refused`` by :meth:`KubernetesStore.refuse_unreadable`,
    never ignored. The requester's identity is the API server's answer to a
    ``SelfSubjectReview`` (:meth:`KubernetesStore.authenticated_identity`).

One active maintenance per node (``AlreadyActive``)
    The API server has no unique index over a label, so a list-then-create would let two
    creators both see none. The store uses what the API server does guarantee: a ``POST``
    of a name that exists is ``409``. Per node there is one lock, a
    ``coordination.k8s.io/v1`` Lease ``nodemaintenance.<node>`` in ``namespace`` whose
    ``holderIdentity`` names the maintenance holding the node, taken by the executor as it
    admits a request: if it exists, its holder is read: an active holder means
    ``AlreadyActive`` (the request is refused), and so does a pending one whose lock is
    within its duration (an admission that stopped between the lock and the status); a
    holder that is gone, terminal, or pending past its duration is replaced by a ``PUT``
    naming the Lease's ``resourceVersion`` (two takers of one stale lock: one gets ``409``
    and looks again). A stale pending holder is first marked ``powerplane.io/lock-taken-by``
    by a write naming the ``resourceVersion`` read: an admission of it still running
    (slow, not dead) then gets ``409`` on its status, reads it again and meets the lock's
    new holder (refused, visibly), so two admissions never both show one node active; a
    holder whose admission wrote it first makes the mark ``409`` and is read again (active:
    ``AlreadyActive``). The holder always names an object created before the lock was
    written, so "holder gone" never means "holder not created yet". No lock is ever
    released: a finished holder is simply replaced. An object an older store marked
    ``powerplane.io/superseded-by`` is never read, and removed when seen.

A maintenance created already admitted (not ``Pending``: a test, a migration) is the
object, the node's lock, then its status.

Errors
    An API server that cannot be reached, refuses (403), lacks the CRDs (404 on the
    collection) or answers 422 raises :class:`KubernetesStoreError` (a ``StoreError``,
    exit 1) naming the API server and the cause. With ``create=False`` (a dry run), a
    cluster without the CRD reads as a store with no maintenance.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

import httpx2
from lightkube import Client
from lightkube.generic_resource import (
    GenericGlobalResource,
    create_global_resource,
)
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.operators import not_equal
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event

from powerplane import Identity
from powerplane.lifecycle import (
    AbandonRequest,
    Action,
    AlreadyActive,
    AuditRecord,
    ConcurrentChange,
    Dispatch,
    LedgerEntry,
    LedgerKind,
    NodeMaintenance,
    NotFound,
    Phase,
    StoreConflict,
    StoreError,
    find_maintenance,
)
from powerplane_kubernetes.audit import (
    audit_object,
    event_object,
    label_value,
    record_of,
    request_record_name,
)
from powerplane_kubernetes.client import FIELD_MANAGER, KubeApi
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.crd import (
    ACTIVE_LABEL,
    AUDIT_KIND,
    AUDIT_PLURAL,
    CREATED_ANNOTATION,
    FINALIZER,
    GROUP,
    KIND,
    NODE_LABEL,
    PLURAL,
    REQUESTER_BINDING,
    SPEC_FIELDS,
    VERSION,
)
from powerplane_kubernetes.errors import answer_of
from powerplane_kubernetes.ledger import Ledger
from powerplane_kubernetes.trail import Sealer, TrailWriter, trail_name, trails_of

__all__ = [
    "LOCK_PREFIX",
    "KubernetesStore",
    "KubernetesStoreError",
    "MaintenanceAuditResource",
    "NodeMaintenanceResource",
    "from_object",
    "lock_name",
    "sync_client",
    "to_object",
]

log = logging.getLogger("powerplane.kubernetes.store")

NodeMaintenanceResource: type[GenericGlobalResource] = create_global_resource(
    GROUP, VERSION, KIND, PLURAL)
"""lightkube's class of ``nodemaintenances.powerplane.io`` (no discovery request)."""
MaintenanceAuditResource: type[GenericGlobalResource] = create_global_resource(
    GROUP, VERSION, AUDIT_KIND, AUDIT_PLURAL)
"""lightkube's class of ``maintenanceaudits.powerplane.io``."""
BindingResource: type[GenericGlobalResource] = create_global_resource(
    "admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
    "validatingadmissionpolicybindings")
"""The admission policy binding the executor checks is installed."""
SelfSubjectReviewResource: type[GenericGlobalResource] = create_global_resource(
    "authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews")
"""Who the API server says a client is."""
SWEEP_S = 30.0
"""How often a store no watch feeds lists the ended maintenances for deleted ones."""
BINDING_CHECK_S = 30.0
"""How long the executor trusts its last look at the admission policy binding."""

LOCK_PREFIX = "nodemaintenance."
"""The per-node lock Lease is ``nodemaintenance.<node>``."""
LOCK_DURATION_S = 30
"""How long a creator may hold a node's lock before its status is written (step 2 to 3)."""
LOCK_TAKEN_ANNOTATION = f"{GROUP}/lock-taken-by"
"""On a pending object whose expired lock another request took: that request's name (the
write that sets it makes a late status write of the object's admission a conflict)."""
SUPERSEDED_ANNOTATION = f"{GROUP}/superseded-by"
"""On a pending object whose expired lock another creator took over: that creator's name."""

SEEN_MAX = 4096
"""How many objects' newest copies the store keeps (the least recently used go first)."""

_TRIES = 5
_TERMINAL = frozenset(p.value for p in Phase if p.terminal)


class KubernetesStoreError(StoreError):
    """The API server could not be used as the store; names it and the cause (exit 1)."""

    def __init__(self, where: str, cause: str) -> None:
        self.where = where
        self.cause = cause
        self.path = Path(where)
        Exception.__init__(self, f"lifecycle store {where}: {cause}")


def sync_client(access: ApiAccess, config_dir: Path | None, *,
                where: str = "lifecycle.store") -> Client:
    """lightkube's synchronous client for ``access`` (kubeconfig, or in-cluster)."""
    config = KubeApi(access, config_dir, where=where)._config()
    t = access.timeouts
    return Client(config, timeout=httpx2.Timeout(t.read_s, connect=t.connect_s),
                  field_manager=FIELD_MANAGER, trust_env=False)


def lock_name(node: str) -> str:
    """The node's lock Lease (a DNS subdomain: a long node name is hashed)."""
    name = LOCK_PREFIX + node
    if len(name) <= 253:
        return name
    return LOCK_PREFIX + label_value(node)


# -- the wire form ------------------------------------------------------------------------
def _labels(m: NodeMaintenance) -> dict[str, str]:
    return {NODE_LABEL: label_value(m.node),
            ACTIVE_LABEL: "false" if m.phase.terminal else "true"}


def to_object(m: NodeMaintenance) -> dict[str, Any]:
    """``m`` as a ``NodeMaintenance`` object (no ``resourceVersion``: the caller sets it)."""
    whole = m.spec.model_dump(mode="json", by_alias=True)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": m.name,
            "labels": _labels(m),
            "annotations": {CREATED_ANNOTATION: m.created_at.isoformat()},
        },
        "spec": {k: whole[k] for k in SPEC_FIELDS},
        "requests": {k: v for k, v in whole.items() if k not in SPEC_FIELDS},
        "status": m.status.model_dump(mode="json", by_alias=True),
    }


def _version(obj: dict[str, Any]) -> int:
    raw = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    if not raw.isdigit() or raw.startswith("0"):
        raise ValueError(f"resourceVersion {raw!r} is not a positive decimal integer")
    return int(raw)


def from_object(obj: dict[str, Any]) -> NodeMaintenance:
    """The maintenance a ``NodeMaintenance`` object holds (``ValueError``: it holds none)."""
    meta = obj.get("metadata") or {}
    created = (meta.get("annotations") or {}).get(CREATED_ANNOTATION) \
        or meta.get("creationTimestamp")
    if _superseded(obj):
        raise ValueError(f"superseded by {meta['annotations'][SUPERSEDED_ANNOTATION]}")
    body = {
        "name": meta.get("name"),
        "spec": {**(obj.get("spec") or {}), **(obj.get("requests") or {})},
        # no status yet: recorded by its creator, not yet admitted by the executor
        "status": obj.get("status") or {"phase": Phase.PENDING.value},
        "resourceVersion": _version(obj),
    }
    if created:
        body["createdAt"] = created
    m = NodeMaintenance.model_validate(body)
    deleted = meta.get("deletionTimestamp")
    if deleted and m.spec.abandon is None and not m.phase.terminal:
        # its deletion is an abandon, as `maintenance abandon` makes one (never written
        # back: every read of the object being deleted says so again)
        m.spec.abandon = AbandonRequest(
            actor=DELETION_ACTOR, at=dt.datetime.fromisoformat(str(deleted)),
            reason=f"the {KIND} was deleted at {deleted}: abandoned as `powerplane "
                   "maintenance abandon` does, before the object goes")
    return m


DELETION_ACTOR = "(deletion)"
"""The actor of the abandon a deletion makes (who deleted it is in the API server's own
audit log: the deletion reaches the store as the object's ``deletionTimestamp``)."""


def _deleting(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _pending(obj: dict[str, Any]) -> bool:
    """Not admitted yet: no status (as its creator made it), or the phase ``Pending``."""
    return _phase(obj) == Phase.PENDING.value


def _superseded(obj: dict[str, Any]) -> bool:
    """A pending object a store before admission by the executor marked superseded (its
    creator stopped and another request took the node): never read, removed when seen."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return SUPERSEDED_ANNOTATION in annotations


def _phase(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or Phase.PENDING.value)


def _plain(obj: Any) -> dict[str, Any]:
    out = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    assert isinstance(out, dict)
    return out


def _main(obj: dict[str, Any]) -> dict[str, Any]:
    """What this store writes through the main resource (``status`` and labels aside); an
    empty request (null, no entries) is no request, as the API server stores it; the
    abandon a deletion stands for is no request either (:data:`DELETION_ACTOR`)."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    requests = {k: v for k, v in (obj.get("requests") or {}).items() if v not in (None, [])}
    if (requests.get("abandon") or {}).get("actor") == DELETION_ACTOR:
        del requests["abandon"]
    return {"spec": obj.get("spec"), "requests": requests,
            "created": annotations.get(CREATED_ANNOTATION),
            "finalizers": sorted(meta.get("finalizers") or [])}


def _meta(old: dict[str, Any], new: dict[str, Any], labels: dict[str, str],
          rv: str) -> dict[str, Any]:
    """The metadata of a write: the stored one (others' finalizers, annotations and labels
    kept), this store's annotations and ``labels`` over it, at ``rv``."""
    meta = {k: v for k, v in (old.get("metadata") or {}).items() if k != "managedFields"}
    ours = (new.get("metadata") or {}).get("annotations") or {}
    meta["annotations"] = {**(meta.get("annotations") or {}), **ours}
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if "finalizers" in (new.get("metadata") or {}):
        meta["finalizers"] = new["metadata"]["finalizers"]
    meta["resourceVersion"] = rv
    return meta


def _abandoned_by_deletion(m: NodeMaintenance) -> bool:
    """Whether ``m``'s status says the abandon its deletion stands for was acted on."""
    cond = m.condition("Abandoned")
    return (cond is not None and cond.status == "True"
            and cond.message.startswith(f"by {DELETION_ACTOR}"))


def _releasable(obj: dict[str, Any]) -> bool:
    """Deleted after its maintenance ended, and still held by :data:`FINALIZER`."""
    return (_deleting(obj) and _phase(obj) in _TERMINAL
            and FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or []))


def _finalizers(old: dict[str, Any], m: NodeMaintenance) -> list[str]:
    """The object's finalizers after a write of ``m``: :data:`FINALIZER` kept (added where
    a hand-made object lacks it) while the maintenance may still have something to undo,
    taken away once a deleted one has ended (the API server then removes the object)."""
    have = list((old.get("metadata") or {}).get("finalizers") or [])
    if m.phase.terminal and _deleting(old):
        return [f for f in have if f != FINALIZER]
    if not m.phase.terminal and FINALIZER not in have:
        return [*have, FINALIZER]
    return have


def _no_crash(name: str) -> None:
    """No crash points (a store built outside ``open_store``)."""


class KubernetesStore:
    """Maintenances and their audit trail on a Kubernetes API server."""

    def __init__(self, access: ApiAccess, config_dir: Path | None = None, *,
                 namespace: str, create: bool = True, where: str = "lifecycle.store",
                 client: Client | None = None, lock_duration_s: int = LOCK_DURATION_S,
                 clock: Callable[[], dt.datetime] | None = None,
                 crashpoint: Callable[[str], None] | None = None,
                 signer: Sealer | Callable[[], Sealer | None] | None = None,
                 trail: TrailWriter | None = None) -> None:
        self.access = access
        self._signer = signer
        self._trail = trail
        """This store's audit trail (made on its first record: named by the identity the
        API server knows its client as; or given: the gateway's stores acting as one
        caller share the caller's trail)."""
        self._trail_lock = threading.Lock()
        self.config_dir = config_dir
        """Where a relative kubeconfig path is resolved (the deployment file's folder)."""
        self.config_where = where
        """The config path named in a bad-input error (``lifecycle.store``)."""
        self._crashpoint = crashpoint if crashpoint is not None else _no_crash
        self.lock_duration_s = lock_duration_s
        """A pending holder's lock older than this (by its ``renewTime``) is taken over."""
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self.namespace = namespace
        """Where the node locks (Leases) and the Events are written."""
        self.create_missing = create
        """False (a dry run): a cluster without the CRD reads as holding no maintenance."""
        self.client = client if client is not None else sync_client(access, config_dir,
                                                                    where=where)
        server = getattr(getattr(self.client, "config", None), "cluster", None)
        self.where = f"kubernetes {getattr(server, 'server', '') or 'API server'}"
        """How errors name this store (``kubernetes https://…:6443``)."""
        self.after_write: Callable[[NodeMaintenance], None] | None = None
        self.writes = 0
        """Maintenance objects written by this store (created or updated)."""
        self._seen: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        """The newest copy of each object this store knows (read, written, or delivered by
        the executor's watch: :meth:`observe`), at most :data:`SEEN_MAX`, oldest use first
        out; guarded by ``_seen_lock`` (the executor makes store calls from worker
        threads while its watch feeds the copies on the event loop)."""
        self._seen_lock = threading.Lock()
        self._recorded: collections.OrderedDict[str, None] = collections.OrderedDict()
        """Request records an executor's watch saw created (at most :data:`SEEN_MAX`, the
        newest kept): :meth:`record_request` writes none of these again."""
        self._swept: float | None = None
        """When :meth:`release_deleted` last listed the ended maintenances (unwatched)."""
        self._releasable: set[str] = set()
        """Objects seen deleted after their maintenance ended, still holding
        :data:`FINALIZER` (:meth:`release_deleted` lets them go)."""
        self._reread: set[str] = set()
        """Names whose copy lost a write race (409): the next :meth:`get` reads them."""
        self.unreadable: dict[str, tuple[dict[str, Any], str]] = {}
        """Pending objects the last reads could not understand: name -> (object, why)."""
        self._identity: Identity | None = None
        self.watched = False
        """Whether an executor's watch feeds every object's changes to :meth:`observe`:
        then :meth:`get` answers from the newest copy at hand (no request), and a copy that
        lost a write race is read again."""
        self.active_view: Callable[[], list[tuple[str, str, Phase]] | None] | None = None
        """The executor's watch cache of active maintenances (``(name, node, phase)``;
        it answers None while it has not listed): the safety rule and admission read it
        instead of listing per check."""
        self._bound: tuple[float, str | None] | None = None
        self.ledger_entries = Ledger(self.client, self._errors, self.clock)
        """The dispatch ledger's objects (:mod:`.ledger`), fed by the executor's watch."""

    blocking = True
    """Every call is a request to the API server: the reconciler makes them from a worker
    thread, so none holds the event loop (core's ``MaintenanceStore``)."""

    deferred_admission = True
    """Any client may create a ``NodeMaintenance``: the executor admits each one (the node's
    lock, the policy, the guard, the ceremony), whoever made it (core's lifecycle writes a
    request ``Pending`` here)."""

    def close(self) -> None:
        self.client.close()

    # -- errors ----------------------------------------------------------------------------
    def _fail(self, exc: BaseException, what: str) -> NoReturn:
        answer = answer_of(exc)
        if answer is not None:
            if answer.code == 404 and "could not find the requested resource" in answer.message:
                cause = (f"{what}: the CustomResourceDefinition {PLURAL}.{GROUP} (or "
                         f"{AUDIT_PLURAL}.{GROUP}) is not installed; apply the output of "
                         "`powerplane operator manifests`")
            else:
                words = f": {answer.message}" if answer.message else ""
                cause = f"{what}: HTTP {answer.code} {answer.reason}{words}"
        elif isinstance(exc, httpx2.TimeoutException):
            cause = f"{what}: the API server did not answer in time ({type(exc).__name__})"
        elif isinstance(exc, (httpx2.TransportError, OSError)):
            cause = f"{what}: the API server cannot be reached ({type(exc).__name__}: {exc})"
        elif isinstance(exc, ValueError):
            cause = f"{what}: {exc}"
        else:
            cause = f"{what}: {type(exc).__name__}: {exc}"
        raise KubernetesStoreError(self.where, cause) from None

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Map what the client raises onto :class:`KubernetesStoreError` (an HTTP error is
        an ``httpx2.HTTPStatusError``: lightkube's ``ApiError`` when the answer is a JSON
        ``Status``, the plain class otherwise)."""
        try:
            yield
        except (httpx2.HTTPError, OSError, ValueError) as exc:
            self._fail(exc, what)

    @staticmethod
    def _code(exc: BaseException) -> int:
        answer = answer_of(exc)
        return answer.code if answer is not None else 0

    # -- reads -----------------------------------------------------------------------------
    def _keep(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Remember ``obj`` unless a newer copy of it is at hand; return it."""
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return obj
        try:
            version = _version(obj)
        except StoreError:
            return obj
        with self._seen_lock:
            old = self._seen.get(str(name))
            if old is None or _version(old) <= version:
                self._seen[str(name)] = obj
                self._reread.discard(str(name))
                if _releasable(obj):
                    self._releasable.add(str(name))
                else:
                    self._releasable.discard(str(name))
            self._seen.move_to_end(str(name))
            while len(self._seen) > SEEN_MAX:
                self._seen.popitem(last=False)
        return obj

    def _forget(self, name: str, *, reread: bool = False) -> None:
        with self._seen_lock:
            self._seen.pop(name, None)
            self._releasable.discard(name)
            if reread:
                self._reread.add(name)

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        """One object the executor's watch delivered (``ADDED``, ``MODIFIED``,
        ``DELETED``): kept as the newest copy where it is newer than this store's own."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        if kind == "DELETED":
            self._forget(name)
        elif name:
            self._keep(obj)

    def record_seen(self, name: str, *, present: bool) -> None:
        """An audit record the executor's watch saw created (or deleted: ``present``
        False)."""
        with self._seen_lock:
            if present:
                self._recorded[name] = None
                while len(self._recorded) > SEEN_MAX:
                    self._recorded.popitem(last=False)
            else:
                self._recorded.pop(name, None)

    def _list(self, labels: dict[str, Any]) -> list[dict[str, Any]]:
        with self._errors(f"listing {PLURAL}.{GROUP}"):
            try:
                found = [self._keep(_plain(o)) for o in
                         self.client.list(NodeMaintenanceResource, labels=labels or None)]
            except httpx2.HTTPStatusError as exc:
                if not self.create_missing and self._code(exc) == 404:
                    return []  # a dry run on a cluster without the CRD: no maintenance
                raise
        for o in found:
            if _superseded(o):  # an orphan of an older store: removed (best effort)
                self._discard(str(o["metadata"]["name"]))
        return [o for o in found if not _superseded(o)]

    def _read(self, name: str) -> dict[str, Any] | None:
        with self._errors(f"reading {PLURAL}.{GROUP} {name}"):
            try:
                obj = _plain(self.client.get(NodeMaintenanceResource, name))
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) == 404:
                    self._forget(name)
                    return None
                raise
        return self._keep(obj)

    def _model(self, obj: dict[str, Any]) -> NodeMaintenance:
        name = (obj.get("metadata") or {}).get("name", "?")
        with self._errors(f"{PLURAL}.{GROUP} {name} does not read back as a maintenance"):
            return from_object(obj)

    def _sorted(self, objs: list[dict[str, Any]]) -> list[NodeMaintenance]:
        """The maintenances ``objs`` hold; a pending object that does not read as one (a
        client wrote what the schema let through and the product cannot use) is left out
        and kept in :attr:`unreadable` for the executor to refuse visibly."""
        found = []
        for o in objs:
            try:
                found.append(from_object(o))
            except ValueError as exc:
                name = str((o.get("metadata") or {}).get("name") or "?")
                if not _pending(o):
                    self._fail(exc, f"{PLURAL}.{GROUP} {name} does not read back as a "
                                    "maintenance")
                self.unreadable[name] = (o, str(exc).splitlines()[0])
        return sorted(found, key=lambda m: (m.created_at, m.name))

    def refuse_unreadable(self) -> list[str]:
        """Write ``Refused``, with the reason, on every pending object the last reads
        could not understand (the executor's part: nothing is ignored silently); the names
        refused."""
        done = []
        for name, (obj, why) in list(self.unreadable.items()):
            self.unreadable.pop(name, None)
            now = self.clock().isoformat()
            reason = f"the object cannot be read as a maintenance request: {why}"
            status = {"phase": Phase.REFUSED.value, "refusalReason": reason,
                      "history": [{"from": Phase.PENDING.value, "to": Phase.REFUSED.value,
                                   "at": now, "why": reason}]}
            meta = _meta(obj, {}, {ACTIVE_LABEL: "false"},
                         str(obj["metadata"]["resourceVersion"]))
            try:
                with self._errors(f"refusing {PLURAL}.{GROUP} {name}"):
                    try:
                        done_obj = self._send({**obj, "metadata": meta, "status": status},
                                              status=True)
                    except httpx2.HTTPStatusError as exc:
                        if self._code(exc) in (404, 409):
                            continue  # gone, or changed: read again next pass
                        raise
                    self._relabel(done_obj, {ACTIVE_LABEL: "false"})
            except KubernetesStoreError as exc:
                log.warning("%s", exc)
                continue
            log.warning("%s %s refused: %s", KIND, name, reason)
            done.append(name)
        return done

    def get(self, name: str) -> NodeMaintenance:
        """The maintenance ``name``: read, unless an executor's watch feeds this store
        (:attr:`watched`) and a copy is at hand (the newest of this store's own last read
        or write and the watch's). A copy behind the API server's costs nothing unsafe:
        every write names the version it read, so a stale one is a ``409`` (a
        ``StoreConflict``), after which the name is read again."""
        obj: dict[str, Any] | None = None
        if self.watched:
            with self._seen_lock:
                if name not in self._reread:
                    obj = self._seen.get(name)
        if obj is None:
            obj = self._read(name)
        if obj is None or _superseded(obj):
            raise NotFound(f"no maintenance named {name!r}")
        return self._model(obj)

    def _of_node(self, node: str, *, active: bool) -> list[NodeMaintenance]:
        labels: dict[str, Any] = {NODE_LABEL: label_value(node)}
        if active:
            labels[ACTIVE_LABEL] = "true"
        objs = [o for o in self._list(labels) if (o.get("spec") or {}).get("node") == node
                and (not active or _phase(o) not in _TERMINAL)]
        return self._sorted(objs)

    def active_for(self, node: str) -> NodeMaintenance | None:
        found = self._of_node(node, active=True)
        return found[0] if found else None

    def latest_for(self, node: str) -> NodeMaintenance | None:
        """The active maintenance of ``node``, else its most recent one."""
        active = self.active_for(node)
        if active is not None:
            return active
        every = self._of_node(node, active=False)
        return every[-1] if every else None

    def find(self, name_or_node: str) -> NodeMaintenance:
        """A maintenance by name, else the latest of a node by that name."""
        return find_maintenance(self, name_or_node)

    def _active_objects(self) -> list[dict[str, Any]]:
        """The objects in an active phase, in one list: those not labelled terminal
        (``powerplane.io/active!=false`` also selects the objects with no label yet, made
        by another client, ``kubectl`` say: pending until the executor admits them)."""
        objs = self._list({ACTIVE_LABEL: not_equal("false")})
        return [o for o in objs if _phase(o) not in _TERMINAL]

    def all(self, active_only: bool = False) -> list[NodeMaintenance]:
        objs = self._active_objects() if active_only else self._list({})
        return self._sorted(objs)

    def active(self) -> list[NodeMaintenance]:
        return self.all(active_only=True)

    def active_phases(self) -> list[tuple[str, str, Phase]]:
        """``(name, node, phase)`` of every active maintenance: from :attr:`active_view`
        where the executor's watch keeps one (no request), else one list."""
        if self.active_view is not None:
            viewed = self.active_view()
            if viewed is not None:
                return viewed
        out = []
        for o in self._active_objects():
            phase = _phase(o)
            with self._errors(f"{PLURAL}.{GROUP} has an unknown phase {phase!r}"):
                node = (o.get("spec") or {}).get("node")
                if not isinstance(node, str):
                    continue  # unreadable: refused by the executor (refuse_unreadable)
                out.append((str(o["metadata"]["name"]), node, Phase(phase)))
        return out

    # -- writes ----------------------------------------------------------------------------
    def _send(self, obj: dict[str, Any], *, status: bool = False,
              create: bool = False) -> dict[str, Any]:
        """One write; an HTTP error passes to the caller (which reads its code)."""
        res = NodeMaintenanceResource
        name = obj["metadata"]["name"]
        if not status:  # the main resource never carries status (the server ignores it)
            obj = {k: v for k, v in obj.items() if k != "status"}
        if create:
            return self._keep(_plain(self.client.create(res(**obj))))
        if status:
            return self._keep(_plain(self.client.replace(res.Status(**obj), name)))
        return self._keep(_plain(self.client.replace(res(**obj))))

    def create(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Create the object (see the module docstring). A ``Pending`` request (as core's
        lifecycle makes one here) is the object with no status and its request record:
        the executor admits it. Otherwise: the object, the node's lock, then its status."""
        if m.phase is Phase.PENDING:
            return self._request(m, audit)
        wire = to_object(m)
        if not m.phase.terminal:
            wire["metadata"]["finalizers"] = [FINALIZER]
        what = f"creating {PLURAL}.{GROUP} {m.name}"
        with self._errors(what):
            try:
                made = self._send(wire, create=True)  # pending: no status yet
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 409:
                    raise
                active = self.active_for(m.node)
                if active is not None:
                    raise AlreadyActive(m.node, active.name) from None
                raise ConcurrentChange(f"maintenance {m.name} already exists; try again") \
                    from None
            try:
                if not m.phase.terminal:
                    self._lock(m.node, m.name)
                    self._crashpoint("store:locked")
                body = {**wire, "metadata": {**wire["metadata"],
                                             "resourceVersion": made["metadata"]
                                             ["resourceVersion"]}}
                try:
                    done = self._send(body, status=True)
                except httpx2.HTTPStatusError as exc:
                    if self._code(exc) not in (404, 409):
                        raise
                    raise ConcurrentChange(
                        f"maintenance {m.name}: its lock on node {m.node} outlived "
                        f"{self.lock_duration_s} s before its status was written and was "
                        "taken over; try again") from None
            except BaseException:
                self._discard(m.name)
                raise
            m.resource_version = _version(done)
        self._audit(audit, done)
        self._written(m)
        return m

    def _request(self, m: NodeMaintenance, audit: AuditRecord | None) -> NodeMaintenance:
        """POST the request with no status, then its request record (made durable before
        the executor admits it: it writes the record itself when this one is missing). A
        record that cannot be written takes the object back (nothing was requested); if
        that fails too, the error says the executor may still admit it."""
        wire = {k: v for k, v in to_object(m).items() if k != "status"}
        wire["metadata"]["finalizers"] = [FINALIZER]  # its deletion runs the abandon first
        what = f"creating {PLURAL}.{GROUP} {m.name}"
        with self._errors(what):
            try:
                made = self._send(wire, create=True)
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 409:
                    raise
                raise ConcurrentChange(f"maintenance {m.name} already exists; try again") \
                    from None
        m.resource_version = _version(made)
        if audit is not None:
            try:
                self.record_request(m, audit)
            except KubernetesStoreError as exc:
                if self._delete(m.name):
                    raise KubernetesStoreError(self.where, f"{exc.cause}; the request "
                                               f"{m.name} was taken back: nothing was "
                                               "requested") from None
                raise KubernetesStoreError(self.where, (
                    f"{exc.cause}; the request {m.name} could not be taken back either: "
                    "the operator writes its audit record before it admits it (or refuses "
                    "it), so it may still be carried out")) from None
        self._written(m)
        return m

    def _delete(self, name: str) -> bool:
        """Delete ``name`` (a request of this store's that is taken back); whether it is gone."""
        try:
            self._unfinalize(name)
            self.client.delete(NodeMaintenanceResource, name)
        except httpx2.HTTPStatusError as exc:
            return self._code(exc) == 404
        except (httpx2.HTTPError, OSError, KubernetesStoreError):
            return False
        self._forget(name)
        return True

    def record_request(self, m: NodeMaintenance, record: AuditRecord, *,
                       event: bool = False) -> None:
        """Write ``m``'s request record under its one name
        (:func:`~powerplane_kubernetes.audit.request_record_name`): written once, whether
        by its creator or by the executor admitting it (a ``409``: it is there; one the
        executor's watch saw created is not written again, :meth:`record_seen`)."""
        name = request_record_name(m.name)
        with self._seen_lock:
            seen = name in self._recorded
        if not seen:
            with self._errors(f"writing the request record of {m.name} "
                              f"({AUDIT_PLURAL}.{GROUP})"):
                try:
                    record = self._append(self.recorded(record), name)
                except httpx2.HTTPStatusError as exc:
                    if self._code(exc) != 409:
                        raise  # a 409: written already (by its creator), one record
        if event:  # the Event, a notification: the status history tells the admission
            self._event(record, self._seen.get(m.name))

    def lock(self, m: NodeMaintenance) -> None:
        """Take ``m``'s node for ``m`` (as the executor admits it): ``AlreadyActive`` when
        another maintenance holds it."""
        with self._errors(f"taking the lock of node {m.node}"):
            self._lock(m.node, m.name)

    def requester_unbound(self) -> str | None:
        """None when the admission policy that binds ``spec.requestedBy`` to the creator
        (the API server's ``request.userInfo``) is installed and denies; else why every
        request is refused (asked at most every :data:`BINDING_CHECK_S`)."""
        now = time.monotonic()
        if self._bound is not None and now - self._bound[0] < BINDING_CHECK_S:
            return self._bound[1]
        why: str | None = None
        with self._errors(f"reading the admission policy binding {REQUESTER_BINDING}"):
            try:
                found = _plain(self.client.get(BindingResource, REQUESTER_BINDING))
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 404:
                    raise
                found = None
        if found is None:
            why = (f"the admission policy binding {REQUESTER_BINDING} is not installed, so "
                   "spec.requestedBy cannot be trusted to name who made the request: "
                   "apply `powerplane operator manifests`")
        elif "Deny" not in ((found.get("spec") or {}).get("validationActions") or []):
            why = (f"the admission policy binding {REQUESTER_BINDING} does not deny (its "
                   "validationActions lack Deny), so spec.requestedBy cannot be trusted")
        self._bound = (now, why)
        return why

    def authenticated_identity(self) -> Identity:
        """Who the API server says this store's client is (a SelfSubjectReview): the
        requester's identity (its user and groups), as the admission policy binds it."""
        if self._identity is None:
            body: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "SelfSubjectReview"}
            with self._errors("asking the API server who this client is "
                              "(selfsubjectreviews.authentication.k8s.io)"):
                answer = _plain(self.client.create(SelfSubjectReviewResource(**body)))
            info = (answer.get("status") or {}).get("userInfo") or {}
            user = info.get("username")
            if not isinstance(user, str) or not user:
                raise KubernetesStoreError(self.where, "the API server named no user for "
                                           "this client (SelfSubjectReview)")
            groups = tuple(str(g) for g in info.get("groups") or ())
            self._identity = Identity(user=user, groups=groups, via="kubernetes")
        return self._identity

    def _unfinalize(self, name: str) -> None:
        """Take :data:`FINALIZER` off an object this store made and never saw admitted (it
        has nothing to undo), so that deleting it removes it."""
        obj = self._read(name)
        if obj is None:
            return
        have = list((obj.get("metadata") or {}).get("finalizers") or [])
        if FINALIZER in have:
            meta = _meta(obj, {"metadata": {"finalizers": [f for f in have
                                                           if f != FINALIZER]}},
                         {}, str(obj["metadata"]["resourceVersion"]))
            body = {k: v for k, v in obj.items() if k != "status"}
            self._send({**body, "metadata": meta})

    def _discard(self, name: str) -> None:
        """Delete a pending object this store made (best effort: reads skip it anyway)."""
        try:
            self._unfinalize(name)
            self.client.delete(NodeMaintenanceResource, name)
        except (httpx2.HTTPError, OSError, KubernetesStoreError) as exc:
            log.warning("could not delete the pending %s %s: %s", KIND, name,
                        type(exc).__name__)
        self._forget(name)

    def _lock(self, node: str, name: str) -> None:
        """Take ``node``'s lock for ``name`` or raise ``AlreadyActive`` / ``ConcurrentChange``."""
        lease_name = lock_name(node)
        for _ in range(_TRIES):
            lease = Lease(metadata=ObjectMeta(name=lease_name, namespace=self.namespace,
                                              labels={NODE_LABEL: label_value(node)}),
                          spec=self._lock_spec(name, None))
            try:
                self.client.create(lease)
                return
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 409:
                    raise
            try:
                held = self.client.get(Lease, lease_name, namespace=self.namespace)
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) == 404:
                    continue  # deleted in between: create it again
                raise
            holder = held.spec.holderIdentity if held.spec is not None else None
            if holder == name:
                return
            stale = False
            if holder:
                obj = self._read(holder)
                if obj is not None and _phase(obj) not in _TERMINAL and not _superseded(obj):
                    if not _pending(obj) or not self._expired(held):
                        raise AlreadyActive(node, holder)
                    stale = True  # its admission stopped between the lock and the status
                    if not self._mark_taken(obj, name):
                        continue  # its admission wrote it meanwhile: look again
            assert held.metadata is not None
            held.spec = self._lock_spec(name, held.spec)
            try:
                self.client.replace(held)  # names the resourceVersion read: one taker wins
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 409:
                    raise
                continue
            if stale:  # that request is refused when it is admitted again: the lock is gone
                log.warning("node %s: the lock of %s %s outlived %s s before its status was "
                            "written; taken over by %s", node, KIND, holder,
                            self.lock_duration_s, name)
            return
        raise ConcurrentChange(f"the lock of node {node} kept changing; try again")

    def _mark_taken(self, obj: dict[str, Any], name: str) -> bool:
        """Mark the stale pending holder ``obj`` as having lost its lock to ``name``, by a
        write naming the version read, so that a late status write of its admission is a
        conflict; False when it changed since (a 409: read again)."""
        rv = str(obj["metadata"]["resourceVersion"])
        ours = {"metadata": {"annotations": {LOCK_TAKEN_ANNOTATION: name}}}
        try:
            self._send({**obj, "metadata": _meta(obj, ours, {}, rv)})
        except httpx2.HTTPStatusError as exc:
            code = self._code(exc)
            if code == 409:
                return False
            if code != 404:  # gone: nothing left to mark
                raise
        return True

    def _lock_spec(self, name: str, old: LeaseSpec | None) -> LeaseSpec:
        now = self.clock()
        transitions = (old.leaseTransitions or 0) + 1 if old is not None else 0
        return LeaseSpec(holderIdentity=name, leaseDurationSeconds=self.lock_duration_s,
                         acquireTime=now, renewTime=now, leaseTransitions=transitions)

    def _expired(self, held: Lease) -> bool:
        """Whether a lock's holder stopped renewing it for its whole duration, by this
        store's wall clock (a lock without times, from an older store, has expired)."""
        spec = held.spec
        last = (spec.renewTime or spec.acquireTime) if spec is not None else None
        if spec is None or last is None or spec.leaseDurationSeconds is None:
            return True
        if last.tzinfo is None:
            last = last.replace(tzinfo=dt.UTC)
        return self.clock() - last > dt.timedelta(seconds=spec.leaseDurationSeconds)

    def _current(self, m: NodeMaintenance) -> dict[str, Any]:
        """The object as last read at ``m``'s version (read again when not at hand)."""
        seen = self._seen.get(m.name)
        if seen is not None and _version(seen) == m.resource_version:
            return seen
        obj = self._read(m.name)
        if obj is None:
            raise StoreConflict(f"maintenance {m.name} is gone")
        if _version(obj) != m.resource_version:
            raise StoreConflict(f"maintenance {m.name} changed since version "
                                f"{m.resource_version}")
        return obj

    def update(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Write ``m`` if its version is still current. Raises ``StoreConflict`` (version
        restored) on a 409; ``KubernetesStoreError`` when the API server refuses."""
        expected = m.resource_version
        what = f"writing {PLURAL}.{GROUP} {m.name}"
        try:
            with self._errors(what):
                old = self._current(m)
                new = to_object(m)
                new["spec"] = old.get("spec")  # immutable: as its creator wrote it
                if (m.spec.abandon is not None and m.spec.abandon.actor == DELETION_ACTOR):
                    # the abandon its deletion stands for is read, never written
                    new["requests"]["abandon"] = (old.get("requests") or {}).get("abandon")
                new["metadata"]["finalizers"] = _finalizers(old, m)
                # the annotations are the creator's and the executor's marks, set when they
                # are made (an update writes none: a hand-made object's creation time is
                # read from its creationTimestamp again)
                new["metadata"]["annotations"] = dict(
                    (old.get("metadata") or {}).get("annotations") or {})
                rv = str(old["metadata"]["resourceVersion"])
                ours = new["metadata"]["labels"]
                # status only where it changed: a person's request (a return, an abandon,
                # a resolution) never writes it; only the executor does
                status_changed = (from_object(old).status.model_dump(mode="json", by_alias=True)
                                  != new["status"])
                if audit is None:
                    audit = self._deletion_record(old, m)
                try:
                    if _main(new) != _main(old) and not (
                            _deleting(old) and m.phase.terminal):
                        body = {**new, "metadata": _meta(old, new, {}, rv)}
                        old = self._send(body)
                        rv = str(old["metadata"]["resourceVersion"])
                    done = old
                    if status_changed:
                        done = self._send({**new, "metadata": _meta(old, new, {}, rv)},
                                          status=True)
                    if _deleting(done) and m.phase.terminal:  # ended: let the object go
                        done = self._release(done, m)
                except httpx2.HTTPStatusError as exc:
                    if self._code(exc) == 409:
                        self._forget(m.name, reread=True)
                        raise StoreConflict(f"maintenance {m.name} changed since version "
                                            f"{expected}") from None
                    if self._code(exc) == 404:  # gone meanwhile: the reader finds it gone
                        self._forget(m.name, reread=True)
                        raise StoreConflict(f"maintenance {m.name} is gone") from None
                    raise
                # the index labels follow the status that decides them, written by the
                # executor alone (a person's request changes no status, and the requester
                # admission policy lets only the executor change powerplane.io labels)
                have = (done.get("metadata") or {}).get("labels") or {}
                if status_changed and not _deleting(done) and any(
                        have.get(k) != v for k, v in ours.items()):
                    done = self._relabel(done, ours)
                m.resource_version = _version(done)
        except BaseException:
            m.resource_version = expected
            raise
        self._audit(audit, done)
        self._written(m)
        return m

    # -- deletion: an abandon, never silent -------------------------------------------------
    def _deletion_record(self, old: dict[str, Any], m: NodeMaintenance) -> AuditRecord | None:
        """The audit record of a deletion, with the write that first acts on it (the
        abandon it stands for taking the maintenance back through ``Returning``, or
        refusing a request not admitted yet); None for every other write."""
        a = m.spec.abandon
        if not _deleting(old) or a is None or a.actor != DELETION_ACTOR:
            return None
        before = _phase(old)
        if before in _TERMINAL:
            return None
        refused = before == Phase.PENDING.value and m.phase is Phase.REFUSED
        if not refused and not (_abandoned_by_deletion(m)
                                and not _abandoned_by_deletion(from_object(old))):
            return None  # not the write that first acts on it
        return self._executor_record(m, f"deleted in phase {before}: {a.reason}")

    def _executor_record(self, m: NodeMaintenance, detail: str) -> AuditRecord:
        who = self.authenticated_identity()
        return AuditRecord(
            actor=DELETION_ACTOR, via="kubernetes", action=Action.ABANDON,
            reason=f"the {KIND} {m.name} was deleted", node=m.node, maintenance=m.name,
            detail=detail, recorded_by=who.user,
            rule="a deletion is an abandon; the API server's audit log names who deleted "
                 "it, and the admission let only a user who may abandon it do so")

    def _release(self, obj: dict[str, Any], m: NodeMaintenance) -> dict[str, Any]:
        """Take :data:`FINALIZER` off a deleted maintenance that has ended: the API server
        then removes the object (one ``PUT`` naming the version it read)."""
        have = list((obj.get("metadata") or {}).get("finalizers") or [])
        if FINALIZER not in have:
            return obj
        meta = _meta(obj, {"metadata": {"finalizers": [f for f in have if f != FINALIZER]}},
                     {}, str(obj["metadata"]["resourceVersion"]))
        body = {k: v for k, v in obj.items() if k != "status"}
        try:
            return self._send({**body, "metadata": meta})
        except httpx2.HTTPStatusError as exc:
            if self._code(exc) == 404:  # gone already: what it asked for
                return obj
            raise

    def release_deleted(self, mine: Callable[[str], bool] | None = None) -> list[str]:
        """Let every deleted maintenance that had already ended go (its finalizer taken
        off, the deletion audited), of the nodes ``mine`` accepts (None: every node): the
        executor's pass does it (core's ``run_pass``; the operator for the sites whose
        Lease it holds); the names released. Those still active are abandoned by their
        reconcile instead. Costs nothing while there is none (the objects seen so are
        kept aside as they are read or watched)."""
        now = time.monotonic()
        if not self.watched and (self._swept is None or now - self._swept >= SWEEP_S):
            # no watch tells of an ended one being deleted: look among the ended ones
            self._swept = now
            self._list({ACTIVE_LABEL: "false"})
        with self._seen_lock:
            candidates = [self._seen[n] for n in self._releasable if n in self._seen]
        done = []
        for obj in candidates:
            name = str(obj["metadata"]["name"])
            if mine is not None and not mine(str((obj.get("spec") or {}).get("node") or "")):
                continue
            try:
                m = from_object(obj)
                with self._errors(f"releasing the deleted {PLURAL}.{GROUP} {name}"):
                    self._release(obj, m)
                self._audit(self._executor_record(
                    m, f"deleted after it ended ({_phase(obj)}): nothing to undo"), obj)
            except (KubernetesStoreError, ValueError) as exc:
                log.warning("%s", exc)
                continue
            self._forget(name)
            self.ledger_entries.forget(name)
            done.append(name)
        return done

    def _relabel(self, obj: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
        """Set the index labels after the status that decides them (a 409 re-reads: the
        body is already written, only the label is behind)."""
        name = obj["metadata"]["name"]
        for _ in range(_TRIES):
            rv = str((obj.get("metadata") or {}).get("resourceVersion"))
            body = {**obj, "metadata": _meta(obj, {}, labels, rv)}
            try:
                return self._send(body)
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) != 409:
                    raise
            fresh = self._read(name)
            if fresh is None:
                return obj
            obj = fresh
        log.warning("%s %s: the labels %s could not be set (it kept changing); readers "
                    "decide by its phase", KIND, name, labels)
        return obj

    def _written(self, m: NodeMaintenance) -> None:
        self.writes += 1
        if self.after_write is not None:
            self.after_write(m)

    # -- the dispatch ledger (powerplane.lifecycle.ledger) ----------------------------------
    def record_dispatch(self, m: NodeMaintenance, d: Dispatch) -> None:
        """``d``'s ledger entry, before it is sent (:mod:`.ledger`)."""
        self.ledger_entries.record(m, d, LedgerKind.DISPATCH)

    def record_not_applied(self, m: NodeMaintenance, d: Dispatch) -> None:
        """The entry saying evidence showed ``d`` did not take effect."""
        self.ledger_entries.record(m, d, LedgerKind.NOT_APPLIED)

    def ledger(self, m: NodeMaintenance) -> list[LedgerEntry]:
        """``m``'s ledger, oldest first."""
        return self.ledger_entries.entries(m)

    # -- audit -----------------------------------------------------------------------------
    def _audit(self, rec: AuditRecord | None, about: dict[str, Any] | None,
               signer: Sealer | None = None) -> None:
        if rec is None:
            return
        rec = self.recorded(rec)
        with self._errors(f"writing the audit record of {rec.maintenance or rec.node} "
                          f"({AUDIT_PLURAL}.{GROUP})"):
            rec = self._append(rec, signer=signer)
        self._event(rec, about)

    def _append(self, rec: AuditRecord, name: str | None = None,
                signer: Sealer | None = None) -> AuditRecord:
        """Create ``rec``'s object (under ``name``, else a fresh one), chained in this
        store's trail (:mod:`.trail`); what the client raises passes to the caller."""
        with self._trail_lock:
            if self._trail is None:
                self._trail = TrailWriter(trail_name(self.authenticated_identity().user))
            trail = self._trail

        def read(found: str) -> dict[str, Any] | None:
            try:
                return _plain(self.client.get(MaintenanceAuditResource, found))
            except httpx2.HTTPStatusError as exc:
                if self._code(exc) == 404:
                    return None
                raise

        return trail.append(
            rec, lambda r: audit_object(r, name),
            lambda obj: self.client.create(MaintenanceAuditResource(**obj)), read,
            signer if signer is not None else self.signer)

    @property
    def signer(self) -> Sealer | None:
        """The deployment's audit key (loaded on first use): each record this store writes
        carries its signed checkpoint (:mod:`.trail`); None: chained, not sealed."""
        if callable(self._signer) and not hasattr(self._signer, "sign"):
            self._signer = self._signer()
        return self._signer  # type: ignore[return-value]

    @property
    def trail(self) -> str | None:
        """This store's audit trail (None: it has written no record yet)."""
        return self._trail.trail if self._trail is not None else None

    def audit_trails(self) -> dict[str, list[Any]]:
        """Every writer's trail, its entries in order (``powerplane audit verify``; see
        :mod:`.trail`)."""
        with self._errors(f"listing {AUDIT_PLURAL}.{GROUP}"):
            try:
                objs = [_plain(o) for o in self.client.list(MaintenanceAuditResource)]
            except httpx2.HTTPStatusError as exc:
                if not self.create_missing and self._code(exc) == 404:
                    return {}
                raise
        return dict(trails_of(objs))

    def append_audits(self, records: Sequence[AuditRecord],
                      signer: Sealer | None = None) -> None:
        """Append a call's records (each its own object, chained; each sealed with
        ``signer``, else the store's own key, where there is one)."""
        for rec in records:
            about = self._seen.get(rec.maintenance) if rec.maintenance else None
            self._audit(rec, about, signer=signer)

    def recorded(self, rec: AuditRecord) -> AuditRecord:
        """``rec`` as this store writes it: a record of another identity than the one the
        API server knows this store's client as names that client as ``recordedBy`` (the
        audit admission policy lets only a recorder write it so)."""
        if rec.recorded_by:
            return rec
        me = self.authenticated_identity().user
        if rec.actor == me:
            return rec
        return dataclasses.replace(rec, recorded_by=me)

    def _event(self, rec: AuditRecord, about: dict[str, Any] | None) -> None:
        """The record's Event (a notification, not the record: one that cannot be written
        is logged)."""
        involved = (about or {}).get("metadata") if about is not None else None
        event = event_object(rec, self.namespace, involved)
        try:
            self.client.create(cast(Event, Event.from_dict(event)))
        except (httpx2.HTTPError, OSError) as exc:
            answer = answer_of(exc)
            log.warning("the Event of %s on %s could not be written (%s); the audit record "
                        "was", rec.action.value, rec.maintenance or rec.node,
                        f"HTTP {answer.code}" if answer is not None else type(exc).__name__)

    def append_audit(self, rec: AuditRecord) -> None:
        """Append one audit record on its own (and its Event)."""
        about = self._seen.get(rec.maintenance) if rec.maintenance else None
        self._audit(rec, about)

    def audit(self, node: str | None = None) -> list[AuditRecord]:
        """The audit trail (of one node), in commit order."""
        labels: dict[str, Any] | None = \
            {NODE_LABEL: label_value(node)} if node is not None else None
        with self._errors(f"listing {AUDIT_PLURAL}.{GROUP}"):
            try:
                objs = [_plain(o) for o in
                        self.client.list(MaintenanceAuditResource, labels=labels)]
            except httpx2.HTTPStatusError as exc:
                if not self.create_missing and self._code(exc) == 404:
                    return []
                raise
            objs.sort(key=_version)
            found = [record_of(o) for o in objs]
        return [r for r in found if node is None or r.node == node]
