"""Reading a config file under the bounds: a regular file, its size checked before a byte of
it is read, no control character, UTF-8.

Every file powerplane reads as configuration (the deployment file, a roles file) is read
here, so each has the same bounds (:data:`powerplane._yaml.MAX_BYTES`) and the same
problems, each naming the file and, where it has one, the line.
"""

from __future__ import annotations

import os
import re
import stat
import typing
from pathlib import Path

from powerplane._bounds import MAX_BYTES
from powerplane.errors import ConfigError, ConfigProblem

__all__ = ["read_text"]

_KINDS_OF_FILE = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII control characters YAML refuses anywhere in a document (all but tab, line
feed and carriage return): found in the bytes, before the text is decoded."""


def _not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file, else ``None``."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS_OF_FILE if test(mode)), "not a regular file")


def read_text(file: Path, source: str, missing: str) -> tuple[str, int]:
    """The text of ``file`` and its size in bytes, under the bounds: a regular file (a
    FIFO, directory, device or socket is refused before it is opened, and opened without
    blocking in case it changed since), at most :data:`MAX_BYTES` (its size checked before
    a byte is read), no control character, UTF-8. Memory: the file's bytes, then its text
    (the bytes are dropped once decoded)."""
    raw = _read_file(file, source, missing)
    found = _CONTROL.search(raw)
    if found is not None:
        at = found.start()
        line = raw.count(b"\n", 0, at) + 1
        raise ConfigError(
            [ConfigProblem("", f"YAML error: control characters are not allowed "
                               f"(U+{raw[at]:04X} at byte {at})", line)],
            source=source,
        )
    size = len(raw)
    try:
        return raw.decode("utf-8"), size
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            [ConfigProblem("", f"not UTF-8 text (byte {exc.start})", line)], source=source
        ) from None


def _read_file(file: Path, source: str, missing: str) -> bytes:
    """The bytes of regular file ``file``, refused by kind and size before they are read."""
    try:
        kind = _not_regular(os.stat(file).st_mode)
        if kind is not None:
            raise ConfigError(_not_a_file(source, kind), source=source)
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb", buffering=0, closefd=True) as handle:
            raw = _read_bounded(handle, source)
    except FileNotFoundError:
        raise ConfigError(missing, source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", source=source) from None
    if raw is None:
        raise ConfigError(f"the file is larger than {MAX_BYTES} bytes ({MAX_BYTES // 2**20} "
                          "MiB), the most a config may hold", source=source)
    return raw


def _not_a_file(source: str, kind: str) -> str:
    return (f"config file {source} is {kind}, not a regular file; name the deployment "
            "file itself with --config FILE")


def _read_bounded(handle: typing.BinaryIO, source: str = "<file>") -> bytes | None:
    """The bytes of regular file ``handle``, or ``None`` past :data:`MAX_BYTES`: its size
    is checked before a byte is read, then it is read in one call of that size (one buffer,
    no copy); a file that grew meanwhile is read on, a mebibyte at a time, to the bound."""
    info = os.fstat(handle.fileno())
    kind = _not_regular(info.st_mode)
    if kind is not None:  # replaced between the stat and the open: still never read
        raise ConfigError(_not_a_file(source, kind), source=source)
    size = info.st_size
    if size > MAX_BYTES:
        return None
    chunks = [handle.read(size + 1)] if size else []
    total = sum(len(c) for c in chunks)
    while total <= MAX_BYTES:
        chunk = handle.read(min(1 << 20, MAX_BYTES + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_BYTES:
        return None
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)
