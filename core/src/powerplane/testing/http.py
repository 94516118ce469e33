"""A JSON-over-HTTP(S) server on loopback for peers and tests: a tree of JSON resources,
hooks for the requests that change them, and the faults a device's HTTP service shows.

:class:`JsonHttpServer` serves JSON documents by path, in threads of the calling process:

- from a directory laid out as DMTF's Redfish mockups are (``<root>/<rel>/index.json`` is
  served at ``<prefix>/<rel>``, ``<root>/index.json`` at ``<prefix>``), read on first use
  and kept, so a handler's change to a document is what later GETs see; and/or from a
  mapping of paths to documents;
- :meth:`JsonHttpServer.route` adds a handler for a method and a path (exact, or a
  predicate), called with a :class:`HttpRequest` under :attr:`JsonHttpServer.lock`; it answers
  with a :class:`HttpReply`, or ``None`` to close the connection without answering; ``guard``
  runs before every route (authentication: a :class:`HttpReply` answers instead, ``None`` lets
  the request through). Without a route, a GET answers the resource (404 without one) and
  any other method 405;
- counts: :attr:`JsonHttpServer.requests` lists every request received, answered or not,
  as ``(method, path)``; :meth:`JsonHttpServer.count` counts them by method and path;
  :attr:`JsonHttpServer.dropped` counts the requests closed without an answer;
- delays: a reply's ``delay_s``, and the ``delay`` hook (seconds for a request), hold the
  answer, outside the lock, after the request was handled;
- connection drops: :meth:`JsonHttpServer.drop_next` closes the next requests without an
  answer; ``keep_alive`` (``N > 0``) answers in HTTP/1.1 and keeps each connection open
  whatever the client asks, then drops request ``N + 1`` on it, as a device that closes a
  kept-alive connection does; ``drop_with`` says how a drop closes (``close``: a FIN, the
  client reads ``RemoteDisconnected``; ``reset``: an RST, ``ConnectionResetError``);
- TLS: ``tls`` (a server certificate from :func:`~powerplane.testing.issue_cert`) serves
  HTTPS; the handshake runs in the connection's own thread, so a client that never
  completes it holds up nobody else.

Only the standard library is needed. Paths are compared without their query string and
trailing ``/``.
"""

from __future__ import annotations

import email.message
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs

from powerplane.testing.ports import LOOPBACK
from powerplane.testing.tls import TLSFiles

__all__ = ["DropWith", "HttpReply", "HttpRequest", "JsonHttpServer", "RouteHandler", "json_error"]

DropWith = Literal["close", "reset"]
"""How a dropped request's connection is closed: ``close`` (FIN) or ``reset`` (RST)."""


def normalize(path: str) -> str:
    """``path`` without its query string and trailing ``/`` (``/`` stays ``/``)."""
    return path.split("?", 1)[0].rstrip("/") or "/"


@dataclass(frozen=True)
class HttpRequest:
    """One request as a route or hook sees it."""

    method: str
    """``GET``, ``POST``, ``PATCH``, ``PUT``, ``DELETE``."""
    path: str
    """The path, without query string and trailing ``/``."""
    query: dict[str, list[str]]
    """The query string's parameters."""
    headers: email.message.Message[str, str]
    """The request headers (case-insensitive ``get``, ``[]`` and ``in``)."""
    body: bytes
    """The raw body (``b""`` without one)."""

    def json(self, default: Any = None) -> Any:
        """The body parsed as JSON; ``default`` for an empty or malformed body."""
        if not self.body:
            return default
        try:
            return json.loads(self.body)
        except ValueError:
            return default


@dataclass(frozen=True)
class HttpReply:
    """The answer to one request."""

    status: int = 200
    """The HTTP status code."""
    body: Any = None
    """A JSON-serializable document; ``None``: no body."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers."""
    delay_s: float = 0.0
    """Seconds to hold the answer (after the request was handled, outside the lock)."""


RouteHandler = Callable[[HttpRequest], HttpReply | None]
"""A route: the :class:`HttpReply` to a request, or ``None`` to close without answering."""


def json_error(status: int, message: str) -> Any:
    """The default error document: ``{"error": {"code": status, "message": message}}``."""
    return {"error": {"code": status, "message": message}}


@dataclass(frozen=True)
class _Route:
    method: str
    match: str | Callable[[str], bool]
    handler: RouteHandler

    def matches(self, request: HttpRequest) -> bool:
        if self.method != "*" and self.method != request.method:
            return False
        if isinstance(self.match, str):
            return normalize(self.match) == request.path
        return self.match(request.path)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    tls_context: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls_context is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.tls_context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # a failed handshake: the client sees it
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()


class JsonHttpServer:
    """Serves JSON resources over HTTP(S) on a loopback port (see the module docstring).

    ``root``: a directory in the mockup layout, served under ``prefix``; ``resources``:
    documents by path (they win over the directory). ``error_body(status, message)``
    writes the document of the 404 and 405 this server answers itself.
    """

    def __init__(
        self,
        root: Path | None = None,
        resources: Mapping[str, Any] | None = None,
        *,
        prefix: str = "",
        host: str = LOOPBACK,
        port: int = 0,
        tls: TLSFiles | None = None,
        guard: RouteHandler | None = None,
        delay: Callable[[HttpRequest], float] | None = None,
        keep_alive: int = 0,
        drop_with: DropWith = "close",
        error_body: Callable[[int, str], Any] = json_error,
        index: str = "index.json",
    ) -> None:
        self.root = root
        """The directory of resources, if any."""
        self.prefix = normalize(prefix) if prefix else ""
        """The path the directory is served at."""
        self.index = index
        self.guard = guard
        """Runs before every route: a :class:`HttpReply` answers instead, ``None`` passes."""
        self.delay = delay
        """Seconds to hold the answer to a request (beyond its reply's ``delay_s``)."""
        self.keep_alive = keep_alive
        """Requests answered per kept-alive connection before the next is dropped (0: off)."""
        self.drop_with: DropWith = drop_with
        self.error_body = error_body
        self.lock = threading.RLock()
        """Held while a request is routed and handled (hold it to change state safely)."""
        self.requests: list[tuple[str, str]] = []
        """Every request received, answered or not, as ``(method, path)``."""
        self.dropped = 0
        """Requests closed without an answer."""
        self._docs: dict[str, Any] = {normalize(p): d for p, d in (resources or {}).items()}
        self._routes: list[_Route] = []
        self._drop = 0
        self._server = _Server((host, port), self._handler_class())
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls.cert), str(tls.key))
            self._server.tls_context = context
        self.host = host
        """The address it listens on."""
        self.port = int(self._server.server_address[1])
        """The port it listens on."""
        scheme = "https" if tls is not None else "http"
        name = f"[{host}]" if ":" in host else host
        self.endpoint = f"{scheme}://{name}:{self.port}"
        """``scheme://host:port``."""
        self._thread: threading.Thread | None = None

    # -- resources -----------------------------------------------------------------------
    def _file(self, path: str) -> Path | None:
        if self.root is None:
            return None
        if self.prefix and path != self.prefix and not path.startswith(self.prefix + "/"):
            return None
        rel = path.removeprefix(self.prefix).strip("/")
        candidate = (self.root / rel / self.index) if rel else (self.root / self.index)
        try:
            candidate.resolve().relative_to(self.root.resolve())
        except ValueError:
            return None  # outside the root (``..``)
        return candidate if candidate.is_file() else None

    def resource(self, path: str) -> Any:
        """The document served at ``path`` (the kept, mutable one), or ``None``."""
        path = normalize(path)
        with self.lock:
            if path in self._docs:
                return self._docs[path]
            found = self._file(path)
            if found is None:
                return None
            doc = json.loads(found.read_text(encoding="utf-8"))
            self._docs[path] = doc
            return doc

    def set_resource(self, path: str, doc: Any) -> None:
        """Serve ``doc`` at ``path`` from now on (``None`` removes a document set here)."""
        with self.lock:
            if doc is None:
                self._docs.pop(normalize(path), None)
            else:
                self._docs[normalize(path)] = doc

    # -- routes and faults ---------------------------------------------------------------
    def route(self, method: str, match: str | Callable[[str], bool], handler: RouteHandler,
              ) -> None:
        """Handle ``method`` (``*``: any) on ``match`` (a path, or a predicate on the path).

        Routes are tried in the order added; the first that matches answers.
        """
        self._routes.append(_Route(method.upper(), match, handler))

    def drop_next(self, count: int = 1) -> None:
        """Close the next ``count`` requests' connections without answering."""
        with self.lock:
            self._drop += count

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """Requests received so far with this method and/or path (both ``None``: all)."""
        want = normalize(path) if path is not None else None
        with self.lock:
            return sum(1 for m, p in self.requests
                       if (method is None or m == method.upper()) and (want is None or p == want))

    def reply_error(self, status: int, message: str) -> HttpReply:
        """A :class:`HttpReply` with ``status`` and the server's error document."""
        return HttpReply(status, self.error_body(status, message))

    # -- handling ------------------------------------------------------------------------
    def _note(self, method: str, path: str, *, dropped: bool) -> None:
        with self.lock:
            self.requests.append((method, path))
            if dropped:
                self.dropped += 1

    def handle(self, request: HttpRequest) -> HttpReply | None:
        """The answer to ``request`` (recorded first), or ``None`` to drop it."""
        with self.lock:
            self.requests.append((request.method, request.path))
            if self._drop:
                self._drop -= 1
                self.dropped += 1
                return None
            if self.guard is not None:
                refused = self.guard(request)
                if refused is not None:
                    return refused
            for route in self._routes:
                if route.matches(request):
                    reply = route.handler(request)
                    if reply is None:
                        self.dropped += 1
                    return reply
            if request.method == "GET":
                doc = self.resource(request.path)
                if doc is None:
                    return self.reply_error(404, f"{request.path} does not exist")
                return HttpReply(200, doc)
            return self.reply_error(405, f"{request.method} is not allowed on {request.path}")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 only where connections are kept alive; else one request each
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            answered = 0

            def _close(self) -> None:
                self.close_connection = True
                if server.drop_with == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.connection.close()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                request = HttpRequest(self.command, normalize(path), parse_qs(query),
                                  self.headers, body)
                if server.keep_alive and self.answered >= server.keep_alive:
                    server._note(request.method, request.path, dropped=True)
                    self._close()
                    return
                reply = server.handle(request)
                if reply is None:
                    self._close()
                    return
                hold = reply.delay_s + (server.delay(request) if server.delay else 0.0)
                if hold > 0:
                    time.sleep(hold)
                if server.keep_alive:
                    self.close_connection = False  # whatever the client asked
                    self.answered += 1
                payload = json.dumps(reply.body).encode() if reply.body is not None else b""
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> JsonHttpServer:
        """Serve in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                daemon=True, name=f"powerplane-http-{self.port}",
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._server.shutdown()
            thread.join(5)
        self._server.server_close()

    def __enter__(self) -> JsonHttpServer:
        return self.start()

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def paths(self) -> Iterable[str]:
        """The paths of the documents loaded or set so far."""
        with self.lock:
            return list(self._docs)
