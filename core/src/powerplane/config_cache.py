"""The validated-config cache: a command does not parse and validate an unchanged file again.

A one-node command (``powerplane state n0``) on a 10,000-node file spent most of its time
reading the YAML and validating nodes it never touches. :func:`load_cached` loads a
deployment file as :func:`~powerplane.config.load_config` does, through a cache of what an
earlier load of the same file proved:

- **What is kept**: the file's document (the parsed YAML or JSON, as JSON), written only
  after the whole file validated. Nothing derived from it (no model, no decision), so a
  hit is the same input validated by the same code, never a stored verdict on policy or
  channels.
- **What a hit skips**: parsing the text (PyYAML is not even imported) and validating the
  nodes, a pure function of the document and the channel types' code: each node is
  validated on first use (:class:`~powerplane.config.ProvenNodes`). Every other section
  and every channel is validated again as on every load, because they may name other
  files (a ``policy:`` roles file is read again; a ``verify:`` CA bundle must still
  exist); a problem found there is reported by a full load, with its lines.
- **The key**: SHA-256 of the file's text, its absolute path, the cache format, the
  registry's plugin set (every entry point with its distribution and version,
  ``POWERPLANE_LOAD_PLUGINS``, the failures: :meth:`~powerplane.plugins.Registry.signature`)
  and the size and modification time of every source file at the top of core's package and
  of each plugin's (an editable install's changed node model or target parser changes the
  key too).
- **Where**: ``$XDG_CACHE_HOME/powerplane/configs`` (``~/.cache`` when unset), a folder
  of mode 0700, each entry a file of mode 0600, one per deployment file path, at most
  :data:`MAX_ENTRIES` of at most :data:`MAX_ENTRY_BYTES` each and :data:`MAX_TOTAL_BYTES`
  in all (the least recently written removed first).
- **Hostile entries grant nothing**: an entry is used only when the folder is this user's
  and nobody else may write it (not a symbolic link, owned by the effective user, no
  group or other bits), the entry is a regular file of this user that nobody else may
  read or write (opened without following a link), and its HMAC-SHA256, under a 32-byte
  key of this user's (``key`` in the same folder, the same checks), verifies. Anything
  else is a miss: the file is loaded and validated in full. No pickle: the entry is
  JSON, read by the standard library's decoder, so reading it runs no code.
- **No secret**: a deployment file holds secret references only (a field typed
  :class:`~powerplane.secrets.SecretRef` refuses a plain value); the entry is the same
  document, written only once it validated, and only when no channel config holds a plain
  string where its type declares a secret (:func:`plain_secret`).

``POWERPLANE_CONFIG_CACHE=off`` (or ``0``, ``no``, ``false``) turns the cache off.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from powerplane.config import (
    Deployment,
    _config_text,
    _parse_config,
    parse_text,
)
from powerplane.errors import ConfigError

if TYPE_CHECKING:
    from powerplane.config import ConfiguredChannel
    from powerplane.plugins import Registry

__all__ = ["ENV_CACHE", "MAX_ENTRIES", "MAX_ENTRY_BYTES", "MAX_TOTAL_BYTES", "cache_folder",
           "load_cached", "plain_secret"]

ENV_CACHE = "POWERPLANE_CONFIG_CACHE"
"""``off``/``0``/``no``/``false``: no cache (every load parses and validates the whole file)."""
MAX_ENTRIES = 16
"""Most deployment files kept; writing one more removes the least recently written."""
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""The largest document kept (a bigger one is validated in full on every load)."""
MAX_TOTAL_BYTES = 128 * 1024 * 1024
"""The most the entries take together; writing one more removes the least recently
written until they fit."""
FORMAT = b"powerplane-config-cache 1\n"
"""The first line of every entry (a change of the format changes it)."""
KEY_BYTES = 32


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/powerplane/configs`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "powerplane" / "configs"


def _enabled() -> bool:
    return os.environ.get(ENV_CACHE, "").strip().lower() not in {"off", "0", "no", "false"}


def load_cached(path: str | os.PathLike[str] | None = None,
                registry: Registry | None = None) -> Deployment:
    """:func:`~powerplane.config.load_config`, through the cache (see the module
    docstring): the same deployment, the same problems (raised by a full load, with
    their lines)."""
    from powerplane.plugins import registry as default_registry

    reg = registry if registry is not None else default_registry()
    file, text, size = _config_text(path)
    source = str(file)
    if not _enabled():
        return _full(file, text, size, source, reg, None, b"")
    folder = cache_folder()
    absolute = os.path.abspath(file)
    key = _key(absolute, text, reg)
    entry = folder / (hashlib.sha256(absolute.encode("utf-8", "surrogatepass")).hexdigest()
                      + ".json")
    document = _read(folder, entry, key)
    if document is not None:
        try:
            return _parse_config(document, reg, source, {}, nodes_proven=True)
        except ConfigError:
            pass  # what changed beside the file (a roles file, a CA bundle): said with lines
    return _full(file, text, size, source, reg, entry, key)


def _full(file: Path, text: str, size: int, source: str, reg: Registry,
          entry: Path | None, key: bytes) -> Deployment:
    """The whole file parsed and validated; kept in ``entry`` when it holds."""
    data, lines = parse_text(file, text, source, size)
    deployment = _parse_config(data, reg, source, lines)
    if entry is not None and not any(plain_secret(c) for c in deployment.channels.values()):
        with contextlib.suppress(OSError, ValueError, TypeError):
            _write(entry, key, data)
    return deployment


# -- the key -------------------------------------------------------------------------------------
def _key(absolute: str, text: str, reg: Registry) -> bytes:
    digest = hashlib.sha256(FORMAT)
    digest.update(absolute.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    digest.update(repr(reg.signature()).encode("utf-8", "surrogatepass"))
    for top in _packages(reg):
        digest.update(_code_signature(top))
    return digest.hexdigest().encode("ascii")


def _packages(reg: Registry) -> list[str]:
    """Core's package and the top-level package of every entry point, in order."""
    tops = ["powerplane"]
    for _name, value, _dist, _version in reg.sources:
        top = value.split(":", 1)[0].split(".", 1)[0].strip()
        if top and top not in tops:
            tops.append(top)
    return tops


def _code_signature(top: str) -> bytes:
    """The version, and the size and modification time of every ``.py`` file at the top of
    the package's folders (where a plugin keeps its config model and target parser, and
    core its node model): what validated the nodes (an editable install's change too)."""
    module = sys.modules.get(top)
    out = [top.encode(), str(getattr(module, "__version__", "")).encode()]
    for folder in getattr(module, "__path__", ()) or ():
        try:
            with os.scandir(folder) as found:
                files = sorted((e.name, e.stat()) for e in found
                               if e.name.endswith(".py") and e.is_file())
        except OSError:
            continue
        out.extend(f"{folder}/{name}\0{info.st_size}\0{info.st_mtime_ns}".encode(
            "utf-8", "surrogatepass") for name, info in files)
    return b"\n".join(out) + b"\n\n"


# -- reading and writing -------------------------------------------------------------------------
def _safe_folder(folder: Path) -> bool:
    """The folder is this user's and nobody else may write it (or read it)."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and not info.st_mode & 0o077)


def _open_private(path: Path, flags: int, mode: int = 0o600) -> int:
    """``path`` opened without following a link; refused (``OSError``) unless it is a
    regular file of this user that nobody else may read or write."""
    fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_mode & 0o077):
            raise PermissionError(f"{path} is not a private file of this user")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_all(fd: int, limit: int) -> bytes:
    """The file's bytes, at most ``limit`` of them (``ValueError`` past that)."""
    if os.fstat(fd).st_size > limit:
        raise ValueError("too large")
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > limit:
            raise ValueError("too large")
        chunks.append(chunk)
    return b"".join(chunks)


def _secret(folder: Path, create: bool) -> bytes | None:
    """This user's cache key (made on first write), or None."""
    path = folder / "key"
    try:
        fd = _open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        if not create:
            return None
        try:
            fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:  # another process made it first
            return _secret(folder, False)
        try:
            key = secrets.token_bytes(KEY_BYTES)
            os.write(fd, key)
        finally:
            os.close(fd)
        return key
    except OSError:
        return None
    try:
        key = _read_all(fd, KEY_BYTES)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return key if len(key) == KEY_BYTES else None


def _mac(secret: bytes, key: bytes, body: bytes) -> bytes:
    return hmac.new(secret, key + b"\n" + body, hashlib.sha256).hexdigest().encode("ascii")


def _read(folder: Path, entry: Path, key: bytes) -> Any:
    """The document ``entry`` keeps for ``key``, or None (a miss: absent, another key,
    unsafe, or its HMAC does not verify)."""
    if not _safe_folder(folder):
        return None
    secret = _secret(folder, create=False)
    if secret is None:
        return None
    try:
        fd = _open_private(entry, os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = _read_all(fd, MAX_ENTRY_BYTES + 1024)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    head, _, rest = raw.partition(b"\n")
    mac, _, rest = rest.partition(b"\n")
    found, _, body = rest.partition(b"\n")
    if head + b"\n" != FORMAT or found != key:
        return None
    if not hmac.compare_digest(mac, _mac(secret, key, body)):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _write(entry: Path, key: bytes, document: Any) -> None:
    """Keep ``document`` in ``entry`` (atomically: a reader sees the old entry or the new
    one), when it is plain JSON and not too large; then at most :data:`MAX_ENTRIES`."""
    if not _plain(document):
        return
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8", "surrogatepass")
    if len(body) > MAX_ENTRY_BYTES:
        return
    folder = entry.parent
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    if not _safe_folder(folder):
        return
    secret = _secret(folder, create=True)
    if secret is None:
        return
    temporary = folder / f".{entry.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = _open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            view = memoryview(FORMAT + _mac(secret, key, body) + b"\n" + key + b"\n" + body)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temporary, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _trim(folder)


def _trim(folder: Path) -> None:
    """At most :data:`MAX_ENTRIES` entries of :data:`MAX_TOTAL_BYTES` in all: the least
    recently written go first."""
    found = []
    with os.scandir(folder) as entries:
        for item in entries:
            if item.name.endswith(".json") and not item.name.startswith("."):
                with contextlib.suppress(OSError):
                    info = item.stat(follow_symlinks=False)
                    found.append((info.st_mtime_ns, info.st_size, item.path))
    found.sort(reverse=True)
    kept = total = 0
    for _, size, path in found:
        if kept < MAX_ENTRIES and total + size <= MAX_TOTAL_BYTES:
            kept += 1
            total += size
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)


def _plain(document: Any) -> bool:
    """Whether ``document`` comes back from JSON as it is: mappings with text keys, lists,
    text, integers, finite floats, booleans and nulls only (a YAML timestamp, an integer
    key, ``.nan`` are not: such a file is not kept)."""
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(type(k) is str for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif item is not None and type(item) not in (str, int, bool):
            return False
    return True


def plain_secret(configured: ConfiguredChannel) -> bool:
    """Whether the channel's validated config holds a plain string where its type declares
    a secret (a field typed :class:`~powerplane.secrets.SecretRef`, in a union that also
    takes a string): then its file is never kept."""
    paths = configured.type.secret_fields()
    return any(isinstance(value, str)
               for path in paths for value in _at(configured.config, path.split(".")))


def _at(value: Any, parts: list[str]) -> Iterator[Any]:
    """The values at a dotted path of :func:`~powerplane.fields.secret_fields` (``*``:
    every key or item) under a validated config."""
    if not parts:
        yield value
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = (value.values() if isinstance(value, dict)
                 else value if isinstance(value, list | tuple) else ())
        for item in items:
            yield from _at(item, rest)
        return
    fields = getattr(type(value), "model_fields", None)
    if fields is not None:
        for name, field in fields.items():
            if head in (name, field.alias):
                yield from _at(getattr(value, name, None), rest)
                return
        return
    if isinstance(value, dict) and head in value:
        yield from _at(value[head], rest)
