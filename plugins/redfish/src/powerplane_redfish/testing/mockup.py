"""A small Redfish server for DMTF mockups: resets applied to its own state, real sessions.

Built on :class:`powerplane.testing.JsonHttpServer`: it serves ``<mockup>/<path>/index.json``
at ``/redfish/v1/<path>`` (plain HTTP on a loopback port, or HTTPS with ``tls``, in a thread of
the calling process) and adds what a static mockup lacks:

- ``POST .../Actions/ComputerSystem.Reset`` checks ``ResetType`` against what the system
  advertises (400 with ``@Message.ExtendedInfo`` otherwise) and applies it to its copy of
  ``PowerState``;
- boot evidence, as this test server models it (the mockup is static): every reset that
  boots the system (a restart or power cycle, or ``On``/``ForceOn``/``PushPowerButton``
  while it is off) sets ``LastResetTime`` to the current UTC time (microseconds, strictly
  later than the last one it served) and ``BootProgress`` to ``OSRunning`` at that time; a
  power off sets ``BootProgress.LastState`` to ``None`` at that time and leaves
  ``LastResetTime`` alone. Only properties the mockup's system has are changed: a system
  without them is served without them;
- ``POST /redfish/v1/SessionService/Sessions`` logs in (``X-Auth-Token``, ``Location``),
  ``DELETE`` of the session logs out; :attr:`MockupServer.sessions_created` and
  :attr:`MockupServer.sessions_deleted` count them;
- every other path needs a valid token or HTTP basic credentials (401 otherwise).

Knobs for tests: ``advertise`` (``values``: the mockup's annotation; ``action-info``: the same
values moved to an ``@Redfish.ActionInfo`` resource; ``none``: neither), ``reset_types``
(the reset types every system allows, instead of the mockup's), ``omit`` (top-level
properties left out of every system served, e.g. ``LastResetTime``), ``ignore_graceful``
(``GracefulShutdown`` is accepted but the OS never powers off), :meth:`drop_next` (close the
next connections without answering), and:

- ``keep_alive`` (``N > 0``): answer in HTTP/1.1 and keep each connection open whatever the
  client asks (some BMCs ignore ``Connection: close``), then, when request ``N + 1`` arrives
  on it, read it and close the connection without answering, as a BMC that closes a
  kept-alive connection does; ``drop_with`` says how (``close``: a FIN, the client reads
  ``RemoteDisconnected``; ``reset``: an RST, ``ConnectionResetError``);

and, as attributes that may change while serving:

- ``reset_delay_s``: hold the answer to every reset POST this long (the reset is applied and
  counted when it arrives);
- ``read_delay_after_reset_s``: once a reset was accepted, hold every GET of a system;
- ``refuse_if_already``: answer a reset that would leave the system where it is as iDRAC
  does: ``On``/``ForceOn`` of a system that is on is HTTP 409 with the body iDRAC sends
  (:data:`IDRAC_ALREADY_ON`, message ``IDRAC.1.6.PSU501`` "Server is already powered
  ON."), ``ForceOff``/``GracefulShutdown`` of one that is off the same with "OFF".

:attr:`MockupServer.reset_times` holds when each reset POST arrived (``time.monotonic()``).

:attr:`MockupServer.requests` lists every request received, answered or not.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from powerplane.testing import HttpReply, HttpRequest, JsonHttpServer, TLSFiles

__all__ = ["IDRAC_ALREADY_ON", "MockupServer", "redfish_error"]

_RESET_SUFFIX = "/Actions/ComputerSystem.Reset"
_SESSIONS = "/redfish/v1/SessionService/Sessions"
_OPEN = {"/redfish", "/redfish/v1"}
_ON_AFTER = {"On", "ForceOn", "GracefulRestart", "ForceRestart", "PowerCycle", "PushPowerButton"}
_OFF_AFTER = {"ForceOff", "GracefulShutdown"}
_RESTARTS = {"GracefulRestart", "ForceRestart", "PowerCycle"}


IDRAC_ALREADY_ON: dict[str, Any] = {"error": {
    "@Message.ExtendedInfo": [{
        "Message": "Server is already powered ON.",
        "MessageArgs": [], "MessageArgs@odata.count": 0,
        "MessageId": "IDRAC.1.6.PSU501",
        "RelatedProperties": [], "RelatedProperties@odata.count": 0,
        "Resolution": "No response action is required.",
        "Severity": "Informational",
    }],
    "code": "Base.1.2.GeneralError",
    "message": "A general error has occurred. See ExtendedInfo for more information",
}}
"""iDRAC's answer (HTTP 409) to ``ResetType: On`` of a server that is on, as captured from an
iDRAC 9 (dell/dellemc-openmanage-ansible-modules issue 132)."""


def _already(state: str) -> dict[str, Any]:
    body = copy.deepcopy(IDRAC_ALREADY_ON)
    body["error"]["@Message.ExtendedInfo"][0]["Message"] = (
        f"Server is already powered {state.upper()}.")
    return body


def redfish_error(message_id: str, message: str) -> dict[str, Any]:
    """A Redfish error body: ``error`` with one ``@Message.ExtendedInfo`` message."""
    return {
        "error": {
            "code": "Base.1.0.GeneralError",
            "message": "See @Message.ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": message_id,
                    "Message": message,
                    "Severity": "Warning",
                }
            ],
        }
    }


_MESSAGE_IDS = {404: "Base.1.0.ResourceMissingAtURI", 405: "Base.1.0.OperationNotAllowed"}


def _error_body(status: int, message: str) -> dict[str, Any]:
    return redfish_error(_MESSAGE_IDS.get(status, "Base.1.0.GeneralError"), message)


def _missing(path: str) -> HttpReply:
    return HttpReply(404, redfish_error("Base.1.0.ResourceMissingAtURI", f"{path} does not exist."))


class MockupServer:
    """Serves one DMTF mockup folder with live power state and a session service."""

    def __init__(
        self,
        mockup: Path,
        *,
        username: str = "admin",
        password: str = "mockup-Passw0rd",
        advertise: Literal["values", "action-info", "none"] = "values",
        ignore_graceful: bool = False,
        reset_types: Iterable[str] | None = None,
        keep_alive: int = 0,
        drop_with: Literal["close", "reset"] = "close",
        omit: Iterable[str] = (),
        tls: TLSFiles | None = None,
    ) -> None:
        self.root = mockup
        self.omit = frozenset(omit)
        """Top-level properties left out of every system served."""
        self.boots: dict[str, int] = {}
        """System path -> boots modelled since the server started."""
        self._last_time: dt.datetime | None = None
        self.reset_types = list(reset_types) if reset_types is not None else None
        self.reset_delay_s = 0.0
        """How long each reset POST's answer is held."""
        self.read_delay_after_reset_s = 0.0
        """How long each GET of a system is held once a reset was accepted."""
        self.refuse_if_already = False
        """Answer a reset that changes nothing with iDRAC's 409 (see the module docstring)."""
        self.reset_times: list[float] = []
        """When each reset POST arrived (``time.monotonic()``), refused or not."""
        self.username = username
        self.password = password
        self.advertise = advertise
        self.ignore_graceful = ignore_graceful
        self._allowed: dict[str, list[str]] = {}
        self.power: dict[str, str | None] = {}
        """System path -> its PowerState (None: the resource has no PowerState)."""
        self.sessions: dict[str, str] = {}
        """Live sessions: token -> session path."""
        self.sessions_created = 0
        self.sessions_deleted = 0
        self.resets: list[tuple[str, str]] = []
        """Every accepted reset, as (system path, ResetType)."""
        self.http = JsonHttpServer(
            mockup,
            {"/redfish": {"v1": "/redfish/v1/"}},
            prefix="/redfish/v1",
            tls=tls,
            guard=self._guard,
            delay=self._hold,
            keep_alive=keep_alive,
            drop_with=drop_with,
            error_body=_error_body,
        )
        """The HTTP server underneath (requests, drops, keep-alive)."""
        self.lock = self.http.lock
        self._load_systems()
        self.http.route("POST", _SESSIONS, self._login)
        self.http.route("DELETE", lambda p: p.startswith(_SESSIONS + "/"), self._logout)
        self.http.route("POST", lambda p: p.endswith(_RESET_SUFFIX), self._reset)
        self.http.route("GET", lambda p: p.startswith(_SESSIONS + "/"), self._session)
        self.http.route("GET", lambda p: p in self.power, self._system)
        self.port = self.http.port
        self.endpoint = self.http.endpoint

    # -- what the HTTP server counts ----------------------------------------------------------
    @property
    def keep_alive(self) -> int:
        """Requests answered per kept-alive connection before the next is dropped (0: off)."""
        return self.http.keep_alive

    @property
    def drop_with(self) -> Literal["close", "reset"]:
        """How a dropped request's connection closes."""
        return self.http.drop_with

    @property
    def requests(self) -> list[tuple[str, str]]:
        """Every request received, answered or not, as (method, path)."""
        return self.http.requests

    @property
    def dropped(self) -> int:
        """Requests closed without an answer (by :meth:`drop_next` or ``keep_alive``)."""
        return self.http.dropped

    def drop_next(self, count: int = 1) -> None:
        """Close the next ``count`` connections without answering."""
        self.http.drop_next(count)

    # -- the mockup's resources -----------------------------------------------------------------
    def _read(self, path: str) -> dict[str, Any] | None:
        doc = self.http.resource(path)
        return doc if isinstance(doc, dict) else None

    def _load_systems(self) -> None:
        collection = self._read("/redfish/v1/Systems") or {}
        for member in collection.get("Members", []):
            path = member["@odata.id"].rstrip("/")
            doc = self._read(path)
            if doc is None:
                continue
            self.power[path] = doc.get("PowerState", "On")
            action = doc.get("Actions", {}).get("#ComputerSystem.Reset", {})
            values = list(action.get("ResetType@Redfish.AllowableValues", []))
            if self.reset_types is not None:
                values = list(self.reset_types)
            self._allowed[path] = values
            action.pop("ResetType@Redfish.AllowableValues", None)
            if self.advertise == "values":
                action["ResetType@Redfish.AllowableValues"] = values
            elif self.advertise == "action-info":
                info_path = f"{path}/ResetActionInfo"
                action["@Redfish.ActionInfo"] = info_path
                self.http.set_resource(info_path, {
                    "@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
                    "@odata.id": info_path,
                    "Id": "ResetActionInfo",
                    "Name": "Reset Action Info",
                    "Parameters": [
                        {"Name": "ResetType", "Required": True, "DataType": "String",
                         "AllowableValues": values}
                    ],
                })

    @property
    def systems(self) -> list[str]:
        """The system paths of the mockup, in collection order."""
        return list(self.power)

    def live_sessions(self) -> int:
        """Sessions created and not yet deleted."""
        with self.lock:
            return len(self.sessions)

    # -- request handling -------------------------------------------------------------------------
    def _authorized(self, headers: Any) -> bool:
        token = headers.get("X-Auth-Token")
        if token is not None:
            return token in self.sessions
        basic = headers.get("Authorization", "")
        if basic.startswith("Basic "):
            try:
                user, _, word = base64.b64decode(basic[6:]).decode().partition(":")
            except ValueError:
                return False
            return bool(user == self.username and word == self.password)
        return False

    def _guard(self, request: HttpRequest) -> HttpReply | None:
        """401 for every request but the login and a GET of the service root, unless
        authorized by a session token or basic credentials."""
        if request.method == "POST" and request.path == _SESSIONS:
            return None
        if request.method == "GET" and request.path in _OPEN:
            return None
        if self._authorized(request.headers):
            return None
        return HttpReply(401, redfish_error("Base.1.0.NoValidSession",
                                            "There is no valid session established."))

    def _login(self, request: HttpRequest) -> HttpReply:
        data = request.json({})
        if not isinstance(data, dict):
            data = {}
        if data.get("UserName") != self.username or data.get("Password") != self.password:
            return HttpReply(401, redfish_error("Base.1.0.InvalidCredentials",
                                                "The credentials supplied are not valid."))
        sid = secrets.token_hex(8)
        token = secrets.token_hex(16)
        location = f"{_SESSIONS}/{sid}"
        self.sessions[token] = location
        self.sessions_created += 1
        doc = {"@odata.id": location, "Id": sid, "Name": "User Session",
               "UserName": self.username}
        return HttpReply(201, doc, {"X-Auth-Token": token, "Location": location})

    def _logout(self, request: HttpRequest) -> HttpReply:
        for token, location in list(self.sessions.items()):
            if location == request.path:
                del self.sessions[token]
                self.sessions_deleted += 1
                return HttpReply(204)
        return _missing(request.path)

    def _session(self, request: HttpRequest) -> HttpReply:
        path = request.path
        if path in self.sessions.values():
            return HttpReply(200, {"@odata.id": path, "Id": path.rsplit("/", 1)[1]})
        return _missing(path)

    def _reset(self, request: HttpRequest) -> HttpReply:
        self.reset_times.append(time.monotonic())
        system = request.path.removesuffix(_RESET_SUFFIX)
        if system not in self.power:
            return _missing(system)
        data = request.json({})
        value = data.get("ResetType") if isinstance(data, dict) else None
        if value not in self._allowed[system]:
            return HttpReply(400, redfish_error(
                "Base.1.0.ActionParameterValueNotInList",
                f"The value {value} for the parameter ResetType is not in the list of "
                "acceptable values.",
            ))
        if self.refuse_if_already:
            now = self.power[system]
            if now == "On" and value in ("On", "ForceOn"):
                return HttpReply(409, _already("on"))
            if now == "Off" and value in ("ForceOff", "GracefulShutdown"):
                return HttpReply(409, _already("off"))
        self.resets.append((system, value))
        if value == "GracefulShutdown" and self.ignore_graceful:
            return HttpReply(204)
        before = self.power[system]
        if value in _OFF_AFTER:
            self.power[system] = "Off"
            if before != "Off":
                self._powered_off(system)
        elif value in _ON_AFTER:
            self.power[system] = "On"
            if value in _RESTARTS or before == "Off":
                self._booted(system)
        return HttpReply(204)

    def _now(self) -> str:
        """The current UTC time, strictly later than the last one handed out."""
        now = dt.datetime.now(dt.UTC)
        if self._last_time is not None and now <= self._last_time:
            now = self._last_time + dt.timedelta(microseconds=1)
        self._last_time = now
        return now.isoformat(timespec="microseconds")

    def _booted(self, system: str) -> None:
        """The test server's model of a boot: new LastResetTime, BootProgress OSRunning."""
        self.boots[system] = self.boots.get(system, 0) + 1
        doc = self._read(system) or {}
        when = self._now()
        if "LastResetTime" in doc:
            doc["LastResetTime"] = when
        progress = doc.get("BootProgress")
        if isinstance(progress, dict):
            progress["LastState"] = "OSRunning"
            progress["LastStateTime"] = when

    def _powered_off(self, system: str) -> None:
        """The test server's model of a power off: BootProgress None (LastResetTime kept)."""
        progress = (self._read(system) or {}).get("BootProgress")
        if isinstance(progress, dict):
            progress["LastState"] = "None"
            progress["LastStateTime"] = self._now()

    def _system(self, request: HttpRequest) -> HttpReply:
        path = request.path
        doc = copy.deepcopy(self._read(path) or {})
        for name in self.omit:
            doc.pop(name, None)
        state = self.power[path]
        if state is None:
            doc.pop("PowerState", None)
        else:
            doc["PowerState"] = state
        return HttpReply(200, doc)

    def _hold(self, request: HttpRequest) -> float:
        """How long to hold an answer (outside the lock), where a delay knob says so."""
        if request.method == "POST" and request.path.endswith(_RESET_SUFFIX):
            return self.reset_delay_s
        if request.method == "GET" and request.path in self.power and self.resets:
            return self.read_delay_after_reset_s
        return 0.0

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> MockupServer:
        """Serve in a daemon thread."""
        self.http.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self.http.stop()

    def __enter__(self) -> MockupServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_log(self) -> Iterable[tuple[str, str]]:
        """The accepted resets so far."""
        with self.lock:
            return list(self.resets)
