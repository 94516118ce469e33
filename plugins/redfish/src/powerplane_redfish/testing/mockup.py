"""A small Redfish server for DMTF mockups: resets applied to its own state, real sessions.

It serves ``<mockup>/<path>/index.json`` at ``/redfish/v1/<path>`` (plain HTTP on a loopback
port, in a thread of the calling process) and adds what a static mockup lacks:

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
- ``read_delay_after_reset_s``: once a reset was accepted, hold every GET of a system.

:attr:`MockupServer.requests` lists every request received, answered or not.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import secrets
import socket
import struct
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

__all__ = ["MockupServer"]

_RESET_SUFFIX = "/Actions/ComputerSystem.Reset"
_SESSIONS = "/redfish/v1/SessionService/Sessions"
_OPEN = {"/redfish", "/redfish/v1"}
_ON_AFTER = {"On", "ForceOn", "GracefulRestart", "ForceRestart", "PowerCycle", "PushPowerButton"}
_OFF_AFTER = {"ForceOff", "GracefulShutdown"}
_RESTARTS = {"GracefulRestart", "ForceRestart", "PowerCycle"}


def _error(message_id: str, message: str) -> dict[str, Any]:
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
    ) -> None:
        self.root = mockup
        self.omit = frozenset(omit)
        """Top-level properties left out of every system served."""
        self.boots: dict[str, int] = {}
        """System path -> boots modelled since the server started."""
        self._last_time: dt.datetime | None = None
        self.reset_types = list(reset_types) if reset_types is not None else None
        self.keep_alive = keep_alive
        """Requests answered per kept-alive connection before the next is dropped (0: off)."""
        self.drop_with: Literal["close", "reset"] = drop_with
        self.reset_delay_s = 0.0
        """How long each reset POST's answer is held."""
        self.read_delay_after_reset_s = 0.0
        """How long each GET of a system is held once a reset was accepted."""
        self.username = username
        self.password = password
        self.advertise = advertise
        self.ignore_graceful = ignore_graceful
        self.lock = threading.Lock()
        self._docs: dict[str, dict[str, Any]] = {}
        self._allowed: dict[str, list[str]] = {}
        self.power: dict[str, str | None] = {}
        """System path -> its PowerState (None: the resource has no PowerState)."""
        self.sessions: dict[str, str] = {}
        """Live sessions: token -> session path."""
        self.sessions_created = 0
        self.sessions_deleted = 0
        self.resets: list[tuple[str, str]] = []
        """Every accepted reset, as (system path, ResetType)."""
        self.requests: list[tuple[str, str]] = []
        """Every request received, as (method, path)."""
        self._drop = 0
        self.dropped = 0
        """Requests closed without an answer (by :meth:`drop_next` or ``keep_alive``)."""
        self._load_systems()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    # -- the mockup's resources -----------------------------------------------------------------
    def _file(self, path: str) -> Path | None:
        rel = path.removeprefix("/redfish/v1").strip("/")
        candidate = self.root / rel / "index.json" if rel else self.root / "index.json"
        return candidate if candidate.is_file() else None

    def _read(self, path: str) -> dict[str, Any] | None:
        doc = self._docs.get(path)
        if doc is None:
            found = self._file(path)
            if found is None:
                return None
            doc = json.loads(found.read_text(encoding="utf-8"))
            self._docs[path] = doc
        return doc

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
                self._docs[info_path] = {
                    "@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
                    "@odata.id": info_path,
                    "Id": "ResetActionInfo",
                    "Name": "Reset Action Info",
                    "Parameters": [
                        {"Name": "ResetType", "Required": True, "DataType": "String",
                         "AllowableValues": values}
                    ],
                }

    @property
    def systems(self) -> list[str]:
        """The system paths of the mockup, in collection order."""
        return list(self.power)

    def live_sessions(self) -> int:
        """Sessions created and not yet deleted."""
        with self.lock:
            return len(self.sessions)

    def drop_next(self, count: int = 1) -> None:
        """Close the next ``count`` connections without answering."""
        with self.lock:
            self._drop += count

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
            return user == self.username and word == self.password
        return False

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], dict[str, Any] | None] | None:
        """The answer to one request: (status, headers, JSON body), or None to drop it."""
        path = path.split("?", 1)[0].rstrip("/") or "/"
        with self.lock:
            self.requests.append((method, path))
            if self._drop:
                self._drop -= 1
                self.dropped += 1
                return None
            if method == "POST" and path == _SESSIONS:
                return self._login(body)
            if not (method == "GET" and path in _OPEN) and not self._authorized(headers):
                return 401, {}, _error("Base.1.0.NoValidSession",
                                       "There is no valid session established.")
            if method == "DELETE" and path.startswith(_SESSIONS + "/"):
                return self._logout(path)
            if method == "POST" and path.endswith(_RESET_SUFFIX):
                return self._reset(path.removesuffix(_RESET_SUFFIX), body)
            if method == "GET":
                return self._get(path)
            return 405, {}, _error("Base.1.0.OperationNotAllowed", "Operation not allowed.")

    def _login(self, body: bytes) -> tuple[int, dict[str, str], dict[str, Any] | None]:
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            data = {}
        if data.get("UserName") != self.username or data.get("Password") != self.password:
            return 401, {}, _error("Base.1.0.InvalidCredentials",
                                   "The credentials supplied are not valid.")
        sid = secrets.token_hex(8)
        token = secrets.token_hex(16)
        location = f"{_SESSIONS}/{sid}"
        self.sessions[token] = location
        self.sessions_created += 1
        doc = {"@odata.id": location, "Id": sid, "Name": "User Session",
               "UserName": self.username}
        return 201, {"X-Auth-Token": token, "Location": location}, doc

    def _logout(self, path: str) -> tuple[int, dict[str, str], dict[str, Any] | None]:
        for token, location in list(self.sessions.items()):
            if location == path:
                del self.sessions[token]
                self.sessions_deleted += 1
                return 204, {}, None
        return 404, {}, _error("Base.1.0.ResourceMissingAtURI", f"{path} does not exist.")

    def _reset(self, system: str, body: bytes) -> tuple[int, dict[str, str], dict[str, Any] | None]:
        if system not in self.power:
            return 404, {}, _error("Base.1.0.ResourceMissingAtURI", f"{system} does not exist.")
        try:
            value = json.loads(body or b"{}").get("ResetType")
        except ValueError:
            value = None
        if value not in self._allowed[system]:
            return 400, {}, _error(
                "Base.1.0.ActionParameterValueNotInList",
                f"The value {value} for the parameter ResetType is not in the list of "
                "acceptable values.",
            )
        self.resets.append((system, value))
        if value == "GracefulShutdown" and self.ignore_graceful:
            return 204, {}, None
        before = self.power[system]
        if value in _OFF_AFTER:
            self.power[system] = "Off"
            if before != "Off":
                self._powered_off(system)
        elif value in _ON_AFTER:
            self.power[system] = "On"
            if value in _RESTARTS or before == "Off":
                self._booted(system)
        return 204, {}, None

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
        doc = self._docs[system]
        when = self._now()
        if "LastResetTime" in doc:
            doc["LastResetTime"] = when
        progress = doc.get("BootProgress")
        if isinstance(progress, dict):
            progress["LastState"] = "OSRunning"
            progress["LastStateTime"] = when

    def _powered_off(self, system: str) -> None:
        """The test server's model of a power off: BootProgress None (LastResetTime kept)."""
        progress = self._docs[system].get("BootProgress")
        if isinstance(progress, dict):
            progress["LastState"] = "None"
            progress["LastStateTime"] = self._now()

    def _get(self, path: str) -> tuple[int, dict[str, str], dict[str, Any] | None]:
        if path.startswith(_SESSIONS + "/"):
            if path in self.sessions.values():
                return 200, {}, {"@odata.id": path, "Id": path.rsplit("/", 1)[1]}
            return 404, {}, _error("Base.1.0.ResourceMissingAtURI", f"{path} does not exist.")
        doc = self._read(path) if path != "/redfish" else {"v1": "/redfish/v1/"}
        if doc is None:
            return 404, {}, _error("Base.1.0.ResourceMissingAtURI", f"{path} does not exist.")
        if path in self.power:
            doc = copy.deepcopy(doc)
            for name in self.omit:
                doc.pop(name, None)
            state = self.power[path]
            if state is None:
                doc.pop("PowerState", None)
            else:
                doc["PowerState"] = state
        return 200, {}, doc

    def _note_dropped(self, method: str, path: str) -> None:
        with self.lock:
            self.requests.append((method, path.split("?", 1)[0].rstrip("/") or "/"))
            self.dropped += 1

    def _hold(self, method: str, path: str) -> None:
        """Sleep (outside the lock) where a delay knob says so."""
        path = path.split("?", 1)[0].rstrip("/")
        if method == "POST" and path.endswith(_RESET_SUFFIX):
            delay = self.reset_delay_s
        elif method == "GET" and path in self.power and self.resets:
            delay = self.read_delay_after_reset_s
        else:
            delay = 0.0
        if delay > 0:
            time.sleep(delay)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 only where connections are kept alive; else one request each
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            answered = 0

            def _drop(self) -> None:
                server._note_dropped(self.command, self.path)
                self.close_connection = True
                if server.drop_with == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.connection.close()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if server.keep_alive and self.answered >= server.keep_alive:
                    self._drop()
                    return
                answer = server.handle(self.command, self.path, self.headers, body)
                if answer is None:
                    self.close_connection = True
                    return
                server._hold(self.command, self.path)
                if server.keep_alive:
                    self.close_connection = False  # whatever the client asked
                    self.answered += 1
                status, headers, doc = answer
                payload = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if doc is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> MockupServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=f"mockup-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> MockupServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_log(self) -> Iterable[tuple[str, str]]:
        """The accepted resets so far."""
        with self.lock:
            return list(self.resets)
