"""Who is asking, as FastAPI dependencies: authentication, the identity, the per-identity
rate limits and the auth-proxy mode's ``Origin`` check.

Every API request that costs work is rate-limited per identity (:mod:`.ratelimit`): reads,
pre-flight and acts take from the caller's request bucket (:data:`Who`), acts from its act
bucket too (:data:`Actor`); an unauthenticated caller's bucket is its address, taken from
by each failed authentication and checked before a bearer token is verified. A refusal is
429 with ``Retry-After``, audited (its repeats folded into one record with a count). In
the auth-proxy mode every unsafe request is checked for its ``Origin`` (:mod:`.origin`).

What they need is the application's state (``request.app.state``): ``settings``,
``verifier``, ``sessions``, ``limits`` (:class:`Limits`) and, for its life, ``surface``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from powerplane import Identity
from powerplane.lifecycle import Action, action_for_intent, action_for_request
from powerplane_servers.auth import (
    OidcVerifier,
    Unauthenticated,
    kubernetes_identity,
    proxy_identity,
)
from powerplane_servers.origin import origin_refusal
from powerplane_servers.problems import ProblemError
from powerplane_servers.ratelimit import RateLimiter
from powerplane_servers.session import CSRF_HEADER, SESSION_COOKIE, Sessions
from powerplane_servers.settings import ServeSettings
from powerplane_servers.surface import INTENTS, Surface

__all__ = ["UNSAFE", "Actor", "Limits", "Who", "act_limit", "credential", "identity",
           "read_limit", "sessions_of", "settings_of", "surface_of"]

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Limits:
    """The buckets: ``work`` (every request that costs work; unauthenticated addresses)
    and ``acts`` (acts, besides)."""

    work: RateLimiter
    acts: RateLimiter

    @classmethod
    def of(cls, settings: ServeSettings) -> Limits:
        limits = settings.limits
        return cls(
            work=RateLimiter(limits.requests_per_minute, limits.request_burst,
                             max_keys=limits.max_identities),
            acts=RateLimiter(limits.acts_per_minute, limits.act_burst,
                             max_keys=limits.max_identities))


# -- the application's state --------------------------------------------------------------

def surface_of(request: Request) -> Surface:
    found = request.app.state.surface
    assert isinstance(found, Surface)
    return found


def settings_of(request: Request) -> ServeSettings:
    found = request.app.state.settings
    assert isinstance(found, ServeSettings)
    return found


def sessions_of(request: Request) -> Sessions:
    found = request.app.state.sessions
    assert isinstance(found, Sessions)
    return found


def _verifier_of(request: Request) -> OidcVerifier | None:
    found = request.app.state.verifier
    assert found is None or isinstance(found, OidcVerifier)
    return found


def _limits_of(request: Request) -> Limits:
    found = request.app.state.limits
    assert isinstance(found, Limits)
    return found


def credential(request: Request) -> str | None:
    """The caller's bearer token where Kubernetes mode passes it through (else None)."""
    found = getattr(request.state, "credential", None)
    return found if isinstance(found, str) else None


# -- who is asking ------------------------------------------------------------------------

def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def identity(request: Request) -> Identity:
    """The authenticated caller (a failed authentication audited and rate-limited by its
    address)."""
    work = _limits_of(request).work
    where = _address(request)
    if request.headers.get("authorization") is not None:
        # a bearer token costs its verification: not for an address over its limit
        wait = work.wait(f"unauthenticated@{where}")
        if wait > 0:
            await _refuse_unauthenticated(request, wait)
    try:
        who = await _authenticate(request)
    except Unauthenticated as exc:
        wait = work.take(f"unauthenticated@{where}")
        if wait > 0:
            await _refuse_unauthenticated(request, wait)
        node, action = await _asked(request)
        surface_of(request).record_unauthenticated(where, node, action, exc.detail)
        raise
    gateway = surface_of(request).gateway
    return gateway.identity_seen(who) if gateway is not None else who


async def _authenticate(request: Request) -> Identity:
    header = request.headers.get("authorization")
    if header is not None:
        return await _bearer(request, header)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        session = sessions_of(request).get(cookie)
        if session is None:
            raise Unauthenticated("the session has ended; log in again")
        if request.method in UNSAFE and request.headers.get(CSRF_HEADER) != session.csrf:
            raise ProblemError(403, "CSRF check failed",
                               f"an unsafe request needs the {CSRF_HEADER} header of "
                               "its session", "policy", error="CsrfFailed", exit_code=3)
        return session.identity
    proxy = settings_of(request).proxy
    if proxy is not None:
        who = proxy_identity(proxy, request.client.host if request.client else None,
                             request.headers)
        if who is not None:
            if request.method in UNSAFE:
                refused = origin_refusal(request.headers, proxy.allowed_origins)
                if refused is not None:
                    node, action = await _asked(request)
                    surface_of(request).record_denial(
                        who, action, node, f"auth proxy: {refused}")
                    raise ProblemError(403, "Cross-origin request refused", refused,
                                       "policy", error="CsrfFailed", exit_code=3)
            return who
    raise Unauthenticated("no credentials: a Bearer token, a session or the auth proxy's "
                          "identity is required")


async def _bearer(request: Request, header: str) -> Identity:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header is not a Bearer token")
    verifier = _verifier_of(request)
    gateway = surface_of(request).gateway
    if gateway is not None:  # Kubernetes mode: the API server reviews the token
        reviewed = await kubernetes_identity(gateway, verifier, token.strip())
        request.state.credential = token.strip()  # passed through, never logged
        return reviewed
    if verifier is None:
        raise Unauthenticated("bearer tokens are not accepted (no oidc: settings)")
    claims = await verifier.verify(token.strip())
    return verifier.identity(claims)


async def _asked(request: Request) -> tuple[str, Action]:
    """The node and action a request asks for, as far as it says (its body's node and
    intent, its path's request): what its refusal is recorded under."""
    node, action = "*", Action.READ
    if request.method in UNSAFE:
        try:
            body = json.loads(await request.body() or b"{}")
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = {}
        if isinstance(body, dict):
            node = str(body.get("node") or node)[:253]
            if body.get("intent") in INTENTS:
                action = action_for_intent(str(body["intent"]))
        for what in ("return", "abandon", "resolve"):
            if request.url.path.endswith(f"/{what}"):
                action = action_for_request(what)
    return node, action


# -- the rate limits ----------------------------------------------------------------------

def _too_many(who: str, wait: float) -> ProblemError:
    return ProblemError(429, "Too many requests",
                        f"{who} has made too many requests; try again in "
                        f"{max(1, int(wait + 0.999))} s", "usage", error="RateLimited",
                        headers={"Retry-After": str(max(1, int(wait + 0.999)))})


async def _refuse_unauthenticated(request: Request, wait: float) -> None:
    node, action = await _asked(request)
    where = _address(request)
    surface_of(request).record_unauthenticated(
        where, node, action, f"not tried: {_limits_of(request).work.describe()}")
    raise _too_many(f"address {where}", wait)


async def _limited(request: Request, who: Identity, bucket: RateLimiter) -> Identity:
    wait = bucket.take(f"{who.via}:{who.user}")
    if wait > 0:
        node, action = await _asked(request)
        surface_of(request).record_denial(who, action, node, bucket.describe())
        raise _too_many(who.user, wait)
    return who


async def read_limit(request: Request,
                     who: Annotated[Identity, Depends(identity)]) -> Identity:
    """The caller, a token taken from its request bucket."""
    return await _limited(request, who, _limits_of(request).work)


Who = Annotated[Identity, Depends(read_limit)]
"""The caller of a read (or pre-flight): authenticated, within its request limit."""


async def act_limit(request: Request, who: Who) -> Identity:
    """The caller of an act, a token taken from its act bucket too."""
    return await _limited(request, who, _limits_of(request).acts)


Actor = Annotated[Identity, Depends(act_limit)]
"""The caller of an act: within its request limit and its act limit."""
