"""A UDP proxy in front of one BMC: counts the packets each way, and cuts the answers.

Clients talk to ``127.0.0.1:proxy.port``; each client address gets its own upstream socket
to the BMC, so answers find their way back. ``up`` and ``down`` count datagrams (client to
BMC, BMC to client), and ``payloads`` counts the RMCP+ payload types clients send (a login
attempt is one RAKP message 1, :data:`RAKP1`); with ``drop_answers`` set, answers are
counted and discarded, which makes a BMC that acted and then went silent.

:meth:`UdpProxy.cut_after` is the fault battery: the first ``k`` answers go through, and
from the next one on every answer is dropped (``drop``), replaced by as many random bytes
(``random``), cut to its first half (``truncate``), or the proxy's port is closed, so the
client's next datagram is answered ICMP port unreachable (``close``). Requests always reach
the BMC until the port is closed: a cut answer may belong to a command the BMC carried out.
"""

from __future__ import annotations

import os
import select
import socket
import threading
from types import TracebackType
from typing import Literal

__all__ = ["FAULTS", "OPEN_SESSION", "RAKP1", "Fault", "UdpProxy", "payload_type"]

Fault = Literal["drop", "random", "truncate", "close"]
FAULTS: tuple[Fault, ...] = ("drop", "random", "truncate", "close")
"""Every way :meth:`UdpProxy.cut_after` cuts the answers."""

OPEN_SESSION = 0x10
"""The RMCP+ payload type of an Open Session Request (IPMI 2.0 table 13-16)."""
RAKP1 = 0x12
"""The RMCP+ payload type of RAKP message 1: the client names the user, one per login."""


def payload_type(data: bytes) -> int | None:
    """The RMCP+ payload type of a client's datagram; None for IPMI 1.5 (or not IPMI).

    RMCP header (4 bytes: version 06h, reserved, sequence, class 07h = IPMI), then the
    session header: authentication type 06h means RMCP+, its next byte the payload type
    in bits 0..5 (bits 6 and 7: encrypted, authenticated).
    """
    if len(data) < 6 or data[0] != 0x06 or data[3] & 0x1F != 0x07 or data[4] != 0x06:
        return None
    return data[5] & 0x3F


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
        self.delivered = 0
        """Answers delivered to clients unchanged."""
        self.payloads: dict[int, int] = {}
        """RMCP+ payload type -> datagrams of it forwarded from clients to the BMC."""
        self.cut = 0
        """Answers cut (dropped, replaced or truncated) by the fault."""
        self._fault: Fault | None = None
        self._after = 0
        self._closed = False
        self._back: dict[tuple[str, int], socket.socket] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="ipmi-udp-proxy", daemon=True)

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``: the proxy as a node's target."""
        return f"127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Zero the counters."""
        with self._lock:
            self.up = self.down = self.delivered = self.cut = 0
            self.payloads.clear()

    def logins(self) -> int:
        """Login attempts clients made through the proxy (RAKP messages 1 forwarded)."""
        with self._lock:
            return self.payloads.get(RAKP1, 0)

    def cut_after(self, k: int, fault: Fault) -> None:
        """Deliver the next ``k`` answers, then cut every answer by ``fault``."""
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}; got {fault!r}")
        with self._lock:
            self._fault = fault
            self._after = self.delivered + k

    def _deliver(self, data: bytes) -> bytes | None:
        """What reaches the client for one answer (None: nothing); closes the port for
        ``close``."""
        with self._lock:
            self.down += 1
            if self.drop_answers:
                return None
            if self._fault is None or self.delivered < self._after:
                self.delivered += 1
                return data
            self.cut += 1
            fault = self._fault
        if fault == "drop":
            return None
        if fault == "random":
            return os.urandom(len(data))
        if fault == "truncate":
            return data[: len(data) // 2]
        self._close_front()
        return None

    def _close_front(self) -> None:
        if not self._closed:
            self._closed = True
            self.front.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            socks = [*self._back.values()] + ([] if self._closed else [self.front])
            try:
                ready, _, _ = select.select(socks, [], [], 0.05)
            except (OSError, ValueError):
                continue
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
                    kind = payload_type(data)
                    with self._lock:
                        self.up += 1
                        if kind is not None:
                            self.payloads[kind] = self.payloads.get(kind, 0) + 1
                    try:
                        back.send(data)
                    except OSError:
                        pass
                else:
                    client = next(a for a, s in self._back.items() if s is sock)
                    out = self._deliver(data)
                    if out is not None and not self._closed:
                        try:
                            self.front.sendto(out, client)
                        except OSError:
                            pass

    def __enter__(self) -> UdpProxy:
        self._thread.start()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(2)
        for sock in self._back.values():
            sock.close()
        self._close_front()
