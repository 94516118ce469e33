"""A UDP proxy in front of one BMC: counts the packets each way, and can drop the answers.

Clients talk to ``127.0.0.1:proxy.port``; each client address gets its own upstream socket
to the BMC, so answers find their way back. ``up`` and ``down`` count datagrams (client to
BMC, BMC to client); with ``drop_answers`` set, answers are counted and discarded, which
makes a BMC that acted and then went silent.
"""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType

__all__ = ["UdpProxy"]


class UdpProxy:
    """Forward UDP between clients and ``(host, port)``; a context manager."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.port: int = self.front.getsockname()[1]
        """The port clients send to."""
        self.up = 0
        """Datagrams forwarded from clients to the BMC."""
        self.down = 0
        """Datagrams from the BMC to clients (dropped ones included)."""
        self.drop_answers = False
        """When set, answers from the BMC are counted and not delivered."""
        self._back: dict[tuple[str, int], socket.socket] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="ipmi-udp-proxy", daemon=True)

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``: the proxy as a node's target."""
        return f"127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Zero both counters."""
        with self._lock:
            self.up = self.down = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            socks = [self.front, *self._back.values()]
            ready, _, _ = select.select(socks, [], [], 0.1)
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(65535)
                except OSError:
                    continue
                if sock is self.front:
                    back = self._back.get(addr)
                    if back is None:
                        back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        back.connect(self.target)
                        self._back[addr] = back
                    with self._lock:
                        self.up += 1
                    try:
                        back.send(data)
                    except OSError:
                        pass
                else:
                    client = next(a for a, s in self._back.items() if s is sock)
                    with self._lock:
                        self.down += 1
                    if not self.drop_answers:
                        self.front.sendto(data, client)

    def __enter__(self) -> UdpProxy:
        self._thread.start()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(2)
        for sock in self._back.values():
            sock.close()
        self.front.close()
