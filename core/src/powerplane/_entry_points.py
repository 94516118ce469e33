"""Entry points read from the installed metadata, without importing :mod:`importlib.metadata`.

A one-shot command needs the entry points of one or two groups (``powerplane``,
``powerplane.cli``); importing :mod:`importlib.metadata` for them costs more than reading
them (it pulls in :mod:`email`, :mod:`zipfile` and :mod:`pathlib`, and builds a path object
per distribution). The installed metadata is plain text, so :func:`read` reads it the way
:mod:`importlib.metadata` does for a directory on ``sys.path``:

* every ``*.dist-info`` / ``*.egg-info`` directory of every ``sys.path`` entry (``""`` is the
  working directory), entries in order, a directory's children sorted;
* the first distribution of a normalised name wins (a later copy is shadowed, as
  ``importlib.metadata.entry_points()`` has it);
* its ``entry_points.txt`` in INI form: ``[group]`` headers, ``name = value`` lines,
  ``#``/``;`` comments;
* the distribution's name and version from the ``Name:``/``Version:`` headers of its
  ``METADATA`` (``PKG-INFO`` for an egg-info), read only for a distribution that declares
  an entry point of a group asked for.

A ``sys.path`` entry that is not a directory (a zip, an egg file) is the case this reader does
not cover: then :func:`read` asks :mod:`importlib.metadata` itself (and :func:`read_here` says
it could not answer), so the answer never differs from the standard one.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["EntryPoint", "load", "read", "read_here"]

_META_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: name, ``module:attr`` value, group, and its distribution's name and
    version (as its metadata spells them)."""

    name: str
    value: str
    group: str
    dist: str
    version: str

    def load(self) -> Any:
        """Import the object the entry point names."""
        return load(self.value)


def load(value: str) -> Any:
    """Import the object an entry point's value names (``module`` or ``module:attr.attr``,
    extras ``[...]`` ignored)."""
    target = value.split("[", 1)[0].strip()
    module, _, attrs = target.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for attr in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, attr)
    return obj


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _headers(meta_dir: str, fallback: str) -> tuple[str, str]:
    """``Name`` and ``Version`` from the metadata file's header block."""
    name, version = "", ""
    for leaf in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(meta_dir, leaf), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    low = line.lower()
                    if not name and low.startswith("name:"):
                        name = line.split(":", 1)[1].strip()
                    elif not version and low.startswith("version:"):
                        version = line.split(":", 1)[1].strip()
        except OSError:
            continue
        break
    return name or fallback, version


def _sections(text: str, groups: Collection[str]) -> list[tuple[str, str, str]]:
    """``(group, name, value)`` of every entry of ``groups`` in an ``entry_points.txt``."""
    rows: list[tuple[str, str, str]] = []
    group: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            header = line[1:-1].strip()
            group = header if header in groups else None
            continue
        if group is not None and "=" in line:
            name, _, value = line.partition("=")
            rows.append((group, name.strip(), value.strip()))
    return rows


def _standard(groups: Collection[str]) -> dict[str, list[EntryPoint]]:
    from importlib import metadata

    found: dict[str, list[EntryPoint]] = {g: [] for g in groups}
    for group in groups:
        for ep in metadata.entry_points(group=group):
            dist = ep.dist.name if ep.dist is not None else ""
            version = ep.dist.version if ep.dist is not None else ""
            found[group].append(EntryPoint(ep.name, ep.value, group, dist, version))
    return found


def read(groups: Collection[str], path: list[str] | None = None) -> dict[str, list[EntryPoint]]:
    """Every entry point of each of ``groups`` on ``path`` (default ``sys.path``), by group,
    distributions in path order and each one's entries in file order (a name may repeat
    across distributions: the caller decides which one stays). Where this reader cannot
    answer (a zip or an egg file on the path) the standard reader does."""
    found = read_here(groups, path)
    return _standard(groups) if found is None else found


def read_here(groups: Collection[str], path: list[str] | None = None
              ) -> dict[str, list[EntryPoint]] | None:
    """:func:`read` without the standard reader: ``None`` where it would be needed."""
    entries = sys.path if path is None else path
    seen: set[str] = set()
    found: dict[str, list[EntryPoint]] = {g: [] for g in groups}
    for entry in entries:
        where = entry or "."
        if not os.path.isdir(where):
            if os.path.exists(where):  # a zip or an egg: the standard reader handles those
                return None
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
            rows = _sections(text, groups)
            if not rows:
                continue
            dist, version = _headers(meta_dir, raw_name)
            for group, name, value in rows:
                found[group].append(EntryPoint(name, value, group, dist, version))
    return found
