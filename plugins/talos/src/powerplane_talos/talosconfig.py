"""Reading and writing talosconfig files, and the PEM quirk of Talos keys.

A talosconfig is YAML::

    context: mycluster
    contexts:
      mycluster:
        endpoints: [10.0.0.2]
        nodes: [10.0.0.11]
        ca: <base64 PEM>
        crt: <base64 PEM>
        key: <base64 PEM>

Talos's OS CA and client certificates are Ed25519 by default, and Talos writes the
key PEM with the header ``ED25519 PRIVATE KEY`` (PKCS#8 inside). Python's ``ssl``
only loads it as ``PRIVATE KEY``: :func:`normalize_key_pem` rewrites the header.
Errors are ``ValueError`` with plain messages that never quote a value.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEFAULT_PORT",
    "ContextNotFound",
    "Credentials",
    "decode_pem",
    "dump_talosconfig",
    "load_talosconfig",
    "normalize_key_pem",
    "render_talosconfig",
    "split_endpoint",
]

DEFAULT_PORT = 50000
"""The Talos API port (apid) when an endpoint names none."""


class ContextNotFound(ValueError):
    """The talosconfig has no context of the name asked for."""


@dataclass(frozen=True)
class Credentials:
    """Where the Talos API is and the PEMs to reach it with (key already normalized)."""

    endpoints: tuple[str, ...]
    ca: bytes
    crt: bytes | None = None
    key: bytes | None = field(default=None, repr=False)
    context: str | None = None
    source: str = "inline config"
    """Where these came from, for messages (``talosconfig /path, context 'x'``)."""

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError(f"{self.source}: no endpoints")
        if (self.crt is None) != (self.key is None):
            raise ValueError(f"{self.source}: 'crt' and 'key' must be given together")


def normalize_key_pem(pem: bytes) -> bytes:
    """Rewrite Talos's ``ED25519 PRIVATE KEY`` PEM header to ``PRIVATE KEY`` (PKCS#8)."""
    return pem.replace(b"-----BEGIN ED25519 PRIVATE KEY-----", b"-----BEGIN PRIVATE KEY-----")\
        .replace(b"-----END ED25519 PRIVATE KEY-----", b"-----END PRIVATE KEY-----")


def decode_pem(value: str | bytes, what: str) -> bytes:
    """A PEM given as is, or base64-encoded as a talosconfig stores it."""
    raw = value.encode() if isinstance(value, str) else value
    raw = raw.strip()
    if raw.startswith(b"-----BEGIN"):
        return raw + b"\n"
    try:
        decoded = base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{what} is neither a PEM nor base64 of one") from exc
    if not decoded.lstrip().startswith(b"-----BEGIN"):
        raise ValueError(f"{what} is neither a PEM nor base64 of one")
    return decoded


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]:port`` or ``https://host:port`` -> (host, port)."""
    text = endpoint.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.rstrip("/")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError("endpoint has no host")
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("endpoint port must be a number from 1 to 65535")
    return host, int(port)


def load_talosconfig(path: str | os.PathLike[str], context: str | None = None) -> Credentials:
    """The credentials of ``context`` (default: the file's current context) in ``path``."""
    where = f"talosconfig {os.fspath(path)}"
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc.strerror}") from exc
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{where} is not valid YAML") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts"), dict):
        raise ValueError(f"{where} has no 'contexts' mapping")
    name = context or doc.get("context")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} names no current context; set 'context'")
    ctx = doc["contexts"].get(name)
    if ctx is None:
        known = ", ".join(sorted(str(k) for k in doc["contexts"])) or "none"
        raise ContextNotFound(f"{where} has no context {name!r} (contexts: {known})")
    if not isinstance(ctx, dict):
        raise ValueError(f"{where}, context {name!r}: expected a mapping")
    where = f"{where}, context {name!r}"
    endpoints = ctx.get("endpoints") or []
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise ValueError(f"{where}: 'endpoints' must be a list of addresses")
    if not endpoints:
        raise ValueError(f"{where}: 'endpoints' is empty")
    for endpoint in endpoints:
        try:
            split_endpoint(endpoint)
        except ValueError as exc:
            raise ValueError(f"{where}: 'endpoints': {exc}") from None
    nodes = ctx.get("nodes")
    if nodes is not None and (
        not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes)
    ):
        raise ValueError(f"{where}: 'nodes' must be a list of addresses")
    for key_field in ("ca", "crt", "key"):
        if ctx.get(key_field) is not None and not isinstance(ctx[key_field], str):
            raise ValueError(f"{where}: '{key_field}' must be a base64 PEM string")
    if not ctx.get("ca"):
        raise ValueError(f"{where}: no 'ca'")
    ca = decode_pem(ctx["ca"], f"{where}: 'ca'")
    crt = decode_pem(ctx["crt"], f"{where}: 'crt'") if ctx.get("crt") else None
    key = normalize_key_pem(decode_pem(ctx["key"], f"{where}: 'key'")) if ctx.get("key") else None
    return Credentials(tuple(endpoints), ca, crt, key, name, where)


def render_talosconfig(
    *,
    context: str,
    endpoints: Sequence[str],
    ca: bytes,
    crt: bytes | None = None,
    key: bytes | None = None,
    nodes: Sequence[str] = (),
) -> bytes:
    """A talosconfig document as talosctl writes one (PEMs base64-encoded), in memory."""
    ctx: dict[str, Any] = {"endpoints": list(endpoints)}
    if nodes:
        ctx["nodes"] = list(nodes)
    ctx["ca"] = base64.b64encode(ca).decode()
    if crt is not None:
        ctx["crt"] = base64.b64encode(crt).decode()
    if key is not None:
        ctx["key"] = base64.b64encode(key).decode()
    text = yaml.safe_dump({"context": context, "contexts": {context: ctx}}, sort_keys=False)
    return text.encode("utf-8")


def dump_talosconfig(
    path: str | os.PathLike[str],
    *,
    context: str,
    endpoints: Sequence[str],
    ca: bytes,
    crt: bytes | None = None,
    key: bytes | None = None,
    nodes: Sequence[str] = (),
) -> Path:
    """Write a talosconfig (mode 0600) as talosctl does: PEMs base64-encoded."""
    body = render_talosconfig(context=context, endpoints=endpoints, ca=ca, crt=crt, key=key,
                              nodes=nodes)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(body)
    return out
