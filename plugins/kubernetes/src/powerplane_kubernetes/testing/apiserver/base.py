"""The test API server's core: its thread and event loop, its objects, its request log.

:class:`ServerBase` runs kmock's emulator (:mod:`.emulator`) on a loopback port in a thread
of its own with its own event loop, so async and sync tests, and other processes, reach it
like any API server; everything that touches the objects runs in that loop
(:meth:`ServerBase._call`), so nothing races a request.

Objects live in kmock's object store (``kmock.objects``, indexed by resource), written
only by this server: :meth:`~ServerBase._store` stamps ``resourceVersion`` (one counter for
the server), ``uid`` and ``creationTimestamp`` and announces the change on kmock's watch
bus (``ADDED``, ``MODIFIED``, ``DELETED``), which kmock's own watch stream serves.
:meth:`~ServerBase._changed` tells the layers above (RBAC, admission) that a resource they
index changed, so their caches follow every write, by the API or by a test.

Requests are kept in :attr:`~ServerBase.requests` (method, path, query, body, the client,
the user it acted as) and counted by client, verb and resource in
:meth:`~ServerBase.request_counts` (``record=False`` keeps the counts only: a benchmark's
tens of thousands of requests then cost no memory).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import kmock

from powerplane_kubernetes.testing.apiserver.common import (
    ADMISSION_KINDS,
    KINDS,
    RBAC_KINDS,
    RecordedRequest,
    copy_json,
    key,
    now,
)
from powerplane_kubernetes.testing.apiserver.crds import CrdInfo
from powerplane_kubernetes.testing.apiserver.emulator import ByResource, Emulator

__all__ = ["ServerBase"]

T = TypeVar("T")
_RESOURCES: dict[str, Any] = {}
_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}


class ServerBase:
    """The server's loop, objects and request log (see the module docstring)."""

    def _init_base(self, *, host: str, port: int | None, record: bool) -> None:
        self.host = host
        self.port = port
        """The port to serve on (None: one the OS picks)."""
        self.url = ""
        """``http://127.0.0.1:PORT`` once started."""
        self.record = record
        """Keep every request (:attr:`requests`); False: only :meth:`request_counts`."""
        self._kinds: dict[str, tuple[str, str, bool]] = dict(KINDS)
        self.crds: dict[str, CrdInfo] = {}
        """The installed CustomResourceDefinitions by resource key."""
        self._log: list[RecordedRequest] = []
        self._counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._clients: dict[str, str] = {}  # "Bearer <token>" -> client name
        self._rv = itertools.count(1)
        self._kmock: Emulator | None = None
        self._index: ByResource | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._tasks: set[asyncio.Future[Any]] = set()

    # -- hooks of the layers above -----------------------------------------------------------
    def _install(self, emulator: Emulator) -> None:
        """Put the server's reactions on kmock's emulator (the server's own layer)."""
        raise NotImplementedError

    def _started(self) -> None:
        """Called once the server serves (the objects a fresh cluster holds are stored)."""

    def _user_of(self, request: kmock.Request) -> str:
        """Who a request acts as, for the request log ("" anonymous)."""
        return ""

    def _changed(self, resource: str) -> None:
        """An object of ``resource`` was stored, changed or removed."""

    def _invalid(self, resource: str, body: dict[str, Any]) -> str | None:
        """Why ``body`` cannot be stored as a ``resource`` (the API server's validation of
        the kinds it checks), or None."""
        return None

    # -- start and stop ----------------------------------------------------------------------
    def install_crd(self, manifest: Mapping[str, Any]) -> None:
        """Serve a CustomResourceDefinition's resource (before :meth:`start`)."""
        if self._thread is not None:
            raise RuntimeError("install CRDs before the API server starts")
        for info in CrdInfo.of(manifest):
            self.crds[info.resource] = info
            group, version, _ = info.resource.split("/")
            self._kinds[info.resource] = (f"{group}/{version}", info.kind, info.namespaced)

    def start(self) -> Any:
        """Serve on ``port``, else on a port the OS picks (the server reports it; no
        free-port race)."""
        if self._thread is not None:
            raise RuntimeError("the API server was started already")
        self._thread = threading.Thread(target=self._run, name="kmock-apiserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the kmock API server did not start within 30 s")
        if self._failure is not None:
            raise RuntimeError(f"the kmock API server failed to start: {self._failure!r}")
        self._started()
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
        self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by start()
            self._failure = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with Emulator() as emulator, \
                kmock.Server(emulator, host=self.host, port=self.port) as server:
            emulator.on_request = self._received
            self._kmock = emulator
            self._index = emulator.index_objects()
            for resource, (_, kind, namespaced) in self._kinds.items():
                emulator.resources[resource] = kmock.ResourceInfo(kind=kind,
                                                                  namespaced=namespaced)
            self._install(emulator)
            self.url = f"http://{server.host}:{server.port}"
            self._ready.set()
            await self._stop.wait()

    # -- the request log ---------------------------------------------------------------------
    def _classify(self, request: kmock.Request) -> tuple[str, str, str]:
        """``(client, verb, resource)`` of a request, as :meth:`request_counts` keys it."""
        auth = next((v for k, v in request.headers.items() if k.lower() == "authorization"),
                    "")
        client = self._clients.get(auth, "")
        method = str(request.method.value)
        what = request.url.path
        verb = _VERBS.get(method, method.lower())
        if request.resource is not None:
            what = key(request.resource) + (f"/{request.subresource}"
                                            if request.subresource else "")
            if verb == "get" and request.name is None:
                watch = str(request.params.get("watch", "")).lower()
                verb = "watch" if watch not in ("", "false", "0") else "list"
        return client, verb, what

    def _received(self, request: kmock.Request) -> None:
        client, verb, what = self._classify(request)
        self._counts[client, verb, what] += 1
        if self.record:
            user = self._user_of(request)
            self._log.append(RecordedRequest(str(request.method.value), request.url.path,
                                             dict(request.params),
                                             request.data if request.body else None, client,
                                             user))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (empty with ``record=False``)."""
        return self._call(lambda: list(self._log))

    def request_counts(self) -> collections.Counter[tuple[str, str, str]]:
        """Requests received by ``(client, verb, resource)``: the verb as the API server
        authorizes it (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
        ``delete``), the resource key and subresource
        (``powerplane.io/v1alpha1/nodemaintenances/status``), or the path of a request that
        names none (``/version``). Kept with ``record=False`` too."""
        return self._call(lambda: collections.Counter(self._counts))

    def cpu_seconds(self) -> float:
        """The CPU time the server's own thread has used since it started (every request
        it answered, its watches and its stores): a benchmark's measure of what the
        fake itself costs, apart from its clients in the same process."""
        return self._call(time.thread_time)

    def kmock_history(self) -> int:
        """How many requests kmock's own history holds now: only those being answered."""
        emulator = self._emulator
        return self._call(emulator.history_size)

    def requests_to(self, method: str, path_prefix: str = "") -> list[RecordedRequest]:
        """The requests of one method whose path starts with ``path_prefix``."""
        return [r for r in self.requests
                if r.method == method.upper() and r.path.startswith(path_prefix)]

    def writes(self) -> list[RecordedRequest]:
        """Every request that may change something (``POST``, ``PUT``, ``PATCH``, ``DELETE``)."""
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    # -- objects -----------------------------------------------------------------------------
    @property
    def _emulator(self) -> Emulator:
        if self._kmock is None:
            raise RuntimeError("the API server is not started")
        return self._kmock

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the server's loop (so it never races a request) and return its value."""
        if self._loop is None:
            raise RuntimeError("the API server is not started")
        if threading.current_thread() is self._thread:
            return fn()

        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def _stamp(self, obj: dict[str, Any], resource: str, *, new: bool) -> None:
        api_version, kind, _ = self._kinds.get(resource, ("", "", True))
        if api_version:
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._rv))
        if new or "uid" not in meta:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now())

    def _store(self, resource: str, namespace: str | None, body: dict[str, Any], *,
               new: bool) -> None:
        """Stamp ``body`` and store it as the object's newest version (``new``: created,
        else an update of the stored one), announcing it to watches."""
        self._stamp(body, resource, new=new)
        name = body["metadata"]["name"]
        objects = self._emulator.objects
        found = self._find(resource, namespace, name)
        if new or found is None:
            objects[resource, namespace, name] = body
        else:
            found.create(body)
        self._publish(resource, "ADDED" if new else "MODIFIED", body)
        self._changed(resource)

    def _remove(self, resource: str, obj: Any, last: dict[str, Any] | None = None) -> None:
        """Remove a stored object, announcing it (``last``: its final state, when an update
        that emptied its finalizers removed it)."""
        if last is not None:
            obj.create(last)
        obj.delete()
        self._publish(resource, "DELETED", obj.last.raw)
        self._changed(resource)

    def _put(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> None:
        """Store an object as a test seeds the world (no request, no admission; an object
        the API server would not validate is ``ValueError``)."""
        problem = self._invalid(resource, obj)
        if problem is not None:
            raise ValueError(problem)
        self._call(lambda: self._store(resource, namespace, obj, new=True))

    def _change(self, resource: str, namespace: str | None, name: str,
                fn: Callable[[dict[str, Any]], None]) -> None:
        """Change a stored object as the world does (no request, no admission)."""
        def change() -> None:
            stored = self._emulator.objects[resource, namespace, name]
            body = copy_json(stored.raw)
            fn(body)
            self._store(resource, namespace, body, new=False)
        self._call(change)

    def _publish(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        for bus in self._emulator.buses(resource):
            task = asyncio.ensure_future(bus.put({"type": kind, "object": obj}))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _find(self, resource: str, namespace: str | None, name: str) -> Any:
        objs = self._emulator.objects
        ref = _RESOURCES.get(resource)
        if ref is None:  # kmock's resource reference, made once per resource (it parses)
            ref = _RESOURCES[resource] = kmock.resource(resource)
        found = (ref, namespace, name)
        if found in objs and not objs[found].deleted:
            return objs[found]
        return None

    def _of(self, resource: str) -> list[tuple[Any, Any]]:
        """``(key, object)`` of one resource: its own objects only (the index), or, where
        kmock's names were not found, every stored object filtered."""
        if self._index is not None:
            return self._index.of(resource)
        return [(k, obj) for k, obj in list(self._emulator.objects.items())
                if key(k[0]) == resource]

    def _iter(self, resource: str, namespace: str | None) -> Iterator[tuple[str | None, Any]]:
        for (_, ns, _), obj in self._of(resource):
            if not obj.deleted and (namespace is None or ns == namespace):
                yield ns, obj

    def _raw(self, resource: str) -> list[dict[str, Any]]:
        """The stored objects of a cluster-wide read (no copies: read them, never change
        them)."""
        return [obj.raw for _, obj in self._iter(resource, None)]

    # -- the world, as a test sees and seeds it ----------------------------------------------
    def add_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """A Secret whose ``data`` holds ``data``'s values base64-encoded."""
        import base64

        encoded = {k: base64.b64encode(v.encode("utf-8")).decode("ascii")
                   for k, v in data.items()}
        self._put("v1/secrets", namespace, {"metadata": {"name": name, "namespace": namespace},
                                            "type": "Opaque", "data": encoded})

    def add_lease(self, namespace: str, name: str, holder: str, *,
                  duration_s: int = 15) -> None:
        """A ``coordination.k8s.io/v1`` Lease held by ``holder`` (another replica)."""
        self._put("coordination.k8s.io/v1/leases", namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
                     "renewTime": now(), "acquireTime": now(), "leaseTransitions": 0},
        })

    def add_rbac(self, *docs: Mapping[str, Any]) -> None:
        """Store ClusterRoles, ClusterRoleBindings, Roles and RoleBindings (manifests as
        ``operator manifests`` prints them), and ValidatingAdmissionPolicies and their
        bindings, as a cluster they were applied to holds them; other kinds are skipped."""
        for doc in docs:
            kind = str(doc.get("kind"))
            resource = RBAC_KINDS.get(kind) or ADMISSION_KINDS.get(kind)
            if resource is None:
                continue
            body = copy_json(doc)
            namespace = body["metadata"].get("namespace") if self._kinds[resource][2] else None
            self._put(resource, namespace, body)

    def restore_object(self, resource: str, namespace: str | None,
                       body: Mapping[str, Any]) -> dict[str, Any]:
        """Put ``body`` back as the stored object, as a restore below the API server does
        (an etcd snapshot, a backup tool writing the store): no request, no
        authentication, no admission; stored at a new ``resourceVersion`` and announced
        to watches (``MODIFIED``, or ``ADDED`` where it was gone). Returns what is stored."""
        obj = copy_json(dict(body))
        name = obj["metadata"]["name"]
        problem = self._invalid(resource, obj)
        if problem is not None:
            raise ValueError(problem)

        def put() -> dict[str, Any]:
            found = self._find(resource, namespace, name)
            self._store(resource, namespace, obj, new=found is None)
            stored: dict[str, Any] = copy_json(obj)
            return stored
        return self._call(put)

    def delete_object(self, resource: str, namespace: str | None, name: str) -> bool:
        """Delete a stored object (a grant taken away); False when it was not there."""
        def delete() -> bool:
            obj = self._find(resource, namespace, name)
            if obj is None:
                return False
            self._remove(resource, obj)
            return True
        return self._call(delete)

    def rbac_objects(self) -> dict[str, list[dict[str, Any]]]:
        """The stored RBAC objects by kind, in storage order."""
        return self._call(lambda: {kind: self._raw(resource)
                                   for kind, resource in RBAC_KINDS.items()})

    def object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object (None: absent)."""
        def read() -> dict[str, Any] | None:
            obj = self._find(resource, namespace, name)
            return None if obj is None else copy_json(obj.raw)
        return self._call(read)

    def phases(self, resource: str, names: Iterable[str]) -> dict[str, str | None]:
        """``status.phase`` of each cluster-scoped object named (None: absent, or no phase
        yet), read in one call without copying the objects (a benchmark's poll)."""
        wanted = list(names)

        def read() -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for name in wanted:
                obj = self._find(resource, None, name)
                found = obj.raw.get("status") if obj is not None else None
                phase = found.get("phase") if isinstance(found, dict) else None
                out[name] = str(phase) if phase is not None else None
            return out
        return self._call(read)

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Copies of every stored object of ``resource``."""
        return self._call(lambda: [copy_json(raw) for raw in self._raw(resource)])
