"""Plugin discovery: lazy, isolated, restricted by ``POWERPLANE_LOAD_PLUGINS``.

Plugins are entry points of the group ``powerplane``. Nothing loads at import;
:func:`load_plugins` runs on first use. A plugin that fails to import, or raises
while registering, becomes a :class:`PluginFailure` with its name and error, and
every other plugin still loads. Built-in channel types (``simulated``) register
through the same hook, as the entry point ``simulated`` of core's own distribution.

``POWERPLANE_LOAD_PLUGINS=name,name`` loads only those entry points; set to an
empty string it loads none (built-ins included).

Beside channel types a plugin registers lifecycle port types (``register_cluster_types``,
``register_storage_types``, ``register_store_types``: :attr:`Registry.cluster_types` and
its siblings) and secret reference kinds (``register_secret_kinds``:
:attr:`Registry.secret_kinds`). Core's own (``simulated``/``none`` clusters,
``none``/``simulated`` storage, the ``sqlite`` store, the ``env``/``file`` secret kinds)
come from :mod:`powerplane.builtins`, added before any entry point and whatever
``POWERPLANE_LOAD_PLUGINS`` says; they are not listed among :attr:`Registry.plugins`.

Names are unique: built-ins load first (core's own distribution, then the powerplane
project's plugin distributions, then every other in ``sys.path`` order). A later entry
point whose name is already taken, or whose channel type name is already registered,
is a :class:`PluginFailure` of its own distribution; the first one stays in place. The
same holds for a port type or secret kind name already registered in its hook.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from powerplane import hookspecs
from powerplane.errors import PluginLoadError

if TYPE_CHECKING:
    from powerplane.channel import ChannelType
    from powerplane.lifecycle.ports import ClusterType, PortType, StorageType, StoreType
    from powerplane.secrets import SecretKind
    from powerplane.testing import Peer

__all__ = ["PROVIDERS", "PluginFailure", "PluginInfo", "Registry", "load_plugins", "registry"]

GROUP = "powerplane"
ENV_RESTRICT = "POWERPLANE_LOAD_PLUGINS"
CORE_DISTRIBUTION = "powerplane"
PROJECT_DISTRIBUTIONS = frozenset(
    {"powerplane-cloud", "powerplane-ipmi", "powerplane-kubernetes", "powerplane-pdu",
     "powerplane-redfish", "powerplane-talos"}
)
"""The plugin distributions of the powerplane project: built-ins, loaded right after core's."""

PROVIDERS: Mapping[str, Mapping[str, str]] = {
    "cluster": {"kubernetes": "powerplane-kubernetes"},
    "storage": {"longhorn": "powerplane-kubernetes"},
    "store": {"kubernetes": "powerplane-kubernetes"},
    "secret": {"k8s": "powerplane-kubernetes"},
}
"""Which project distribution provides a known port type or secret kind, by hook kind:
named in the config error when it is not installed (``install powerplane-kubernetes``)."""

_KINDS = ("channel", "cluster", "storage", "store", "secret")
_WHAT = {"channel": "channel type", "cluster": "cluster type", "storage": "storage type",
         "store": "store type", "secret": "secret kind"}


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its entry-point name, distribution, version and what it registered."""

    name: str
    distribution: str
    version: str
    channel_types: tuple[str, ...]
    cluster_types: tuple[str, ...] = ()
    storage_types: tuple[str, ...] = ()
    store_types: tuple[str, ...] = ()
    secret_kinds: tuple[str, ...] = ()


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
    """The loaded plugins, their failures, and what they registered, by name."""

    plugins: list[PluginInfo] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    channel_types: dict[str, ChannelType] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    """Channel type name -> the plugin that registered it."""
    cluster_types: dict[str, ClusterType[Any]] = field(default_factory=dict)
    """``lifecycle.cluster.type`` name -> its port type."""
    storage_types: dict[str, StorageType[Any]] = field(default_factory=dict)
    """``lifecycle.storage.type`` name -> its port type."""
    store_types: dict[str, StoreType[Any]] = field(default_factory=dict)
    """``lifecycle.store.type`` name -> its store type."""
    secret_kinds: dict[str, SecretKind] = field(default_factory=dict)
    """Secret reference kind -> its resolver."""
    port_owners: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(kind, name)`` -> the plugin that registered it, for cluster, storage, store and
    secret kinds."""
    builtins: list[PluginInfo] = field(default_factory=list)
    """Core's own registrations (:mod:`powerplane.builtins`), not listed as plugins."""
    _demo_peers: dict[str, Peer] | None = field(default=None, repr=False)
    manager: pluggy.PluginManager = field(
        default_factory=lambda: _new_manager(),
    )

    @property
    def demo_peers(self) -> dict[str, Peer]:
        """The peers plugins offer ``powerplane demo``, by name (the first of a name wins).

        Collected on first use, not at plugin load: the hook imports each plugin's peer
        module (emulators, certificates), which no command but the demo needs. A plugin
        whose hook raises is a failure of that plugin, as at load."""
        if self._demo_peers is None:
            peers: dict[str, Peer] = {}
            hooks = self.manager.hook
            impls = hooks.register_demo_peers.get_hookimpls()
            order = {p.name: i for i, p in enumerate(self.plugins)}
            for impl in sorted(impls, key=lambda i: order.get(i.plugin_name, -1)):
                found: list[Peer] = []
                try:
                    impl.function(register=found.append)
                except Exception as exc:  # a plugin's own bug: isolate it
                    info = next((p for p in self.plugins if p.name == impl.plugin_name), None)
                    self.failures.append(PluginFailure(
                        impl.plugin_name, info.distribution if info else "",
                        info.version if info else "", _describe(exc)))
                    continue
                for peer in found:
                    peers.setdefault(peer.name, peer)
            self._demo_peers = peers
        return self._demo_peers

    def port_types(self, kind: str) -> Mapping[str, PortType[Any, Any]]:
        """The registered port types of ``kind``: ``cluster``, ``storage`` or ``store``."""
        tables: dict[str, Mapping[str, PortType[Any, Any]]] = {
            "cluster": self.cluster_types, "storage": self.storage_types,
            "store": self.store_types,
        }
        return tables[kind]

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "channel": self.channel_types, "cluster": self.cluster_types,
            "storage": self.storage_types, "store": self.store_types,
            "secret": self.secret_kinds,
        }
        return tables[kind]

    def _owner(self, kind: str, name: str) -> str:
        if kind == "channel":
            return self.owners[name]
        return self.port_owners[(kind, name)]

    def add_builtins(self) -> None:
        """Add core's own port types and secret kinds (:mod:`powerplane.builtins`)."""
        from powerplane import __version__, builtins

        self.add_module(builtins.NAME, builtins, CORE_DISTRIBUTION, __version__, builtin=True)

    def add_module(
        self, name: str, module: object, distribution: str = "", version: str = "",
        *, builtin: bool = False,
    ) -> None:
        """Register one plugin object (a module or a class instance) and collect what it
        registers through each hook.

        Used for entry points, and by tests to register a plugin for one test. ``builtin``:
        core's own registrations, kept out of :attr:`plugins`.
        """
        found: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
        if self.manager.has_plugin(name) or any(p.name == name for p in self.plugins):
            first = next((p for p in self.plugins if p.name == name), None)
            by = f" by distribution {first.distribution!r}" if first and first.distribution else ""
            msg = (f"plugin name {name!r} is already taken{by}; the first one is kept "
                   "(rename this plugin's entry point)")
            self.failures.append(PluginFailure(name, distribution, version, msg))
            return
        try:
            self.manager.register(module, name=name)
            hooks = self.manager.hook
            for hook, sink in (
                (hooks.register_channel_types, _sink("channel", found["channel"])),
                (hooks.register_cluster_types, _sink("cluster", found["cluster"])),
                (hooks.register_storage_types, _sink("storage", found["storage"])),
                (hooks.register_store_types, _sink("store", found["store"])),
                (hooks.register_secret_kinds, _sink("secret", found["secret"])),
            ):
                for impl in hook.get_hookimpls():
                    if impl.plugin_name == name:
                        impl.function(register=sink)
        except Exception as exc:  # a plugin's own bug: isolate it
            self._unregister(name)
            self.failures.append(PluginFailure(name, distribution, version, _describe(exc)))
            return
        for kind in _KINDS:
            names = [t.name for t in found[kind]]
            table = self._table(kind)
            clash = [n for n in names if n in table]
            twice = sorted({n for n in names if names.count(n) > 1})
            if clash or twice:
                self._unregister(name)
                if clash:
                    msg = (f"{_WHAT[kind]} {clash[0]!r} is already registered by plugin "
                           f"{self._owner(kind, clash[0])!r}")
                else:
                    msg = f"registers {_WHAT[kind]} {twice[0]!r} more than once"
                self.failures.append(PluginFailure(name, distribution, version, msg))
                return
        for kind in _KINDS:
            table = self._table(kind)
            for item in found[kind]:
                table[item.name] = item
                if kind == "channel":
                    self.owners[item.name] = name
                else:
                    self.port_owners[(kind, item.name)] = name
        self._demo_peers = None  # collected again on next use
        info = PluginInfo(
            name, distribution, version,
            *(tuple(t.name for t in found[kind]) for kind in _KINDS),
        )
        (self.builtins if builtin else self.plugins).append(info)

    def remove(self, name: str) -> None:
        """Unregister a plugin added with :meth:`add_module` (tests)."""
        self._unregister(name)
        self._demo_peers = None
        self.plugins = [p for p in self.plugins if p.name != name]
        for tname, owner in list(self.owners.items()):
            if owner == name:
                del self.owners[tname]
                del self.channel_types[tname]
        for (kind, tname), owner in list(self.port_owners.items()):
            if owner == name:
                del self.port_owners[(kind, tname)]
                del self._table(kind)[tname]

    def _unregister(self, name: str) -> None:
        plugin = self.manager.get_plugin(name)
        if plugin is not None:
            self.manager.unregister(plugin, name=name)

    def get(self, type_name: str) -> ChannelType | None:
        return self.channel_types.get(type_name)


def _sink(kind: str, into: list[Any]) -> Callable[[Any], None]:
    """The ``register`` a hook of ``kind`` is given: it takes only that hook's type."""
    from powerplane.channel import ChannelType
    from powerplane.lifecycle.ports import ClusterType, StorageType, StoreType
    from powerplane.secrets import SecretKind

    want: type[Any] = {"channel": ChannelType, "cluster": ClusterType,
                       "storage": StorageType, "store": StoreType,
                       "secret": SecretKind}[kind]

    def register(item: Any) -> None:
        if not isinstance(item, want):
            raise TypeError(f"register_{kind}{'_kinds' if kind == 'secret' else '_types'} "
                            f"takes a {want.__name__}, not {type(item).__name__}")
        into.append(item)

    return register


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
    """Core's built-ins, then every ``powerplane`` entry point; failures are isolated."""
    reg = Registry()
    reg.add_builtins()
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
