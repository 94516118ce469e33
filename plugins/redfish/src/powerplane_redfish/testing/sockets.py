"""Loopback sockets for negative tests: a closed port, and a server that never answers."""

from __future__ import annotations

import socket

__all__ = ["SilentServer", "closed_port", "free_port"]


def free_port() -> int:
    """A loopback port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    return free_port()


class SilentServer:
    """Listens on a loopback port and completes TCP handshakes, but never reads or answers."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])

    def close(self) -> None:
        """Stop listening (pending connections are reset)."""
        self._sock.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
