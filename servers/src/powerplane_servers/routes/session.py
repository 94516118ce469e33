"""Who is asking (``/api/v1/whoami``), the page at ``/`` and its login (``/auth/``).

The login is the OpenID Connect authorization-code flow with PKCE, server side (its
sessions are :mod:`powerplane_servers.session`'s): ``GET /auth/login`` sends the browser
to the issuer with a fresh ``state``, ``nonce`` and PKCE ``code_challenge`` (S256);
``GET /auth/callback`` exchanges the code (with its ``code_verifier``) at the token
endpoint, verifies the ID token (signature by the issuer's JWKS, ``iss``, ``aud`` = the
client id, ``exp``, ``nonce``) and starts a server-side session. ``POST /auth/logout`` ends
the session. The login's routes (:data:`login`) are included only when ``oidc.client_id``
is set: the application's ``state.login`` is then its :class:`Login`.
"""

import base64
import hashlib
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from powerplane_servers import models
from powerplane_servers.auth import OidcVerifier, Unauthenticated
from powerplane_servers.deps import Who, sessions_of
from powerplane_servers.problems import ProblemError
from powerplane_servers.session import CSRF_HEADER, SESSION_COOKIE
from powerplane_servers.settings import OidcSettings, ServeSettings, secret_value

__all__ = ["STATIC", "Login", "login", "page", "router"]

STATIC = resources.files("powerplane_servers") / "static"
"""The page's files (served under ``/static``; its ``index.html`` at ``/``)."""

router = APIRouter()
"""``/api/v1/whoami``."""

page = APIRouter()
"""The page at ``/``."""

login = APIRouter()
"""``/auth/login``, ``/auth/callback``, ``/auth/logout``."""


@router.get("/api/v1/whoami", response_model=models.Whoami, tags=["identity"])
async def whoami(request: Request, who: Who) -> models.Whoami:
    """The authenticated identity (and the session's CSRF token, for the page)."""
    cookie = request.cookies.get(SESSION_COOKIE)
    session = sessions_of(request).get(cookie) if cookie else None
    return models.Whoami(user=who.user, groups=list(who.groups), via=who.via,
                         csrfToken=session.csrf if session is not None else None)


@page.get("/", include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html")


# -- the login ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Login:
    """What the login needs: the issuer's settings, the client id, the verifier of bearer
    tokens (the issuer's metadata) and the verifier of ID tokens (audience: the client)."""

    oidc: OidcSettings
    client_id: str
    verifier: OidcVerifier
    id_tokens: OidcVerifier

    @classmethod
    def of(cls, settings: ServeSettings, verifier: OidcVerifier | None) -> "Login | None":
        """The login of these settings, or None where there is none (no
        ``oidc.client_id``)."""
        oidc = settings.oidc
        if oidc is None or oidc.client_id is None or verifier is None:
            return None
        return cls(oidc, oidc.client_id, verifier,
                   OidcVerifier(oidc.model_copy(update={"audience": oidc.client_id})))


def _login_of(request: Request) -> Login:
    found = request.app.state.login
    assert isinstance(found, Login)
    return found


Flow = Annotated[Login, Depends(_login_of)]


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _redirect_uri(request: Request) -> str:
    return str(request.url_for("auth_callback"))


@login.get("/auth/login", name="login", include_in_schema=False)
async def login_(request: Request, flow: Flow) -> Response:
    meta = await flow.verifier.metadata()
    if meta.authorization_endpoint is None:
        raise ProblemError(503, "Issuer has no authorization endpoint",
                           "the issuer's discovery document names none", "channel",
                           error="IssuerUnavailable", exit_code=1)
    state, pending = sessions_of(request).begin_login()
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": flow.client_id,
        "redirect_uri": _redirect_uri(request), "scope": " ".join(flow.oidc.scopes),
        "state": state, "nonce": pending.nonce,
        "code_challenge": _challenge(pending.verifier), "code_challenge_method": "S256",
    })
    return RedirectResponse(f"{meta.authorization_endpoint}?{query}", status_code=302)


@login.get("/auth/callback", name="auth_callback", include_in_schema=False)
async def callback(request: Request, flow: Flow, code: str = "",
                   state: str = "") -> Response:
    sessions = sessions_of(request)
    pending = sessions.finish_login(state) if state else None
    if pending is None or not code:
        raise Unauthenticated("the login's state is unknown or expired; log in again")
    meta = await flow.verifier.metadata()
    form = {"grant_type": "authorization_code", "code": code,
            "redirect_uri": _redirect_uri(request), "client_id": flow.client_id,
            "code_verifier": pending.verifier}
    secret = secret_value(flow.oidc.client_secret)
    if secret:
        form["client_secret"] = secret
    resp = await flow.id_tokens._http().post(str(meta.token_endpoint), data=form)
    if resp.status_code != 200:
        raise Unauthenticated("the issuer refused the authorization code")
    token = resp.json().get("id_token")
    if not isinstance(token, str):
        raise Unauthenticated("the issuer returned no ID token")
    claims = await flow.id_tokens.verify(token)
    if claims.get("nonce") != pending.nonce:
        raise Unauthenticated("the ID token's nonce is not this login's")
    sid, _ = sessions.start(flow.id_tokens.identity(claims))
    out = RedirectResponse("/", status_code=303)
    out.set_cookie(SESSION_COOKIE, sid, max_age=sessions.ttl, path="/", secure=True,
                   httponly=True, samesite="strict")
    return out


@login.post("/auth/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    sessions = sessions_of(request)
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
