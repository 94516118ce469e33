"""Helpers shared by the Talos tests (a module of its own, so that test modules import it
by a unique name rather than from ``conftest``)."""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from powerplane_talos.talosconfig import load_talosconfig

__all__ = ["files_holding", "key_body"]


def key_body(talosconfig: Path) -> str:
    """The base64 body (first line) of the private key in ``talosconfig``'s current context."""
    key = load_talosconfig(talosconfig).key
    assert key is not None
    return key.decode().splitlines()[1]


def files_holding(body: str, *dirs: Path) -> list[Path]:
    """Every regular file under ``dirs`` whose bytes hold ``body``, as is or inside base64
    (a talosconfig stores each PEM base64-encoded)."""
    needle = body.encode()
    found = []
    for top in dirs:
        for path in sorted(top.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            if needle in data:
                found.append(path)
                continue
            for token in re.findall(rb"[A-Za-z0-9+/]{40,}={0,2}", data):
                try:
                    decoded = base64.b64decode(token + b"=" * (-len(token) % 4))
                except (binascii.Error, ValueError):
                    continue
                if needle in decoded:
                    found.append(path)
                    break
    return found
