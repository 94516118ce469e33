"""A Redfish PowerDistribution PDU on loopback, on :class:`powerplane.testing.JsonHttpServer`.

:class:`RedfishPduServer` serves a Redfish mockup directory (DMTF's ``public-pdu``: the
mockup's ``index.json`` for each path under ``/redfish/v1``), in threads of the calling
process, and behaves as a rack PDU does where the plugin looks:

* ``POST .../Outlets/{id}/Outlet.PowerControl`` with ``{"PowerState": "On" | "Off" |
  "PowerCycle"}`` changes that outlet's ``PowerState`` in memory (an outlet that is off
  draws 0 W; one switched on again draws what it drew before, or 100 W), unless the
  outlet is ``PowerControlLocked`` (409); any other ``PowerState`` is a 400;
* ``PATCH`` of an outlet accepts ``PowerControlLocked`` and (test-only, not standard)
  ``PowerStateInTransition``;
* auth: HTTP basic, or a session from ``POST /redfish/v1/SessionService/Sessions``
  (``X-Auth-Token`` and ``Location``; ``DELETE`` of the ``Location`` ends it); the
  service root is open; anything else without credentials is a 401.

Errors carry Redfish's error document with the message in ``@Message.ExtendedInfo``.
Every request is counted (:meth:`RedfishPduServer.counts`).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from pathlib import Path
from types import TracebackType
from typing import Any

from powerplane.testing import HttpReply, HttpRequest, JsonHttpServer, TLSFiles

__all__ = ["SESSIONS", "RedfishPduServer", "redfish_error"]

SESSIONS = "/redfish/v1/SessionService/Sessions"
"""The session collection."""
OPEN = frozenset({"/redfish", "/redfish/v1"})
"""Paths served without credentials (the service root)."""
POWER_CONTROL = "/Outlet.PowerControl"


def redfish_error(status: int, message: str) -> dict[str, Any]:
    """A Redfish error document whose message is also in ``@Message.ExtendedInfo``."""
    return {"error": {"code": "Base.1.0.GeneralError", "message": message,
                      "@Message.ExtendedInfo": [{"Message": message}]}}


class RedfishPduServer:
    """A rack PDU's Redfish service serving ``mockup`` (see the module docstring).

    ``user``/``password``: the one account; ``tls``: serve HTTPS with this certificate.
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self, mockup: Path, user: str, password: str, *, tls: TLSFiles | None = None
    ) -> None:
        self.user = user
        self._password = password
        self.tokens: dict[str, str] = {}
        """Open sessions: token -> session id."""
        self._watts: dict[str, float] = {}
        self.http = JsonHttpServer(
            mockup, prefix="/redfish/v1", tls=tls, guard=self._guard, error_body=redfish_error
        )
        """The server underneath (its ``requests``, ``lock``, ``resource``)."""
        self.http.route("POST", SESSIONS, self._login)
        self.http.route("DELETE", lambda p: p.startswith(SESSIONS + "/"), self._logout)
        self.http.route("POST", lambda p: p.endswith(POWER_CONTROL), self._power_control)
        self.http.route("PATCH", lambda p: "/Outlets/" in p, self._patch)

    @property
    def url(self) -> str:
        """``http(s)://127.0.0.1:PORT``."""
        return self.http.endpoint

    def counts(self) -> dict[str, int]:
        """Requests received so far, by method."""
        out: dict[str, int] = {}
        with self.http.lock:
            for method, _ in self.http.requests:
                out[method] = out.get(method, 0) + 1
        return out

    # -- auth --------------------------------------------------------------------------------
    def _authorized(self, request: HttpRequest) -> bool:
        token = request.headers.get("X-Auth-Token")
        if token and token in self.tokens:
            return True
        auth = request.headers.get("Authorization") or ""
        if not auth.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return user == self.user and secrets.compare_digest(password, self._password)

    def _guard(self, request: HttpRequest) -> HttpReply | None:
        if request.path in OPEN or (request.method == "POST" and request.path == SESSIONS):
            return None
        if self._authorized(request):
            return None
        return HttpReply(401, redfish_error(401, "Authentication required"))

    def _login(self, request: HttpRequest) -> HttpReply:
        body = request.json({})
        if not isinstance(body, dict) or body.get("UserName") != self.user \
                or body.get("Password") != self._password:
            return HttpReply(401, redfish_error(401, "Invalid credentials"))
        token, sid = secrets.token_hex(16), secrets.token_hex(4)
        self.tokens[token] = sid
        return HttpReply(201, {"Id": sid},
                         {"X-Auth-Token": token, "Location": f"{SESSIONS}/{sid}"})

    def _logout(self, request: HttpRequest) -> HttpReply:
        sid = request.path.rsplit("/", 1)[1]
        for token, owner in list(self.tokens.items()):
            if owner == sid:
                del self.tokens[token]
        return HttpReply(204)

    # -- outlets -----------------------------------------------------------------------------
    def _patch(self, request: HttpRequest) -> HttpReply:
        doc = self.http.resource(request.path)
        if doc is None:
            return HttpReply(404, redfish_error(404, f"no resource at {request.path}"))
        body = request.json({})
        for key in ("PowerControlLocked", "PowerStateInTransition"):
            if isinstance(body, dict) and key in body:
                doc[key] = bool(body[key])
        return HttpReply(200, doc)

    def _power_control(self, request: HttpRequest) -> HttpReply:
        outlet = request.path.removesuffix(POWER_CONTROL)
        doc = self.http.resource(outlet)
        if doc is None:
            return HttpReply(404, redfish_error(404, f"no outlet at {outlet}"))
        body = request.json({})
        want = body.get("PowerState") if isinstance(body, dict) else None
        if want not in ("On", "Off", "PowerCycle"):
            return HttpReply(400, redfish_error(
                400, f"PowerState {want!r} is not On, Off or PowerCycle"))
        if doc.get("PowerControlLocked"):
            return HttpReply(409, redfish_error(409, "The outlet is locked against power control"))
        watts = doc.get("PowerWatts")
        if isinstance(watts, dict) and watts.get("Reading"):
            self._watts.setdefault(outlet, watts["Reading"])
        final = "On" if want == "PowerCycle" else want
        doc["PowerState"] = final
        if isinstance(watts, dict):
            watts["Reading"] = self._watts.get(outlet, 100.0) if final == "On" else 0.0
        return HttpReply(204)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> RedfishPduServer:
        """Serve in a daemon thread."""
        self.http.start()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        self.http.stop()

    def __enter__(self) -> RedfishPduServer:
        return self.start()

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
