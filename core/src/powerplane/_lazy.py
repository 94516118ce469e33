"""Lazy exports for a package's ``__init__``: a public name is imported on first use.

One helper for core, every plugin and the conformance suite, so ``import powerplane``
(and ``powerplane --help``) stays cheap::

    __getattr__, __dir__ = lazy_exports(__name__, {
        "ChannelType": ".channel",            # powerplane.channel.ChannelType
        "make": "powerplane_x.factory:build",  # another name in another module
    })

A target is ``"module"`` (the attribute has the exported name) or ``"module:attr"``; a
module starting with ``.`` is relative to the package. A target may also be a function of no
arguments that builds the value (a plugin's channel type, whose config model imports what
it needs): it is called on first use. A loaded value is stored in the package's namespace,
so each name is imported (or built) once::

    __getattr__, __dir__ = lazy_exports(__name__, {"REDFISH": _build})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module_name: str, mapping: Mapping[str, str | Callable[[], Any]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import (or build) each name in
    ``mapping`` on use.

    ``module_name`` is the package's ``__name__``; ``mapping`` maps each exported name to
    ``"module"``, ``"module:attr"`` or a function of no arguments that builds it.
    ``__getattr__`` raises :class:`AttributeError` for a name not in it, as Python does;
    ``__dir__`` lists the package's names and every exported one. A malformed target is a
    :class:`ValueError` at once, not at first use.
    """
    targets: dict[str, tuple[str, str]] = {}
    builders: dict[str, Callable[[], Any]] = {}
    for name, target in mapping.items():
        if callable(target):
            builders[name] = target
            continue
        module, _, attr = target.partition(":")
        if not module or module == "." or (":" in target and not attr):
            raise ValueError(f"{module_name}: lazy export {name!r} has a bad target {target!r}"
                             " (expected 'module' or 'module:attr')")
        targets[name] = (module, attr or name)

    def __getattr__(name: str) -> Any:
        namespace = vars(sys.modules[module_name])
        if name in namespace:  # built already (a hook asks by name, too)
            return namespace[name]
        build = builders.get(name)
        if build is not None:
            value = namespace[name] = build()
            return value
        where = targets.get(name)
        if where is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module, attr = where
        package = module_name if module.startswith(".") else None
        value = getattr(importlib.import_module(module, package), attr)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module_name]), *targets, *builders})

    return __getattr__, __dir__
