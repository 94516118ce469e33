"""An HTTP proxy in front of moto that throttles chosen EC2 actions, for the retry tests.

:func:`start_throttling_proxy` serves on a free loopback port in a thread. A POST whose
``Action`` has a count left in :attr:`ThrottlingProxy.throttle` is answered ``503`` with
EC2's ``RequestLimitExceeded`` error body (as EC2 answers a throttled call) and not
forwarded; one with a count left in :attr:`ThrottlingProxy.hang` is forwarded (so moto
carries it out) and its answer is never sent (the client's read times out); every other
request is forwarded to moto. :attr:`ThrottlingProxy.seen` lists every action, in order.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ERROR_XML", "ThrottlingProxy", "start_throttling_proxy"]

ERROR_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
    b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
    b"</Error></Errors><RequestID>throttle-proxy</RequestID></Response>"
)
"""EC2's error body for a throttled call."""


@dataclass
class ThrottlingProxy:
    """Forwards to moto; answers RequestLimitExceeded to the next N calls of an action."""

    upstream: str
    """moto's URL."""
    url: str = ""
    """The proxy's own URL (point the channel here)."""
    throttle: Counter[str] = field(default_factory=Counter)
    """Action -> how many of its next calls to throttle."""
    hang: Counter[str] = field(default_factory=Counter)
    """Action -> how many of its next calls to carry out and never answer."""
    seen: list[str] = field(default_factory=list)
    """Every action received, throttled or not, in order."""
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set by :meth:`stop`: releases the requests held unanswered."""
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.stopping.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.thread is not None:
            self.thread.join(timeout=10)


def start_throttling_proxy(upstream: str) -> ThrottlingProxy:
    """A proxy in front of ``upstream`` on a free loopback port, serving in a thread."""
    proxy = ThrottlingProxy(upstream)
    up = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            action = urllib.parse.parse_qs(body.decode()).get("Action", [""])[0]
            proxy.seen.append(action)
            if proxy.throttle[action] > 0:
                proxy.throttle[action] -= 1
                self.send_response(503)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(ERROR_XML)))
                self.end_headers()
                self.wfile.write(ERROR_XML)
                return
            hold = proxy.hang[action] > 0
            if hold:
                proxy.hang[action] -= 1
            conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=30)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "connection")}
            conn.request("POST", self.path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if hold:  # carried out; the answer never comes
                proxy.stopping.wait(60)
                self.close_connection = True
                return
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                     "server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    proxy.server = server
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    proxy.thread = threading.Thread(target=server.serve_forever, daemon=True)
    proxy.thread.start()
    return proxy
