"""A small Redfish PDU for tests: serves a copy of DMTF's public-pdu mockup, applies PowerControl.

    python redfish_pdu_server.py --port P --mockup DIR --user U --password-file F
                                 [--cert C --key K]

Prints ``READY`` once listening on 127.0.0.1:P. Every resource is the mockup's
``index.json`` for its path. ``POST .../Outlets/{id}/Outlet.PowerControl`` with
``{"PowerState": "On" | "Off" | "PowerCycle"}`` changes that outlet's state in memory (an
outlet that is off draws 0 W), unless the outlet is ``PowerControlLocked``. ``PATCH`` of an
outlet accepts ``PowerControlLocked`` and (test-only, not standard) ``PowerStateInTransition``.
Auth: HTTP basic, or a session from ``POST /redfish/v1/SessionService/Sessions``; the
service root is open. Counts requests per method at ``GET /_test/counts``.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import ssl
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

OPEN = {"/redfish", "/redfish/v1", "/redfish/v1/"}
SESSIONS = "/redfish/v1/SessionService/Sessions"


class State:
    def __init__(self, mockup: Path, user: str, password: str) -> None:
        self.mockup = mockup
        self.user = user
        self.password = password
        self.docs: dict[str, Any] = {}
        self.tokens: dict[str, str] = {}
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.watts: dict[str, float] = {}

    def doc(self, path: str) -> Any:
        path = path.rstrip("/") or "/"
        if path not in self.docs:
            file = self.mockup / path.lstrip("/").removeprefix("redfish/v1").lstrip("/")
            file = file / "index.json"
            if not file.is_file():
                return None
            self.docs[path] = json.loads(file.read_text(encoding="utf-8"))
        return self.docs[path]


def _error(status: int, message: str) -> tuple[int, Any]:
    return status, {"error": {"code": "Base.1.0.GeneralError", "message": message,
                              "@Message.ExtendedInfo": [{"Message": message}]}}


class Handler(BaseHTTPRequestHandler):
    state: State
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _authorized(self) -> bool:
        st = self.state
        token = self.headers.get("X-Auth-Token")
        if token and token in st.tokens:
            return True
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            return user == st.user and pw == st.password
        return False

    def _route(self, method: str) -> None:
        st = self.state
        path = self.path.split("?")[0].rstrip("/") or "/"
        with st.lock:
            st.counts[method] += 1
        if path == "/_test/counts":
            self._send(200, dict(st.counts))
            return
        if method == "POST" and path == SESSIONS:
            body = self._body()
            if body.get("UserName") != st.user or body.get("Password") != st.password:
                self._send(*_error(401, "Invalid credentials"))
                return
            token = secrets.token_hex(16)
            sid = secrets.token_hex(4)
            with st.lock:
                st.tokens[token] = sid
            self._send(201, {"Id": sid}, {"X-Auth-Token": token, "Location": f"{SESSIONS}/{sid}"})
            return
        if path not in OPEN and not self._authorized():
            self._send(*_error(401, "Authentication required"))
            return
        if method == "DELETE" and path.startswith(SESSIONS + "/"):
            sid = path.rsplit("/", 1)[1]
            with st.lock:
                for tok, s in list(st.tokens.items()):
                    if s == sid:
                        del st.tokens[tok]
            self._send(204, None)
            return
        if method == "POST" and path.endswith("/Outlet.PowerControl"):
            self._power_control(path.removesuffix("/Outlet.PowerControl"))
            return
        with st.lock:
            doc = st.doc(path)
        if doc is None:
            self._send(*_error(404, f"no resource at {path}"))
            return
        if method == "GET":
            self._send(200, doc)
        elif method == "PATCH" and "/Outlets/" in path:
            body = self._body()
            with st.lock:
                for key in ("PowerControlLocked", "PowerStateInTransition"):
                    if key in body:
                        doc[key] = bool(body[key])
            self._send(200, doc)
        else:
            self._send(*_error(405, f"{method} not allowed on {path}"))

    def _power_control(self, outlet_path: str) -> None:
        st = self.state
        body = self._body()
        want = body.get("PowerState")
        with st.lock:
            doc = st.doc(outlet_path)
            if doc is None:
                self._send(*_error(404, f"no outlet at {outlet_path}"))
                return
            if want not in ("On", "Off", "PowerCycle"):
                self._send(*_error(400, f"PowerState {want!r} is not On, Off or PowerCycle"))
                return
            if doc.get("PowerControlLocked"):
                self._send(*_error(409, "The outlet is locked against power control"))
                return
            watts = doc.get("PowerWatts")
            if isinstance(watts, dict) and watts.get("Reading"):
                st.watts.setdefault(outlet_path, watts["Reading"])
            final = "On" if want == "PowerCycle" else want
            doc["PowerState"] = final
            if isinstance(watts, dict):
                watts["Reading"] = st.watts.get(outlet_path, 100.0) if final == "On" else 0.0
        self._send(204, None)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mockup", type=Path, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password-file", type=Path, required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    password = args.password_file.read_text(encoding="utf-8").strip()
    Handler.state = State(args.mockup, args.user, password)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
