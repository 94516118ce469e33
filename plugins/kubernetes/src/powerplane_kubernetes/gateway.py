"""The Servers surface's Kubernetes mode: ``powerplane serve`` as a gateway client of the
NodeMaintenance API that acts *as its caller*, never as itself.

``powerplane serve`` (distribution ``powerplane-servers``) finds this module through the
entry point ``kubernetes`` of the group ``powerplane.servers.gateways`` when the
deployment's ``lifecycle.store`` is ``{type: kubernetes}``; it imports nothing of this
distribution by name. :func:`gateway_for` answers a :class:`KubernetesGateway` for a
:class:`~powerplane_kubernetes.store.KubernetesStore` (the deployment's store, holding the
server's own API access) and None for any other store.

Who is asking (:meth:`KubernetesGateway.review`)
    A bearer token is reviewed by the API server itself: one ``TokenReview``
    (``authentication.k8s.io/v1``, ``POST /apis/authentication.k8s.io/v1/tokenreviews``,
    with ``spec.audiences`` when configured), made with the server's own credentials (its
    ServiceAccount needs ``create`` on ``tokenreviews``). The API server runs its whole
    authenticator chain: a ServiceAccount token, and an OIDC token when the API server
    trusts that issuer. The answer's user and groups are the identity, exactly as the API
    server will put them in ``request.userInfo`` for a request carrying that token. Nothing
    is cached: a token revoked or expired is refused on the next request.

Acting (:meth:`KubernetesGateway.store_for`)
    A :class:`~powerplane_kubernetes.store.KubernetesStore` whose client authenticates as
    the caller, on the same API server (its address and CA from the server's own access):

    - ``passthrough`` (the default): the caller's own bearer token, as the caller sent it
      (the token the TokenReview authenticated). The API server sees the caller; the
      server's own ServiceAccount writes no NodeMaintenance.
    - ``impersonate`` (an explicit option): the server's own credentials plus
      ``Impersonate-User`` and one ``Impersonate-Group`` per group, added by an httpx
      transport wrapper given to lightkube's public ``transport=`` argument (the wrapped
      transport carries the same TLS settings lightkube derives for the server's access).
      The server's ServiceAccount then needs ``impersonate`` on ``users`` and ``groups``
      (:func:`powerplane_kubernetes.operator.manifests.server_impersonation_role`): it can
      act as anyone, which is why passthrough is the default.

    The stores acting as one caller share that caller's audit trail in this process (one
    chained trail per caller, ``<caller>@<host>/<token>``, not one per request), sealed by
    the deployment's audit key where it names one.

    Either way the identity the API server sees is the identity the surface gave the
    policy port and wrote in the audit record: the ValidatingAdmissionPolicy binds
    ``spec.requestedBy`` and ``spec.requesterGroups`` to ``request.userInfo``, so a request
    naming anyone else is refused by the API server.

What it keeps (:meth:`KubernetesGateway.start`)
    One watch of the NodeMaintenances, with the server's own access
    (:func:`powerplane_kubernetes.watch.following`; its ServiceAccount needs ``watch``):
    the pages' phases and each act's early refusal (the guard's active maintenances) are
    read from it, not listed per page or per act. While it has not listed (starting, or
    after a failure), they are listed as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx2
from lightkube import Client
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.models import User

from powerplane import Identity
from powerplane.lifecycle import PermanentPortError, TemporaryPortError
from powerplane_kubernetes.client import FIELD_MANAGER
from powerplane_kubernetes.errors import answer_of
from powerplane_kubernetes.store import KubernetesStore
from powerplane_kubernetes.trail import TrailWriter, trail_name
from powerplane_kubernetes.watch import MaintenanceWatch, following

__all__ = ["Credentials", "ImpersonatingTransport", "KubernetesGateway", "gateway_for"]

Credentials = Literal["passthrough", "impersonate"]
"""How the gateway acts as its caller (see the module docstring)."""


class ImpersonatingTransport(httpx2.BaseTransport):
    """An httpx transport that adds ``Impersonate-User`` and ``Impersonate-Group`` to every
    request, then sends it through ``inner``."""

    def __init__(self, inner: httpx2.BaseTransport, user: str, groups: Iterable[str]) -> None:
        self.inner = inner
        self.user = user
        self.groups = tuple(groups)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        # never trusted from elsewhere: whatever the request carried is replaced
        kept = [(k, v) for k, v in request.headers.multi_items()
                if k.lower() not in ("impersonate-user", "impersonate-group")]
        extra = [("Impersonate-User", self.user),
                 *(("Impersonate-Group", g) for g in self.groups)]
        request.headers = httpx2.Headers([*kept, *extra])
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _groups_sent(groups: Iterable[str]) -> Iterator[str]:
    """The groups to impersonate: ``system:authenticated`` is the API server's own (it adds
    it to every impersonated user), so it is not asked for."""
    return (g for g in groups if g != "system:authenticated")


class KubernetesGateway:
    """TokenReview and stores acting as the caller (see the module docstring)."""

    def __init__(self, store: KubernetesStore, *, credentials: Credentials = "passthrough",
                 audiences: Sequence[str] = ()) -> None:
        self.store = store
        self.credentials: Credentials = credentials
        self.audiences = tuple(audiences)
        self.description = (
            f"Kubernetes ({store.where}): TokenReview for bearer tokens; acts "
            + ("with the caller's own token" if credentials == "passthrough"
               else "by impersonating the caller"))
        self._watch: MaintenanceWatch | None = None
        self._kept = contextlib.AsyncExitStack()
        self._trails: dict[str, TrailWriter] = {}
        """Each caller's audit trail in this process (the stores acting as one caller
        share it: one trail per caller, not one per request; :mod:`.trail`)."""
        self._trails_lock = threading.Lock()

    async def start(self) -> None:
        """Keep the watch of the NodeMaintenances (see the module docstring)."""
        self._watch = await self._kept.enter_async_context(following(self.store))

    async def stop(self) -> None:
        """Stop the watch (its client closed); reads list again."""
        self._watch = None
        await self._kept.aclose()

    def _config(self) -> Any:
        config = getattr(self.store.client, "config", None)
        if config is None:
            raise PermanentPortError("the store's client has no API access to act with")
        return config

    def _client(self, config: Any, transport: httpx2.BaseTransport | None = None) -> Client:
        t = self.store.access.timeouts
        return Client(config, timeout=httpx2.Timeout(t.read_s, connect=t.connect_s),
                      field_manager=FIELD_MANAGER, trust_env=False, transport=transport)

    def _fail(self, exc: BaseException, what: str) -> PermanentPortError | TemporaryPortError:
        answer = answer_of(exc)
        if answer is not None:
            words = f": {answer.message}" if answer.message else ""
            cause = f"{what}: HTTP {answer.code} {answer.reason}{words}"
            if answer.code in (408, 409, 429) or answer.code >= 500:
                return TemporaryPortError(cause)
            return PermanentPortError(cause)
        return TemporaryPortError(f"{what}: the API server cannot be reached "
                                  f"({type(exc).__name__})")

    def _review_now(self, token: str) -> tuple[Identity | None, str]:
        from lightkube.models.authentication_v1 import TokenReviewSpec
        from lightkube.resources.authentication_v1 import TokenReview

        review = TokenReview(spec=TokenReviewSpec(token=token,
                                                  audiences=list(self.audiences) or None))
        try:
            answer = self.store.client.create(review)
        except (httpx2.HTTPError, OSError) as exc:
            raise self._fail(exc, "reviewing a bearer token (tokenreviews."
                                  "authentication.k8s.io)") from None
        status = answer.status
        if status is None or not status.authenticated or status.user is None \
                or not status.user.username:
            why = (status.error if status is not None and status.error else
                   "the API server did not authenticate it")
            return None, str(why)
        if self.audiences and not set(status.audiences or ()) & set(self.audiences):
            return None, ("the API server authenticated it for none of the audiences "
                          f"{', '.join(self.audiences)}")
        return Identity(user=status.user.username, groups=tuple(status.user.groups or ()),
                        via="kubernetes"), ""

    async def review(self, token: str) -> tuple[Identity | None, str]:
        """The API server's TokenReview of ``token``: its identity, or None and why not.
        An API server that cannot answer raises (no identity: nothing is done)."""
        return await asyncio.to_thread(self._review_now, token)

    def identity_seen(self, identity: Identity) -> Identity:
        """The identity the API server will see for ``identity``'s acts: impersonated, its
        groups and ``system:authenticated`` (which the API server adds); passed through,
        the TokenReview's answer, as it is."""
        if self.credentials == "passthrough" or "system:authenticated" in identity.groups:
            return identity
        return dataclasses.replace(identity,
                                   groups=(*identity.groups, "system:authenticated"))

    def store_for(self, identity: Identity, token: str | None) -> KubernetesStore | None:
        """A store whose requests the API server attributes to ``identity``: its ``token``
        (passthrough), or the server's own credentials impersonating it; None when the
        caller brought no token to pass through."""
        config = self._config()
        if self.credentials == "passthrough":
            if token is None:
                return None
            client = self._client(config._replace(user=User(token=token)))
        else:
            verify = verify_cluster(config.cluster, config.user, config.abs_file,
                                    trust_env=False)
            inner = httpx2.HTTPTransport(verify=verify)
            client = self._client(config, ImpersonatingTransport(
                inner, identity.user, _groups_sent(identity.groups)))
        with self._trails_lock:  # one trail per caller in this process, not per request
            trail = self._trails.get(identity.user)
            if trail is None:
                trail = self._trails[identity.user] = TrailWriter(trail_name(identity.user))
        store = KubernetesStore(self.store.access, namespace=self.store.namespace,
                                where=f"{self.store.where} as {identity.user}",
                                client=client, lock_duration_s=self.store.lock_duration_s,
                                signer=lambda: self.store.signer, trail=trail)
        if self._watch is not None:  # the guard's question answered by the server's watch
            store.active_view = self._watch.active_view
        return store

    def close(self) -> None:
        """Nothing of its own to close (the deployment's store is closed by its owner)."""


def gateway_for(store: object, options: Mapping[str, Any]) -> KubernetesGateway | None:
    """The gateway of ``store`` when it is a :class:`KubernetesStore`, else None.
    ``options``: ``credentials`` (``passthrough`` | ``impersonate``), ``audiences``."""
    if not isinstance(store, KubernetesStore):
        return None
    credentials = str(options.get("credentials") or "passthrough")
    if credentials not in ("passthrough", "impersonate"):
        raise ValueError(f"credentials must be passthrough or impersonate, not {credentials!r}")
    return KubernetesGateway(store, credentials="impersonate" if credentials == "impersonate"
                             else "passthrough",
                             audiences=tuple(options.get("audiences") or ()))
