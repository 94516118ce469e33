"""Watch what a call does on the side: connections it opens, processes it starts (and
their argv), and every log line it writes, so checks can prove "no I/O before refusing"
and "no secret in any message, log line or argv".

Several watches may be open at once (the network negatives' probes run side by side, each
in a thread of its own). What a call does is laid at the watch of the context it runs
in: the watch opened in the calling thread is set in a :class:`contextvars.ContextVar`,
which follows the call onto the session's event loop (a task copies the context of
whoever scheduled it) and into ``asyncio.to_thread`` workers. What happens in no watch's
context (a thread a library started) is given to every watch open at the time, as a
single watch had it before: a secret in it is never missed. A thread that works for no
call being watched (the power plan's workers) says so with :func:`unwatched`: its I/O
goes to no watch (a machine's power change is not another check's "I/O before
refusing").
"""

from __future__ import annotations

import contextvars
import logging
import socket
import subprocess
import threading
from types import TracebackType
from typing import Any

__all__ = ["IOWatch", "unwatched"]

_lock = threading.Lock()
"""Guards :data:`_open` and the patches (installed while any watch is open)."""
_open: list[IOWatch] = []
_saved: dict[str, Any] = {}
_current: contextvars.ContextVar[IOWatch | None] = contextvars.ContextVar(
    "powerplane_conformance_iowatch", default=None)


def unwatched() -> None:
    """What this thread (and the calls it schedules) does from now on belongs to no watch."""
    _current.set(_NOBODY)


def _owners() -> list[IOWatch]:
    """The watches an event in the current context belongs to: its own watch, when it is
    open; none, in an :func:`unwatched` context; else every open watch."""
    mine = _current.get()
    if mine is _NOBODY:
        return []
    with _lock:
        if mine is not None and mine in _open:
            return [mine]
        return list(_open)


class _Collect(logging.Handler):
    """The one root handler while any watch is open; routes each record to its owners."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            line = f"{record.name} (unformattable record)"
        for watch in _owners():
            watch.logs.append(line)


def _install() -> None:
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex
    orig_popen = subprocess.Popen.__init__

    def connect(sock: socket.socket, address: Any) -> None:
        for watch in _owners():
            watch.connects.append(repr(address))
        orig_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        for watch in _owners():
            watch.connects.append(repr(address))
        return orig_connect_ex(sock, address)

    def popen(proc: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        text = " ".join(map(str, args)) if isinstance(args, list | tuple) else str(args)
        for watch in _owners():
            watch.argv.append(text)
        orig_popen(proc, args, *rest, **kw)

    handler = _Collect()
    root = logging.getLogger()
    _saved.update(connect=orig_connect, connect_ex=orig_connect_ex, popen=orig_popen,
                  level=root.level, handler=handler)
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    subprocess.Popen.__init__ = popen  # type: ignore[assignment,method-assign]
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)


def _uninstall() -> None:
    socket.socket.connect = _saved["connect"]  # type: ignore[method-assign]
    socket.socket.connect_ex = _saved["connect_ex"]  # type: ignore[method-assign]
    subprocess.Popen.__init__ = _saved["popen"]  # type: ignore[method-assign]
    root = logging.getLogger()
    root.removeHandler(_saved["handler"])
    root.setLevel(_saved["level"])
    _saved.clear()


class IOWatch:
    """A context manager that records connects, subprocess argv and log lines while open:
    those of the calls made in its context, and those of no watch's context."""

    def __init__(self) -> None:
        self.connects: list[str] = []
        """Every address a socket connected to (or tried to)."""
        self.argv: list[str] = []
        """The argv of every process started, joined with spaces."""
        self.logs: list[str] = []
        """Every log record written, formatted (with any exception text)."""
        self._token: contextvars.Token[IOWatch | None] | None = None

    def __enter__(self) -> IOWatch:
        with _lock:
            if not _open:
                _install()
            _open.append(self)
        self._token = _current.set(self)
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        with _lock:
            if self in _open:
                _open.remove(self)
            if not _open and _saved:
                _uninstall()


_NOBODY = IOWatch()
"""The watch of :func:`unwatched` contexts: never opened, it records nothing."""
