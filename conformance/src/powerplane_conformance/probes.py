"""The network negatives' probes, made side by side: each in a thread of its own, with a
channel of its own, against a fake of its own (or the device, for wrong credentials).

At the first network negative of a suite class,
:func:`~powerplane_conformance.negatives.start_probes` makes every probe the selected
network negatives need (wrong credentials, closed port, silent server), at most
:data:`MAX_PROBES` at once, and waits for them; each check then takes its own probe's
result and judges it exactly as if it had made the probe itself (the evidence arrives,
as with the power plan). A probe that could not be built (``Untestable``) or went wrong
hands its exception to the check, which raises it where it would have.

Ports: a closed-port probe needs a port nothing listens on while a silent-server probe
beside it binds one. Within this process the two are kept apart: a closed port is
reserved while its probe runs, and a silent server that happens to bind a reserved
port is set aside and another is bound.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from powerplane.testing import SilentServer, free_port

if TYPE_CHECKING:
    from powerplane_conformance.session import ConformanceSession

__all__ = [
    "MAX_PROBES",
    "Pending",
    "Probes",
    "closed_port",
    "probes_of",
    "silent_server",
]

MAX_PROBES = 4
"""How many probes are made at once, at most, per session."""
HOST = "127.0.0.1"
Transport = Literal["tcp", "udp"]
T = TypeVar("T")


@dataclass(eq=False)
class Pending:
    """One probe under way (or made): what it is, which check it is for, its result."""

    key: tuple[str, str]
    """``(kind, subject key or channel)``: ``("closed-port", "pdu")``."""
    owner: str
    """The subject key of the check the probe is made for."""
    by: str
    """The check that makes it, and where (``CLOSED_PORT_UNREACHABLE on n0@pdu``)."""
    done: threading.Event = field(default_factory=threading.Event)
    value: object = None
    error: BaseException | None = None

    def result(self) -> object:
        """Wait for the probe; its result, or raise what it raised."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


class Probes:
    """A session's probes: started once, each waited for by its own check."""

    def __init__(self, limit: int = MAX_PROBES) -> None:
        self.pending: dict[tuple[str, str], Pending] = {}
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._envs: list[str] = []
        self._left = 0
        self.log: list[tuple[str, str]] = []
        """``("start" | "end", by)`` in the order the probes began and ended (for the tests)."""

    def get(self, key: tuple[str, str]) -> Pending | None:
        return self.pending.get(key)

    def keep_env(self, name: str) -> None:
        """Unset environment variable ``name`` once every probe is done (a probe that
        unset its own while another read the environment could break that one)."""
        with self._lock:
            self._envs.append(name)

    def start(self, key: tuple[str, str], owner: str, by: str,
              make: Callable[[], object]) -> Pending | None:
        """Make ``make()`` in a thread of its own (None: a probe with this key exists)."""
        with self._lock:
            if key in self.pending:
                return None
            pending = self.pending[key] = Pending(key, owner, by)
            self._left += 1

        def run() -> None:
            try:
                with self._slots:
                    with self._lock:
                        self.log.append(("start", by))
                    try:
                        pending.value = make()
                    except BaseException as exc:  # handed to the check, raised there
                        pending.error = exc
                    with self._lock:
                        self.log.append(("end", by))
            finally:
                pending.done.set()
                self._finished()

        thread = threading.Thread(target=run, daemon=True,
                                  name=f"powerplane-conformance-probe-{'-'.join(key)}")
        self._threads.append(thread)
        thread.start()
        return pending

    def _finished(self) -> None:
        with self._lock:
            self._left -= 1
            envs = self._envs if self._left == 0 else []
            if self._left == 0:
                self._envs = []
        for name in envs:
            os.environ.pop(name, None)

    def wait(self, timeout: float) -> None:
        """Wait for every probe (the session is closing), at most ``timeout`` each."""
        for thread in list(self._threads):
            thread.join(timeout)


def probes_of(session: ConformanceSession, create: bool = False) -> Probes | None:
    """The session's probes; with ``create``, made when there are none yet (None: there
    were already, and ``create`` asked for new ones only). The session owns them: it waits
    for them when it closes."""
    with session.owned_lock:
        found = session.probes if isinstance(session.probes, Probes) else None
        if not create:
            return found
        if found is not None:
            return None
        made = Probes()
        session.probes = made
        return made


_ports_lock = threading.Lock()
_reserved: set[tuple[str, int]] = set()


@contextmanager
def closed_port(transport: Transport) -> Iterator[int]:
    """A port nothing listens on, kept from this process's silent servers while open."""
    with _ports_lock:
        port = free_port(transport, HOST)
        _reserved.add((transport, port))
    try:
        yield port
    finally:
        with _ports_lock:
            _reserved.discard((transport, port))


@contextmanager
def silent_server(transport: Transport) -> Iterator[SilentServer]:
    """A :class:`~powerplane.testing.SilentServer` on a port no closed-port probe holds."""
    aside: list[SilentServer] = []
    try:
        with _ports_lock:
            while True:
                server = SilentServer(HOST, kind=transport)
                if (transport, server.port) not in _reserved:
                    break
                aside.append(server)  # held, so the next bind gets another port
    finally:
        for other in aside:
            other.close()
    with server:
        yield server
