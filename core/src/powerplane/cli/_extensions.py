"""The ``powerplane.cli`` entry points: the commands other distributions add.

Read by the standard reader (:func:`powerplane._entry_points.read`, which asks
:func:`importlib.metadata.entry_points`, so every distribution finder it knows is asked);
the first entry point of a name is the command.
"""

from __future__ import annotations

from powerplane._entry_points import EntryPoint, read

__all__ = ["scan"]


def scan(group: str) -> dict[str, EntryPoint]:
    """Every entry point of ``group`` the standard reader finds, the first of a name kept."""
    found: dict[str, EntryPoint] = {}
    for ep in read(group):
        found.setdefault(ep.name, ep)
    return found
