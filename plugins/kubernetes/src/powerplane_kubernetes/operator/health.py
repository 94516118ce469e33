"""``/metrics``, ``/healthz`` and ``/readyz`` on one port (the standard library's HTTP server).

* ``/healthz``: 200 while the operator's loop has made a pass within ``stale_after_s``
  (a loop stuck or dead is 503, so the kubelet restarts the pod);
* ``/readyz``: 200 once the host has discovered its channels and the store answered its
  last read; 503 with the reason otherwise;
* ``/metrics``: the Prometheus text exposition of :class:`.metrics.OperatorMetrics`.

The server runs in its own thread, so a probe is answered even while the event loop is
busy; it reads only values the loop publishes (a timestamp, a flag and a sentence).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from powerplane_kubernetes.operator.metrics import OperatorMetrics

__all__ = ["Health", "HealthServer"]


class Health:
    """What the loop publishes for the probes."""

    def __init__(self, stale_after_s: float = 60.0) -> None:
        self.stale_after_s = stale_after_s
        self.beat = time.monotonic()
        self.ready = False
        self.not_ready_why = "starting"

    def tick(self) -> None:
        """The loop made a pass."""
        self.beat = time.monotonic()

    def set_ready(self, ready: bool, why: str = "") -> None:
        self.ready = ready
        self.not_ready_why = why

    def alive(self) -> bool:
        return time.monotonic() - self.beat < self.stale_after_s


class HealthServer:
    """The HTTP endpoints, served from a thread until :meth:`stop`."""

    def __init__(self, health: Health, metrics: OperatorMetrics, host: str = "0.0.0.0",
                 port: int = 8080) -> None:
        state, registry = health, metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, registry.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = state.alive()
                    self._answer(200 if ok else 503,
                                 b"ok\n" if ok else b"the reconcile loop is stale\n")
                elif path == "/readyz":
                    ok = state.ready
                    self._answer(200 if ok else 503, b"ok\n" if ok else
                                 f"not ready: {state.not_ready_why}\n".encode())
                else:
                    self._answer(404, b"not found\n")

            def _answer(self, code: int, body: bytes,
                        ctype: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds: no access log

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        name="powerplane-operator-http", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
