"""The page's login: the OpenID Connect authorization-code flow with PKCE, server side.

``GET /auth/login`` sends the browser to the issuer with a fresh ``state``, ``nonce`` and
PKCE ``code_challenge`` (S256); ``GET /auth/callback`` exchanges the code (with its
``code_verifier``) at the token endpoint, verifies the ID token (signature by the issuer's
JWKS, ``iss``, ``aud`` = the client id, ``exp``, ``nonce``) and starts a server-side
session: the browser holds only a random id in an ``HttpOnly; Secure; SameSite=Strict``
cookie. Every unsafe method of a session must carry its CSRF token in ``X-CSRF-Token``
(the page reads it from ``/api/v1/whoami``). ``POST /auth/logout`` ends the session.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from powerplane import Identity
from powerplane_servers.problems import ProblemError
from powerplane_servers.settings import ServeSettings, secret_value

if TYPE_CHECKING:
    from powerplane_servers.auth import OidcVerifier

__all__ = ["CSRF_HEADER", "SESSION_COOKIE", "Session", "Sessions", "auth_routes"]

SESSION_COOKIE = "pp_session"
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True)
class Session:
    identity: Identity
    csrf: str
    expires: float


@dataclass(frozen=True)
class _Pending:
    verifier: str
    nonce: str
    expires: float


class Sessions:
    """Sessions and logins under way, in this process's memory (a restart logs out)."""

    def __init__(self, settings: ServeSettings) -> None:
        self.ttl = settings.limits.session_ttl_s
        self._sessions: dict[str, Session] = {}
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def start(self, identity: Identity) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        session = Session(identity, secrets.token_urlsafe(32), time.monotonic() + self.ttl)
        with self._lock:
            self._sessions[sid] = session
        return sid, session

    def get(self, sid: str) -> Session | None:
        with self._lock:
            found = self._sessions.get(sid)
            if found is not None and found.expires < time.monotonic():
                del self._sessions[sid]
                return None
            return found

    def end(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    def begin_login(self) -> tuple[str, _Pending]:
        state = secrets.token_urlsafe(24)
        pending = _Pending(secrets.token_urlsafe(48), secrets.token_urlsafe(24),
                           time.monotonic() + 600)
        with self._lock:
            now = time.monotonic()
            for key in [k for k, p in self._pending.items() if p.expires < now]:
                del self._pending[key]
            if len(self._pending) > 10_000:
                raise ProblemError(429, "Too many logins under way", "try again later",
                                   "usage", error="RateLimited")
            self._pending[state] = pending
        return state, pending

    def finish_login(self, state: str) -> _Pending | None:
        with self._lock:
            found = self._pending.pop(state, None)
        if found is None or found.expires < time.monotonic():
            return None
        return found


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def auth_routes(app: FastAPI, settings: ServeSettings, verifier: OidcVerifier | None,
                sessions: Sessions) -> None:
    """``/auth/login``, ``/auth/callback``, ``/auth/logout`` (when ``oidc.client_id`` is set)."""
    oidc = settings.oidc
    if oidc is None or oidc.client_id is None or verifier is None:
        return
    from powerplane_servers.auth import OidcVerifier, Unauthenticated

    client_id = oidc.client_id
    id_tokens = OidcVerifier(oidc.model_copy(update={"audience": client_id}))

    def redirect_uri(request: Request) -> str:
        return str(request.url_for("auth_callback"))

    @app.get("/auth/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        meta = await verifier.metadata()
        if meta.authorization_endpoint is None:
            raise ProblemError(503, "Issuer has no authorization endpoint",
                               "the issuer's discovery document names none", "channel",
                               error="IssuerUnavailable", exit_code=1)
        state, pending = sessions.begin_login()
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": client_id,
            "redirect_uri": redirect_uri(request), "scope": " ".join(oidc.scopes),
            "state": state, "nonce": pending.nonce,
            "code_challenge": _challenge(pending.verifier), "code_challenge_method": "S256",
        })
        return RedirectResponse(f"{meta.authorization_endpoint}?{query}", status_code=302)

    @app.get("/auth/callback", name="auth_callback", include_in_schema=False)
    async def callback(request: Request, code: str = "", state: str = "") -> Response:
        pending = sessions.finish_login(state) if state else None
        if pending is None or not code:
            raise Unauthenticated("the login's state is unknown or expired; log in again")
        meta = await verifier.metadata()
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": redirect_uri(request), "client_id": client_id,
                "code_verifier": pending.verifier}
        secret = secret_value(oidc.client_secret)
        if secret:
            form["client_secret"] = secret
        resp = await id_tokens._http().post(str(meta.token_endpoint), data=form)
        if resp.status_code != 200:
            raise Unauthenticated("the issuer refused the authorization code")
        token = resp.json().get("id_token")
        if not isinstance(token, str):
            raise Unauthenticated("the issuer returned no ID token")
        claims = await id_tokens.verify(token)
        if claims.get("nonce") != pending.nonce:
            raise Unauthenticated("the ID token's nonce is not this login's")
        sid, _ = sessions.start(id_tokens.identity(claims))
        out = RedirectResponse("/", status_code=303)
        out.set_cookie(SESSION_COOKIE, sid, max_age=sessions.ttl, path="/", secure=True,
                       httponly=True, samesite="strict")
        return out

    @app.post("/auth/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        sid = request.cookies.get(SESSION_COOKIE)
        session = sessions.get(sid) if sid else None
        if session is not None and sid is not None:
            if request.headers.get(CSRF_HEADER) != session.csrf:
                raise ProblemError(403, "CSRF check failed",
                                   f"logout needs the {CSRF_HEADER} header of its session",
                                   "policy", error="CsrfFailed", exit_code=3)
            sessions.end(sid)
        out = Response(status_code=204)
        out.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True,
                          samesite="strict")
        return out
