"""The ``powerplane.cli`` entry points, found without importing :mod:`importlib.metadata`.

``powerplane --help`` lists the commands other distributions add; importing
:mod:`importlib.metadata` for that costs more than the rest of the help path together.
:mod:`powerplane._entry_points` reads the installed metadata as the standard reader does
(and hands a zip on ``sys.path`` to the standard reader); the first entry point of a name
is the command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from powerplane import _entry_points

__all__ = ["Extension", "scan"]


@dataclass(frozen=True)
class Extension:
    """One entry point: its name, ``module:attr`` value and the distribution that declares it."""

    name: str
    value: str
    dist: str

    def load(self) -> Any:
        """Import the object the entry point names (``module`` or ``module:attr.attr``)."""
        return _entry_points.load(self.value)


def scan(group: str, path: list[str] | None = None) -> dict[str, Extension]:
    """Every entry point of ``group`` in the distributions on ``path`` (default ``sys.path``),
    the first of a name kept."""
    found: dict[str, Extension] = {}
    for ep in _entry_points.read((group,), path)[group]:
        found.setdefault(ep.name, Extension(ep.name, ep.value, ep.dist or
                                            "an installed distribution"))
    return found
