"""Plugin discovery: lazy, isolated, restricted by ``POWERPLANE_LOAD_PLUGINS``.

Plugins are entry points of the group ``powerplane``. Nothing loads at import;
:func:`load_plugins` runs on first use. A plugin that fails to import, or raises
while registering, becomes a :class:`PluginFailure` with its name and error, and
every other plugin still loads. Built-in channel types (``simulated``) register
through the same hook, as the entry point ``simulated`` of core's own distribution.

``POWERPLANE_LOAD_PLUGINS=name,name`` loads only those entry points; set to an
empty string it loads none (built-ins included).

Names are unique: built-ins load first (core's own distribution, then the powerplane
project's plugin distributions, then every other in ``sys.path`` order). A later entry
point whose name is already taken, or whose channel type name is already registered,
is a :class:`PluginFailure` of its own distribution; the first one stays in place.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING

import pluggy

from powerplane import hookspecs
from powerplane.errors import PluginLoadError

if TYPE_CHECKING:
    from powerplane.channel import ChannelType
    from powerplane.testing import Peer

__all__ = ["PluginFailure", "PluginInfo", "Registry", "load_plugins", "registry"]

GROUP = "powerplane"
ENV_RESTRICT = "POWERPLANE_LOAD_PLUGINS"
CORE_DISTRIBUTION = "powerplane"
PROJECT_DISTRIBUTIONS = frozenset(
    {"powerplane-redfish", "powerplane-pdu", "powerplane-talos", "powerplane-cloud"}
)
"""The plugin distributions of the powerplane project: built-ins, loaded right after core's."""


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its entry-point name, distribution, version and channel types."""

    name: str
    distribution: str
    version: str
    channel_types: tuple[str, ...]


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that failed to load, with its error in words."""

    name: str
    distribution: str
    version: str
    error: str

    def as_error(self) -> PluginLoadError:
        return PluginLoadError(self.name, self.error)


@dataclass
class Registry:
    """The loaded plugins, their failures and the channel types by name."""

    plugins: list[PluginInfo] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    channel_types: dict[str, ChannelType] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    demo_peers: dict[str, Peer] = field(default_factory=dict)
    manager: pluggy.PluginManager = field(
        default_factory=lambda: _new_manager(),
    )

    def add_module(
        self, name: str, module: object, distribution: str = "", version: str = ""
    ) -> None:
        """Register one plugin object (a module or a class instance) and collect its types.

        Used for entry points, and by tests to register a plugin for one test.
        """
        found: list[ChannelType] = []
        peers: list[Peer] = []
        if self.manager.has_plugin(name) or any(p.name == name for p in self.plugins):
            first = next((p for p in self.plugins if p.name == name), None)
            by = f" by distribution {first.distribution!r}" if first and first.distribution else ""
            msg = (f"plugin name {name!r} is already taken{by}; the first one is kept "
                   "(rename this plugin's entry point)")
            self.failures.append(PluginFailure(name, distribution, version, msg))
            return
        try:
            self.manager.register(module, name=name)
            for hook, sink in (
                (self.manager.hook.register_channel_types, found.append),
                (self.manager.hook.register_demo_peers, peers.append),
            ):
                for impl in hook.get_hookimpls():
                    if impl.plugin_name == name:
                        impl.function(register=sink)
        except Exception as exc:  # a plugin's own bug: isolate it
            self._unregister(name)
            self.failures.append(PluginFailure(name, distribution, version, _describe(exc)))
            return
        names = [t.name for t in found]
        clash = [n for n in names if n in self.channel_types]
        twice = sorted({n for n in names if names.count(n) > 1})
        if clash or twice:
            self._unregister(name)
            if clash:
                owner = self.owners[clash[0]]
                msg = f"channel type {clash[0]!r} is already registered by plugin {owner!r}"
            else:
                msg = f"registers channel type {twice[0]!r} more than once"
            self.failures.append(PluginFailure(name, distribution, version, msg))
            return
        for ctype in found:
            self.channel_types[ctype.name] = ctype
            self.owners[ctype.name] = name
        for peer in peers:
            self.demo_peers.setdefault(peer.name, peer)
        self.plugins.append(
            PluginInfo(name, distribution, version, tuple(t.name for t in found))
        )

    def remove(self, name: str) -> None:
        """Unregister a plugin added with :meth:`add_module` (tests)."""
        self._unregister(name)
        self.plugins = [p for p in self.plugins if p.name != name]
        for tname, owner in list(self.owners.items()):
            if owner == name:
                del self.owners[tname]
                del self.channel_types[tname]

    def _unregister(self, name: str) -> None:
        plugin = self.manager.get_plugin(name)
        if plugin is not None:
            self.manager.unregister(plugin, name=name)

    def get(self, type_name: str) -> ChannelType | None:
        return self.channel_types.get(type_name)


def _new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _normal(dist: str) -> str:
    return dist.lower().replace("_", "-").replace(".", "-")


def _rank(ep: metadata.EntryPoint) -> int:
    """0: core's own distribution; 1: the project's plugin distributions; 2: any other."""
    dist = _normal(ep.dist.name) if ep.dist is not None else ""
    if dist == CORE_DISTRIBUTION:
        return 0
    return 1 if dist in PROJECT_DISTRIBUTIONS else 2


def _selected(names: Iterable[str]) -> set[str] | None:
    raw = os.environ.get(ENV_RESTRICT)
    if raw is None:
        return None
    return {n.strip() for n in raw.split(",") if n.strip()}


def load_plugins() -> Registry:
    """Discover and load every ``powerplane`` entry point; failures are isolated."""
    reg = Registry()
    found = list(metadata.entry_points(group=GROUP))
    order = sorted(range(len(found)), key=lambda i: (_rank(found[i]), found[i].name, i))
    eps = [found[i] for i in order]
    wanted = _selected(e.name for e in eps)
    taken: dict[str, str] = {}
    for ep in eps:
        if wanted is not None and ep.name not in wanted:
            continue
        dist = ep.dist.name if ep.dist is not None else ""
        version = ep.dist.version if ep.dist is not None else ""
        if ep.name in taken:  # the first stays; this one is a failure of its own
            first = taken[ep.name]
            by = f" by distribution {first!r}" if first else ""
            reg.failures.append(PluginFailure(
                ep.name, dist, version,
                f"plugin name {ep.name!r} is already taken{by}; the first one is kept "
                "(rename this plugin's entry point)"))
            continue
        taken[ep.name] = dist
        try:
            module: ModuleType = ep.load()
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            reg.failures.append(PluginFailure(ep.name, dist, version, _describe(exc)))
            continue
        reg.add_module(ep.name, module, dist, version)
    return reg


_lock = threading.Lock()
_registry: Registry | None = None


def registry(reload: bool = False) -> Registry:
    """The process-wide registry, loaded on first call."""
    global _registry
    with _lock:
        if _registry is None or reload:
            _registry = load_plugins()
        return _registry
