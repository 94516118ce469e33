"""The page's sessions: those its login (the OpenID Connect authorization-code flow with
PKCE, server side: :mod:`powerplane_servers.routes.session`) starts, and the logins under
way.

The browser holds only a random id in an ``HttpOnly; Secure; SameSite=Strict``
cookie. Every unsafe method of a session must carry its CSRF token in ``X-CSRF-Token``
(the page reads it from ``/api/v1/whoami``). ``POST /auth/logout`` ends the session.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass

from powerplane import Identity
from powerplane_servers.problems import ProblemError
from powerplane_servers.settings import ServeSettings

__all__ = ["CSRF_HEADER", "SESSION_COOKIE", "Session", "Sessions"]

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
