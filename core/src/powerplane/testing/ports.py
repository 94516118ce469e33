"""Loopback ports for peers and negative tests: a free port, a closed port, and a server
that accepts and never answers."""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Literal

__all__ = ["PortKind", "SilentServer", "closed_port", "free_port"]

LOOPBACK = "127.0.0.1"
"""The address every helper here binds by default."""

PortKind = Literal["tcp", "udp"]
"""A transport: ``tcp`` (stream) or ``udp`` (datagram)."""


def _socket(kind: PortKind, host: str) -> socket.socket:
    if kind not in ("tcp", "udp"):
        raise ValueError(f"port kind must be 'tcp' or 'udp', not {kind!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.socket(family, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)


def free_port(kind: PortKind = "tcp", host: str = LOOPBACK) -> int:
    """A port of ``kind`` on ``host`` that was free a moment ago (bound to 0, read, closed).

    Another process may take it before the caller binds it; peers that can report the
    port they bound themselves should be asked instead.
    """
    with _socket(kind, host) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def closed_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` nothing listens on: connecting to it is refused."""
    return free_port("tcp", host)


class SilentServer:
    """Listens on a loopback port and never answers.

    TCP (the default): completes every handshake, accepts and holds each connection
    open, and never reads or writes, so a client's read times out. UDP: binds the port and
    never reads, so a client waiting for a reply datagram times out. Starts serving at
    construction; use as a context manager or call :meth:`close` (idempotent).
    """

    def __init__(self, host: str = LOOPBACK, *, kind: PortKind = "tcp") -> None:
        self.kind: PortKind = kind
        """The transport it listens on."""
        self.host = host
        """The address it is bound to."""
        self._sock = _socket(kind, host)
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        try:
            self._sock.bind((host, 0))
            self.port: int = int(self._sock.getsockname()[1])
            """The port it listens on."""
            if kind == "tcp":
                self._sock.listen(64)
                self._sock.settimeout(0.2)  # the accept loop notices close() on any platform
                self._thread = threading.Thread(
                    target=self._accept, name=f"powerplane-silent-{self.port}", daemon=True
                )
                self._thread.start()
        except BaseException:
            self._sock.close()
            raise

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._held.append(conn)

    def close(self) -> None:
        """Stop listening and close every connection it holds (clients see a reset/EOF)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            held, self._held = self._held, []
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected (a listening or UDP socket on some platforms)
        self._sock.close()
        if self._thread is not None:
            self._thread.join(5)
        for conn in held:
            conn.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
