"""Loopback fakes the suite starts itself for the negative checks: a closed port, and a
server that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
from types import TracebackType

__all__ = ["SilentServer", "closed_port"]

HOST = "127.0.0.1"


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then closed at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


class SilentServer:
    """Accepts every connection on a loopback port, reads nothing, answers nothing.

    Use as a context manager; connections are held open until it stops.
    """

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name="powerplane-conformance-silent", daemon=True
        )

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(2)
        for conn in self._held:
            conn.close()
        self._sock.close()
