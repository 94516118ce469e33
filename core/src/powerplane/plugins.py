"""Plugin discovery: lazy, isolated, restricted by ``POWERPLANE_LOAD_PLUGINS``.

Plugins are entry points of the group ``powerplane``. Nothing loads at import;
:func:`load_plugins` runs on first use. A plugin that fails to import, or raises
while registering, becomes a :class:`PluginFailure` with its name and error, and
every other plugin still loads. Built-in channel types (``simulated``) register
through the same hook, as the entry point ``simulated`` of core's own distribution.

``POWERPLANE_LOAD_PLUGINS=name,name`` loads only those entry points; set to an
empty string it loads none (built-ins included).
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
    from powerplane.demo import DemoPeer

__all__ = ["PluginFailure", "PluginInfo", "Registry", "load_plugins", "registry"]

GROUP = "powerplane"
ENV_RESTRICT = "POWERPLANE_LOAD_PLUGINS"


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
    demo_peers: dict[str, DemoPeer] = field(default_factory=dict)
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
        peers: list[DemoPeer] = []
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
        clash = [t.name for t in found if t.name in self.channel_types]
        if clash:
            self._unregister(name)
            owner = self.owners[clash[0]]
            msg = f"channel type {clash[0]!r} is already registered by plugin {owner!r}"
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


def _selected(names: Iterable[str]) -> set[str] | None:
    raw = os.environ.get(ENV_RESTRICT)
    if raw is None:
        return None
    return {n.strip() for n in raw.split(",") if n.strip()}


def load_plugins() -> Registry:
    """Discover and load every ``powerplane`` entry point; failures are isolated."""
    reg = Registry()
    eps = sorted(metadata.entry_points(group=GROUP), key=lambda e: (e.name != "simulated", e.name))
    wanted = _selected(e.name for e in eps)
    seen: set[str] = set()
    for ep in eps:
        if wanted is not None and ep.name not in wanted:
            continue
        if ep.name in seen:
            continue
        seen.add(ep.name)
        dist = ep.dist.name if ep.dist is not None else ""
        version = ep.dist.version if ep.dist is not None else ""
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
