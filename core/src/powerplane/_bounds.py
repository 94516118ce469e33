"""The bounds every config file is read under, and how a problem's path is written.

Apart from :mod:`powerplane._yaml` (which re-exports them) so that what only names a path or
a bound imports no YAML parser: a command whose deployment comes from the validated-config
cache (:mod:`powerplane.config_cache`) never imports PyYAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_BYTES", "MAX_PROBLEMS", "format_path", "line_of"]

MAX_BYTES = 256 * 1024 * 1024
"""Largest config document, in bytes (256 MiB: a 1,000,000-node deployment takes about 140;
a file's size is checked before it is read)."""
MAX_PROBLEMS = 100
"""Most problems listed for one file; the rest are counted."""


def format_path(path: tuple[str | int, ...]) -> str:
    """``("channels", "bmc", "verify")`` -> ``channels.bmc.verify``; indexes as ``[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def line_of(lines: Mapping[Any, int], path: tuple[Any, ...]) -> int | None:
    """The line of ``path`` in a file's map of lines, else of the nearest enclosing key that
    has one; None where none has."""
    while path:
        found = lines.get(path)
        if found is not None:
            return found
        path = path[:-1]
    return None
