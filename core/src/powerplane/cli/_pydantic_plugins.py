"""pydantic's plugin lookup, answered from the installed metadata when there is nothing to find.

When pydantic builds its first model it imports ``pydantic.plugin._loader``, which imports
:mod:`importlib.metadata` and reads every installed distribution's entry points for the
group ``pydantic``. In a one-shot command that costs more than the rest of the config's
models together. :func:`answer_without_scan` reads the same metadata with
:mod:`powerplane._entry_points` first. Only where that reading is complete (no zip on
``sys.path``) and finds no distribution declaring a ``pydantic`` entry point does it put
in place a loader module that gives what pydantic's would have given: no plugins. Where
any pydantic plugin is installed, or the loader is already imported, nothing is touched
and pydantic finds its plugins itself.

Only the console script calls this (its process is the command's own); a program that
imports powerplane keeps pydantic's loader as it is.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable

from powerplane import _entry_points

__all__ = ["LOADER", "answer_without_scan"]

LOADER = "pydantic.plugin._loader"
"""The module pydantic's model construction imports to find its plugins."""
GROUP = "pydantic"
"""The entry-point group of pydantic plugins."""


def _no_plugins() -> Iterable[object]:
    return ()


def answer_without_scan() -> bool:
    """Put the no-plugins loader in place if nothing declares a pydantic plugin; say whether
    it did."""
    if LOADER in sys.modules:
        return False
    found = _entry_points.read_here((GROUP,))
    if found is None or found[GROUP]:
        return False
    loader = types.ModuleType(LOADER, "pydantic's plugin loader: no distribution on sys.path "
                                      "declares a 'pydantic' entry point (read by powerplane)")
    loader.__dict__.update(PYDANTIC_ENTRY_POINT_GROUP=GROUP, _plugins={},
                           _loading_plugins=False, get_plugins=_no_plugins)
    sys.modules[LOADER] = loader
    return True
