"""A child process stopped by its own handle, and waiting until a peer is ready.

:class:`Subprocess` starts a command in a session of its own (so it leads a process
group), and :meth:`Subprocess.stop` terminates that group, waits, kills what is left and
reaps the child — by the handle it holds, never by name. While the child has not been
reaped its process id stays reserved, so signalling its group can reach nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

__all__ = ["PeerNotReady", "Subprocess", "wait_ready"]

_TAIL = 2000


class PeerNotReady(RuntimeError):
    """A peer did not become ready in time, or its process exited first."""


class Subprocess:
    """A running command, stopped (terminate, wait, kill, reap) by its own handle.

    ``argv`` is the command; ``cwd`` its working directory; ``env`` its whole environment
    (``None``: this process's); ``log`` a file its stdout and stderr are appended to
    (``None``: discarded). With ``group`` (the default) it starts in a new session and
    :meth:`stop` signals the whole process group, so the helpers it starts go too.
    Its stdin is ``/dev/null``. Use as a context manager or call :meth:`stop` (idempotent).
    """

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        group: bool = True,
    ) -> None:
        if not argv:
            raise ValueError("Subprocess needs a command (argv is empty)")
        self.argv: tuple[str, ...] = tuple(os.fspath(a) for a in argv)
        """The command it runs."""
        self.log: Path | None = log
        """Where its output goes, if anywhere."""
        self.group = group
        """Whether :meth:`stop` signals its whole process group."""
        self._out: IO[bytes] | None = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            self._out = open(log, "ab")  # noqa: SIM115 - closed by stop()
        try:
            self._popen: subprocess.Popen[bytes] = subprocess.Popen(
                self.argv,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL,
                stdout=self._out if self._out is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT if self._out is not None else subprocess.DEVNULL,
                start_new_session=group,
            )
        except BaseException:
            if self._out is not None:
                self._out.close()
            raise
        self._stopped = False

    @property
    def pid(self) -> int:
        """Its process id (reserved for it until :meth:`stop` reaps it)."""
        return self._popen.pid

    @property
    def alive(self) -> bool:
        """Whether it is still running (asking does not reap it)."""
        return self._exit_status() is None

    @property
    def returncode(self) -> int | None:
        """Its exit status once it ended (negative: killed by that signal), else ``None``."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        return self._exit_status()

    def log_tail(self, chars: int = _TAIL) -> str:
        """The last ``chars`` characters of its log ('' without a log)."""
        if self.log is None:
            return ""
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode(errors="replace")

    def _exit_status(self) -> int | None:
        """The exit status if the child ended, without reaping it (its pid stays ours)."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        if not hasattr(os, "waitid"):  # no way to peek without reaping: reap
            return self._popen.poll()
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self._popen.poll()
        if info is None:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status
        return -info.si_status

    def _signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to its group (or itself); only while it is not reaped."""
        if self._popen.returncode is not None:
            return  # reaped: the id may belong to someone else now
        try:
            if self.group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass  # the group is gone already

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while self._exit_status() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.1)
        return True

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate it, wait up to ``timeout`` s, kill what is left, reap it; its exit status.

        With ``group``, SIGTERM and SIGKILL go to its process group, and once it has ended
        whatever of its group remains is killed before it is reaped. Idempotent: a second
        call returns the same status and signals nothing.
        """
        if self._stopped:
            return self._popen.returncode
        self._stopped = True
        try:
            if self._exit_status() is None:
                self._signal(signal.SIGTERM)
                if not self._wait_exit(timeout):
                    self._signal(signal.SIGKILL)
                    self._wait_exit(timeout)
            if self.group:
                self._signal(signal.SIGKILL)  # helpers it left behind (it is not reaped yet)
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
        finally:
            if self._out is not None:
                self._out.close()
                self._out = None
        return self._popen.returncode

    def __enter__(self) -> Subprocess:
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Subprocess(pid={self.pid}, argv={self.argv[:1]!r}, alive={self.alive})"


def wait_ready(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    proc: Subprocess | None = None,
) -> None:
    """Call ``check`` until it returns true, backing off from 20 ms to 0.5 s between calls.

    An exception from ``check`` counts as not ready (the last one is named if time runs
    out). Raises :class:`PeerNotReady` naming ``what`` when ``timeout`` s pass, or as soon
    as ``proc`` has exited — with its exit status and the tail of its log; ``proc`` is
    stopped before the error is raised.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    last: Exception | None = None
    while True:
        if proc is not None and not proc.alive:
            status = proc.stop()
            raise PeerNotReady(_died(what, proc, status))
        try:
            if check():
                return
            last = None
        except Exception as exc:
            last = exc
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.5)
    message = f"{what} was not ready within {timeout:g} s"
    if last is not None:
        message += f" (last check failed: {type(last).__name__}: {last})"
    if proc is not None:
        proc.stop()
        tail = proc.log_tail()
        if tail:
            message += f"; last lines of {proc.log}:\n{tail}"
    raise PeerNotReady(message)


def _died(what: str, proc: Subprocess, status: int | None) -> str:
    how = f"was killed by signal {-status}" if status is not None and status < 0 else (
        f"exited with status {status}"
    )
    message = f"{what} {how} before it was ready (pid {proc.pid}, {proc.argv[0]})"
    tail = proc.log_tail()
    if tail:
        message += f"; last lines of {proc.log}:\n{tail}"
    elif proc.log is None:
        message += "; it had no log (pass log= to Subprocess to see its output)"
    return message
