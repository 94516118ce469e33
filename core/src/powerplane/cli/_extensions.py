"""The ``powerplane.cli`` entry points, found without importing :mod:`importlib.metadata`.

``powerplane --help`` lists the commands other distributions add; importing
:mod:`importlib.metadata` for that costs more than the rest of the help path together (it
pulls in :mod:`email`, :mod:`zipfile` and :mod:`pathlib`). The installed metadata is plain
text, so this module reads it the way :mod:`importlib.metadata` does for a directory on
``sys.path``: every ``*.dist-info`` / ``*.egg-info`` directory, the first distribution of a
normalised name wins, its ``entry_points.txt`` in INI form. A ``sys.path`` entry that is not a
directory (a zip, an egg) is the case this reader does not cover: then it asks
:mod:`importlib.metadata` itself, so the answer never differs from the standard one.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Extension", "scan"]

_META_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class Extension:
    """One entry point: its name, ``module:attr`` value and the distribution that declares it."""

    name: str
    value: str
    dist: str

    def load(self) -> Any:
        """Import the object the entry point names (``module`` or ``module:attr.attr``)."""
        target = self.value.split("[", 1)[0].strip()
        module, _, attrs = target.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _display_name(meta_dir: str, fallback: str) -> str:
    for leaf in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(meta_dir, leaf), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.lower().startswith("name:"):
                        return line.split(":", 1)[1].strip() or fallback
        except OSError:
            continue
    return fallback


def _group(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of one section of an ``entry_points.txt``."""
    rows: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            rows.append((name.strip(), value.strip()))
    return rows


def _from_metadata(group: str) -> dict[str, Extension]:
    from importlib import metadata

    found: dict[str, Extension] = {}
    for ep in metadata.entry_points(group=group):
        dist = ep.dist.name if ep.dist is not None else "an installed distribution"
        found.setdefault(ep.name, Extension(ep.name, ep.value, dist))
    return found


def scan(group: str, path: list[str] | None = None) -> dict[str, Extension]:
    """Every entry point of ``group`` in the distributions on ``path`` (default ``sys.path``)."""
    entries = sys.path if path is None else path
    seen: set[str] = set()
    found: dict[str, Extension] = {}
    for entry in entries:
        where = entry or "."
        if not os.path.isdir(where):
            if os.path.exists(where):  # a zip or an egg: the standard reader handles those
                return _from_metadata(group)
            continue
        try:
            names = sorted(os.listdir(where))
        except OSError:
            continue
        for leaf in names:
            if not leaf.endswith(_META_SUFFIXES):
                continue
            stem = leaf.rsplit(".", 1)[0]
            raw_name = stem.split("-", 1)[0]
            key = _normalise(raw_name)
            if key in seen:
                continue
            seen.add(key)
            meta_dir = os.path.join(where, leaf)
            try:
                with open(os.path.join(meta_dir, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            rows = _group(text, group)
            if not rows:
                continue
            dist = _display_name(meta_dir, raw_name)
            for name, value in rows:
                found.setdefault(name, Extension(name, value, dist))
    return found
