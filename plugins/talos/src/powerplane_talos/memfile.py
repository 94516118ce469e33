"""Key material handed over by path without a file on any disk: anonymous memory files.

Python's ``ssl`` loads a certificate chain only from paths (``load_cert_chain`` has no
in-memory form), and talosctl reads its talosconfig only from a path. Writing either to
a temporary file leaves the private key on disk whenever the process is killed before
it removes the file (SIGKILL, OOM, power loss). So each consumer gets a path that names
a ``memfd_create(2)`` file instead: it lives in memory (swap at worst), has no name in
any directory, and is gone when its last descriptor closes -- which the kernel does for
a SIGKILLed process too. The path is ``/proc/self/fd/N`` in this process (OpenSSL opens
it and reads a fresh, independent file description from offset 0) and ``/dev/fd/N`` in
a child that inherits descriptor N through ``pass_fds``. The file is ``0600`` and
sealed against writes once filled, so a reader cannot change what another reads.

Where ``memfd_create`` does not exist (not Linux), a pipe does the same for one reader:
a thread writes the bytes and closes the write end; the reader opens ``/dev/fd/N``.
"""

from __future__ import annotations

import fcntl
import os
import threading
from types import TracebackType

__all__ = ["MemoryFile"]

_SEALS = (
    getattr(fcntl, "F_SEAL_SEAL", 0)
    | getattr(fcntl, "F_SEAL_SHRINK", 0)
    | getattr(fcntl, "F_SEAL_GROW", 0)
    | getattr(fcntl, "F_SEAL_WRITE", 0)
)


class MemoryFile:
    """``data`` behind a descriptor that no directory names; close it when done.

    ``fd`` is close-on-exec: only a child given it in ``pass_fds`` inherits it.
    """

    def __init__(self, name: str, data: bytes) -> None:
        self._writer: threading.Thread | None = None
        self.reads_once = False
        """True for the pipe fallback: the bytes can be read by one reader, once."""
        if hasattr(os, "memfd_create"):
            flags = os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0)
            self.fd = os.memfd_create(name, flags)
            try:
                os.fchmod(self.fd, 0o600)
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
                if _SEALS and hasattr(fcntl, "F_ADD_SEALS"):
                    fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS)
                os.lseek(self.fd, 0, os.SEEK_SET)
            except BaseException:
                os.close(self.fd)
                raise
            return
        read_end, write_end = os.pipe()  # both are created non-inheritable
        self.fd = read_end
        self.reads_once = True

        def write() -> None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(write_end, view):]
            except OSError:
                pass  # the reader went away: nothing to hand over any more
            finally:
                os.close(write_end)

        self._writer = threading.Thread(target=write, name=f"memfile-{name}", daemon=True)
        self._writer.start()

    @property
    def path(self) -> str:
        """The path that opens this file in this process."""
        if os.path.isdir("/proc/self/fd"):
            return f"/proc/self/fd/{self.fd}"
        return f"/dev/fd/{self.fd}"

    @property
    def child_path(self) -> str:
        """The path that opens this file in a child that inherited ``fd`` (``pass_fds``)."""
        return f"/dev/fd/{self.fd}"

    def close(self) -> None:
        """Close the descriptor; the bytes go with the last one."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        # a pipe's writer thread ends once its reader has read all or closed (never joined:
        # a child that inherited the read end may read after this descriptor is closed)
        self._writer = None

    def __enter__(self) -> MemoryFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
