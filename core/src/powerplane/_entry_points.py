"""Entry points of one group, read by the standard reader: core's one entry-point record.

Plugins (group ``powerplane``, :mod:`powerplane.plugins`) and the commands other
distributions add (group ``powerplane.cli``, :mod:`powerplane.cli._extensions`) are found by
:func:`importlib.metadata.entry_points`, so every distribution finder the standard library
consults is consulted here too: the directories and zips on ``sys.path``, and any finder
an installer or an embedding application puts on :data:`sys.meta_path`. The first
distribution of a normalised name wins, as :func:`importlib.metadata.entry_points` has it;
a name declared by two distributions is listed twice (the caller decides which one stays).

:class:`EntryPoint` is the record core passes around: the entry point's name, value and
group, with its distribution's name and version read once, as plain strings (a plugin
failure and ``powerplane plugins`` name them). Its :meth:`EntryPoint.load` is the standard
one's.

:mod:`importlib.metadata` is imported on the first read, not at import: a program that
imports powerplane and never looks for a plugin does not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EntryPoint", "read"]


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: name, ``module:attr`` value, group, and its distribution's name and
    version (as its metadata spells them; ``""`` where the finder gave no distribution)."""

    name: str
    value: str
    group: str
    dist: str
    version: str

    def load(self) -> Any:
        """Import the object the entry point names, as :meth:`importlib.metadata.EntryPoint.load`
        does (``module`` or ``module:attr.attr``; extras ``[...]`` ignored)."""
        from importlib import metadata

        return metadata.EntryPoint(self.name, self.value, self.group).load()


def read(group: str) -> list[EntryPoint]:
    """Every entry point of ``group`` that :func:`importlib.metadata.entry_points` finds, in its
    order (distributions in the order their finders give them, each one's entries in file
    order)."""
    from importlib import metadata

    found: list[EntryPoint] = []
    dists: dict[int, tuple[str, str]] = {}  # one metadata parse per distribution
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        if dist is None:
            name, version = "", ""
        else:
            known = dists.get(id(dist))
            if known is None:
                meta = dist.metadata
                known = dists[id(dist)] = (meta["Name"] or "", meta["Version"] or "")
            name, version = known
        found.append(EntryPoint(ep.name, ep.value, ep.group, name, version))
    return found
