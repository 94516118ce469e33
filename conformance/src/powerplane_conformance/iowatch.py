"""Watch what a call does on the side: connections it opens, processes it starts (and
their argv), and every log line it writes, so checks can prove "no I/O before refusing"
and "no secret in any message, log line or argv"."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
from types import TracebackType
from typing import Any

__all__ = ["IOWatch"]

_lock = threading.Lock()


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.append(self.format(record))
        except Exception:
            self.sink.append(f"{record.name} (unformattable record)")


class IOWatch:
    """A context manager that records connects, subprocess argv and log lines while open."""

    def __init__(self) -> None:
        self.connects: list[str] = []
        """Every address a socket connected to (or tried to)."""
        self.argv: list[str] = []
        """The argv of every process started, joined with spaces."""
        self.logs: list[str] = []
        """Every log record written, formatted (with any exception text)."""
        self._saved: dict[str, Any] = {}
        self._handler = _Collect(self.logs)

    def __enter__(self) -> IOWatch:
        _lock.acquire()
        watch = self
        orig_connect = socket.socket.connect
        orig_connect_ex = socket.socket.connect_ex
        orig_popen = subprocess.Popen.__init__

        def connect(sock: socket.socket, address: Any) -> None:
            watch.connects.append(repr(address))
            orig_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            watch.connects.append(repr(address))
            return orig_connect_ex(sock, address)

        def popen(proc: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
            watch.argv.append(" ".join(map(str, args)) if isinstance(args, list | tuple)
                              else str(args))
            orig_popen(proc, args, *rest, **kw)

        self._saved = {"connect": orig_connect, "connect_ex": orig_connect_ex,
                       "popen": orig_popen}
        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        subprocess.Popen.__init__ = popen  # type: ignore[assignment,method-assign]
        root = logging.getLogger()
        self._saved["level"] = root.level
        root.setLevel(logging.DEBUG)
        root.addHandler(self._handler)
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            socket.socket.connect = self._saved["connect"]  # type: ignore[method-assign]
            socket.socket.connect_ex = self._saved["connect_ex"]  # type: ignore[method-assign]
            subprocess.Popen.__init__ = self._saved["popen"]  # type: ignore[method-assign]
            root = logging.getLogger()
            root.removeHandler(self._handler)
            root.setLevel(self._saved["level"])
        finally:
            _lock.release()
