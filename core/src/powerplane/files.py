"""Reading a config file under the bounds: a regular file, its size checked before a byte of
it is read, no control character, UTF-8; and a file that grants power, trusted only where
no one else could have written it.

Every file powerplane reads as configuration (the deployment file, a roles file) is read
here, so each has the same bounds (:data:`powerplane._yaml.MAX_BYTES`) and the same
problems, each naming the file and, where it has one, the line.

**Files that grant power** (the deployment file: its channels' credentials and its policy;
the roles file: who may act; the audit signing key) are checked as sshd's ``StrictModes``
and sudo's sudoers are (:func:`trust_problems`): refused (exit 2, naming the file, what is
wrong and the fix) when the file is writable by its group or by everyone, owned by a user
who is neither root nor the one running powerplane, or inside a folder others may write
(a sticky-bit folder such as ``/tmp`` aside, as a sticky bit keeps others from replacing
what they do not own). A symlink is followed and its target, and the folders it lies in,
are what is checked. Whoever could write such a file could grant themselves any action.
"""

from __future__ import annotations

import os
import re
import stat
import typing
from pathlib import Path

from powerplane._bounds import MAX_BYTES
from powerplane.errors import ConfigError, ConfigProblem

__all__ = ["read_text", "trust_problems"]

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


def _who_writes(mode: int) -> str | None:
    """Who else may write a file or folder of ``mode`` (None: its owner alone)."""
    group, other = bool(mode & stat.S_IWGRP), bool(mode & stat.S_IWOTH)
    if group and other:
        return "its group and everyone"
    if other:
        return "everyone"
    if group:
        return "its group"
    return None


def trust_problems(file: Path, info: os.stat_result, what: str,
                   owners: set[int] | None = None) -> list[str]:
    """Why ``file`` (``info``: its ``fstat`` as opened) cannot be trusted to grant power
    (see the module docstring); empty: it can. ``what`` names it ("the roles file");
    ``owners``: the uids it may belong to (default: root and the user running
    powerplane; a roles file: root and the deployment file's owner)."""
    me = os.geteuid()
    allowed = owners if owners is not None else {0, me}
    out: list[str] = []
    real = Path(os.path.realpath(file))
    shown = f"{what} {file}" + (f" (the symlink's target {real})" if real != file.absolute()
                                else "")
    if info.st_uid not in allowed or info.st_uid not in (0, me):
        whom = ("neither root nor the user running powerplane (uid "
                f"{me})" if info.st_uid not in (0, me) else
                "neither root nor the owner of the deployment file that names it")
        out.append(f"{shown} is owned by uid {info.st_uid}, {whom}: its owner could grant "
                   f"themselves any action; fix: chown root {real} (or to the deployment "
                   "file's owner)")
    others = _who_writes(info.st_mode)
    if others is not None:
        out.append(f"{shown} is writable by {others} (mode {stat.S_IMODE(info.st_mode):04o}):"
                   " whoever can write it could grant themselves any action; fix: "
                   f"chmod go-w {real}")
    for folder in real.parents:
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if st.st_uid not in (0, me):
            out.append(f"{shown} lies in the folder {folder}, owned by uid {st.st_uid}, "
                       f"neither root nor uid {me}: its owner could replace {real.name}; "
                       f"fix: keep the file in a folder owned by root or by you")
        folder_others = _who_writes(st.st_mode)
        if folder_others is not None and not st.st_mode & stat.S_ISVTX:
            out.append(f"{shown} lies in the folder {folder}, writable by {folder_others} "
                       f"(mode {stat.S_IMODE(st.st_mode):04o}): anyone who can write there "
                       f"could replace {real.name}; fix: chmod go-w {folder} (or move the "
                       "file)")
    return out


def read_text(file: Path, source: str, missing: str,
              grants: str | None = None, owners: set[int] | None = None) -> tuple[str, int]:
    """The text of ``file`` and its size in bytes, under the bounds: a regular file (a
    FIFO, directory, device or socket is refused before it is opened, and opened without
    blocking in case it changed since), at most :data:`MAX_BYTES` (its size checked before
    a byte is read), no control character, UTF-8. Memory: the file's bytes, then its text
    (the bytes are dropped once decoded).

    ``grants``: the file grants power (``"the deployment file"``, ``"the roles file"``):
    refused (exit 2) where :func:`trust_problems` finds any (``owners`` as it says),
    checked on the file as opened.
    """
    raw = _read_file(file, source, missing, grants, owners)
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


def _read_file(file: Path, source: str, missing: str, grants: str | None = None,
               owners: set[int] | None = None) -> bytes:
    """The bytes of regular file ``file``, refused by kind and size before they are read
    (and, where it ``grants`` power, by whoever else could have written it)."""
    try:
        kind = _not_regular(os.stat(file).st_mode)
        if kind is not None:
            raise ConfigError(_not_a_file(source, kind), source=source)
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb", buffering=0, closefd=True) as handle:
            if grants is not None:
                problems = trust_problems(file, os.fstat(handle.fileno()), grants, owners)
                if problems:
                    raise ConfigError([ConfigProblem("", p) for p in problems],
                                      source=source)
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
