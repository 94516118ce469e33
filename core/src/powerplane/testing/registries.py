"""Plugin registries for tests: register a plugin for one test, or build a registry of one's own.

A test that needs a channel type, port type or secret kind that no installed plugin has
registers a plugin object (a module or a class instance with ``@hookimpl`` methods) for the
length of a ``with`` block::

    with registered(MyPlugin(), name="my-test-plugin") as reg:
        host = PowerHost(deployment)          # the process-wide registry sees it
    # gone again here

or builds a registry of its own and passes it (``PowerHost(..., registry=reg)``,
``parse_config(data, registry=reg)``), leaving the process-wide one alone::

    reg = plugin_registry(only=["simulated"], add={"peer-test": PeerPlugin()})

Both go through the loader's public methods (:meth:`~powerplane.plugins.Registry.add_module`,
:meth:`~powerplane.plugins.Registry.remove`, :func:`~powerplane.plugins.load_plugins`), so a
plugin registered here is loaded exactly as an entry point's is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from powerplane.plugins import Registry

__all__ = ["plugin_registry", "process_registry", "registered"]


def process_registry() -> Registry:
    """The process-wide registry (what a :class:`~powerplane.PowerHost` given no registry
    uses), loaded on first use."""
    from powerplane.plugins import registry

    return registry()


@contextmanager
def registered(
    plugin: object, *, name: str, distribution: str = "tests", version: str = "0",
    into: Registry | None = None,
) -> Iterator[Registry]:
    """Register ``plugin`` under ``name`` in ``into`` (the process-wide registry by default)
    for the ``with`` block, and unregister it after, however the block ends.

    ``distribution`` is what the registry records as the plugin's distribution (a test that
    checks an install hint names a real one). Yields the registry.
    """
    reg = into if into is not None else process_registry()
    reg.add_module(name, plugin, distribution, version)
    try:
        yield reg
    finally:
        reg.remove(name)


def plugin_registry(
    *, only: Iterable[str] | None = None, add: Mapping[str, object] | None = None,
    distribution: str = "tests",
) -> Registry:
    """A new registry, not the process-wide one: core's built-ins, the installed plugins
    (only the entry points named in ``only`` when it is given, as
    ``POWERPLANE_LOAD_PLUGINS`` would select them; none with ``only=[]``), then each plugin
    of ``add`` (name to plugin object), recorded as of ``distribution``."""
    from powerplane.plugins import ENV_RESTRICT, load_plugins

    if only is None:
        reg = load_plugins()
    else:
        saved = os.environ.get(ENV_RESTRICT)
        os.environ[ENV_RESTRICT] = ",".join(only)
        try:
            reg = load_plugins()
        finally:
            if saved is None:
                del os.environ[ENV_RESTRICT]
            else:
                os.environ[ENV_RESTRICT] = saved
    for name, plugin in (add or {}).items():
        reg.add_module(name, plugin, distribution)
    return reg
