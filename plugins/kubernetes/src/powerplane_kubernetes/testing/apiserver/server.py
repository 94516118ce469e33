""":class:`KubeApiServer`: the layers put together, and the one reaction that routes every
request through them.

A request goes as it does through a real API server's filters and handlers:
authentication and impersonation (:mod:`.authz`: ``401``, or a ``403`` for an
impersonation RBAC does not allow), an injected fault (:mod:`.faults`), authorization
(RBAC, ``403``), then its handler: a watch (:mod:`.watches`, else kmock's own stream), a
list or a read, a create, an update or a delete (:mod:`.rest`, which runs admission), an
eviction (:mod:`.kubelet`, after admission), or a review (:mod:`.authz`, never stored).
A path none of them serves goes on to kmock (its discovery endpoints, and its 404).

kmock tries a request against each reaction's filter in turn until one takes it, and a
filter costs about as much as the rest of the request, so there is one reaction, with no
filter, that routes in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.common import (
    PODS,
    REVIEWS,
    SELF_ACCESS_REVIEWS,
    SELF_REVIEWS,
    TOKEN_REVIEWS,
    Response,
    key,
    page_not_found,
    passing,
    status,
)
from powerplane_kubernetes.testing.apiserver.emulator import Emulator
from powerplane_kubernetes.testing.apiserver.faults import FaultServer
from powerplane_kubernetes.testing.apiserver.kubelet import KubeletServer
from powerplane_kubernetes.testing.apiserver.rest import RestServer
from powerplane_kubernetes.testing.apiserver.watches import WatchServer

__all__ = ["KubeApiServer", "free_port"]


class KubeApiServer(KubeletServer, WatchServer, FaultServer, RestServer):
    """kmock's Kubernetes emulator on a loopback port, refusing what a real API server
    refuses (see the package docstring).

    ::

        with KubeApiServer() as api:
            api.add_node("n1", labels={"node-role.kubernetes.io/control-plane": ""})
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")  # the cluster admin
            ...
            assert [str(r) for r in api.requests_to("PATCH")] == ["PATCH /api/v1/nodes/n1"]
    """

    def __init__(self, *, longhorn: bool = True, linger: bool = False,
                 host: str = "127.0.0.1", port: int | None = None,
                 crds: Iterable[Mapping[str, Any]] | None = None,
                 record: bool = True, admission: bool = True, enforce_rbac: bool = True,
                 bootstrap_rbac: bool = True, strict_cel: bool = True) -> None:
        self._init_base(host=host, port=port, record=record)
        self._init_authz(enforce_rbac=enforce_rbac, bootstrap=bootstrap_rbac)
        self._init_admission(admission=admission, longhorn=longhorn, strict_cel=strict_cel)
        self._init_rest(longhorn=longhorn)
        self._init_kubelet(linger=linger)
        self._init_watches()
        self._init_faults()
        if crds is None:
            from powerplane_kubernetes.crd import crd_manifests

            crds = crd_manifests()
        for manifest in crds:
            self.install_crd(manifest)

    def start(self) -> KubeApiServer:
        super().start()
        return self

    def __enter__(self) -> KubeApiServer:
        return self.start()

    # -- routing -----------------------------------------------------------------------------
    def _install(self, emulator: Emulator) -> None:
        emulator.on_answered = self._answered
        for review in (REVIEWS, SELF_ACCESS_REVIEWS, SELF_REVIEWS, TOKEN_REVIEWS):
            emulator.resources[review] = kmock.ResourceInfo(
                kind=review.rsplit("/", 1)[-1][:-1], namespaced=False)
        emulator << passing(self._react)

    def _react(self, request: kmock.Request) -> Any:
        """Every request (see the module docstring): an answer, or ``NotImplemented`` for
        kmock to serve."""
        who = self._identify(request)
        if isinstance(who, Response):
            return who
        fault = self._fault(request)
        if fault is not None:
            return fault
        _, refused = self._authorized(request, who)
        if refused is not None:
            return refused
        if request.resource is None or not request.resource.plural:
            return NotImplemented  # discovery, /version: kmock's
        resource = key(request.resource)
        if not self.longhorn and resource.startswith("longhorn.io/"):
            return page_not_found()
        out = self._route(request, resource)
        if out is NotImplemented or isinstance(out, Response):
            return out
        return Response(status=200, payload=out)

    def _route(self, request: kmock.Request, resource: str) -> Any:
        method = str(request.method.value)
        if method in ("GET", "HEAD"):
            action = request.action
            if action == kmock.action.WATCH:
                return self._watch(request)
            if action == kmock.action.LIST:
                return self._list(request)
            if action == kmock.action.FETCH:
                return self._fetch(request)
            return NotImplemented
        if method == "POST":
            review = self.reviews().get(resource)
            if review is not None:
                return review(request)
            if request.subresource == "eviction":
                return self._eviction(request)
            return self._create(request)
        handler = {"PUT": self._replace, "PATCH": self._patch,
                   "DELETE": self._delete}.get(method)
        if handler is None:
            return status(405, "MethodNotAllowed", "the server does not allow this method")
        return handler(request)

    def _eviction(self, request: kmock.Request) -> Any:
        """``pods/eviction``: admission (``CREATE``, the Eviction its object), then the
        kubelet's side."""
        if request.resource is not None and key(request.resource) == PODS \
                and request.name is not None:
            body = request.data if isinstance(request.data, dict) else None
            refused = self._admit(self._admission_request(
                request, PODS, "CREATE", request.name, body, None), PODS)
            if refused is not None:
                return refused
        return self._evict(request)


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port nothing listens on now (a connection to it is refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
