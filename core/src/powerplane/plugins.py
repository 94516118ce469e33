"""Plugin discovery: lazy, isolated, restricted by ``POWERPLANE_LOAD_PLUGINS``.

Plugins are entry points of the group ``powerplane``. Nothing loads at import;
:func:`load_plugins` runs on first use. A plugin that fails to import, or raises
while registering, becomes a :class:`PluginFailure` with its name and error, and
every other plugin still loads. Built-in channel types (``simulated``) register
through the same hook, as the entry point ``simulated`` of core's own distribution.

``POWERPLANE_LOAD_PLUGINS=name,name`` loads only those entry points; set to an
empty string it loads none (built-ins included). A name in it that no installed entry point
has is a warning on stderr (the ``powerplane.plugins`` logger), the registry remembers what
the variable left out (:attr:`Registry.restriction`), and a type the file names that is
not registered says when the variable may have hidden it (:meth:`Registry.restriction_hint`).

Beside channel types a plugin registers lifecycle port types (``register_cluster_types``,
``register_storage_types``, ``register_store_types``: :attr:`Registry.cluster_types` and
its siblings) and secret reference kinds (``register_secret_kinds``:
:attr:`Registry.secret_kinds`) and policy types (``register_policy_types``:
:attr:`Registry.policy_types`), and deployment checks (``register_deployment_checks``:
:attr:`Registry.deployment_checks`, collected on first use by that hook alone, as the demo
peers are; never declared in ``REGISTERS``). Core's own (``simulated``/``none`` clusters,
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

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from powerplane import _entry_points, hookspecs
from powerplane.errors import PluginLoadError

if TYPE_CHECKING:
    from powerplane.channel import ChannelType
    from powerplane.kinds import DeploymentCheck, PolicyType, PortType
    from powerplane.peers import Peer
    from powerplane.secrets import SecretKind

__all__ = ["PROVIDERS", "PluginFailure", "PluginInfo", "Registry", "Restriction", "load_plugins",
           "registry"]

log = logging.getLogger(__name__)

GROUP = "powerplane"
ENV_RESTRICT = "POWERPLANE_LOAD_PLUGINS"
CORE_DISTRIBUTION = "powerplane"
PROJECT_DISTRIBUTIONS = frozenset(
    {"powerplane-cloud", "powerplane-ipmi", "powerplane-kubernetes", "powerplane-metal3",
     "powerplane-pdu", "powerplane-redfish", "powerplane-talos"}
)
"""The plugin distributions of the powerplane project: built-ins, loaded right after core's."""

PROVIDERS: Mapping[str, Mapping[str, str]] = {
    "cluster": {"kubernetes": "powerplane-kubernetes"},
    "storage": {"longhorn": "powerplane-kubernetes"},
    "store": {"kubernetes": "powerplane-kubernetes"},
    "secret": {"k8s": "powerplane-kubernetes"},
    "policy": {"kubernetes": "powerplane-kubernetes"},
}
"""Which project distribution provides a known port type or secret kind, by hook kind:
named in the config error when it is not installed (``install powerplane-kubernetes``)."""

_KINDS = ("channel", "cluster", "storage", "store", "secret", "policy")
_WHAT = {"channel": "channel type", "cluster": "cluster type", "storage": "storage type",
         "store": "store type", "secret": "secret kind", "policy": "policy type"}


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
    policy_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that failed to load, with its error in words."""

    name: str
    distribution: str
    version: str
    error: str

    def as_error(self) -> PluginLoadError:
        return PluginLoadError(self.name, self.error)


@dataclass(frozen=True)
class Restriction:
    """What ``POWERPLANE_LOAD_PLUGINS`` did to the registry it was set for."""

    names: tuple[str, ...]
    """The entry-point names the variable allows, in its order."""
    not_loaded: tuple[str, ...]
    """Installed entry points the variable left out (sorted)."""
    unknown: tuple[str, ...]
    """Names in the variable no installed entry point has (sorted)."""

    @property
    def setting(self) -> str:
        """``POWERPLANE_LOAD_PLUGINS=a,b`` as it reads (``=""`` when empty)."""
        return f"{ENV_RESTRICT}={','.join(self.names)}" if self.names else f'{ENV_RESTRICT}=""'


BUILTINS = "powerplane.builtins"
"""The module of core's own registrations, loaded by name like an entry point's."""

REGISTERS = "REGISTERS"
"""The module attribute a plugin declares what its hooks register in, by kind, so the
registry can defer calling them: ``REGISTERS: Registers = {"channel": ("redfish",)}``
(its shape is :class:`powerplane.hookspecs.Registers`, part of the plugin contract)."""

V = TypeVar("V")


class _Table(MutableMapping[str, V]):
    """One kind's names -> registered items; a name a plugin declared (:data:`REGISTERS`)
    whose hooks have not run yet runs them (that plugin's only) when it is looked up.
    Iterating or sizing the table first runs the hooks of every plugin that declared a name
    in it."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._items: dict[str, V] = {}
        self.pending: dict[str, str] = {}
        """Declared name -> the plugin whose hooks will register it."""

    def __getitem__(self, key: str) -> V:
        owner = self.pending.get(key)
        if owner is not None:
            self._registry._resolve(owner)
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        owner = self.pending.get(key) if isinstance(key, str) else None
        if owner is not None:
            self._registry._resolve(owner)
        return key in self._items

    def __setitem__(self, key: str, value: V) -> None:
        self.pending.pop(key, None)
        self._items[key] = value

    def __delitem__(self, key: str) -> None:
        if self.pending.pop(key, None) is None:
            del self._items[key]
        else:
            self._items.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        self._settle()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._settle()
        return len(self._items)

    def _settle(self) -> None:
        for owner in dict.fromkeys(self.pending.values()):
            self._registry._resolve(owner)

    def taken(self, key: str) -> bool:
        """``key`` registered or declared, without running a hook."""
        return key in self._items or key in self.pending

    def __repr__(self) -> str:
        return f"_Table({sorted({*self._items, *self.pending})!r})"


@dataclass
class Registry:
    """The loaded plugins, their failures, and what they registered, by name.

    A plugin module that declares its names (:data:`REGISTERS`) has its hooks called when
    one of them is first looked up, not at load: a command imports only the config models
    of the types its deployment names. Duplicate names are found from the declaration at
    load; :attr:`plugins` and :attr:`failures` run every pending hook first, so they read
    as if every hook had run at load (a hook that raises, or registers other names than it
    declares, is a failure of its plugin either way).
    """

    _infos: list[PluginInfo] = field(default_factory=list)
    _failures: list[PluginFailure] = field(default_factory=list)
    channel_types: _Table[ChannelType] = field(init=False)
    owners: dict[str, str] = field(default_factory=dict)
    """Channel type name -> the plugin that registered (or declared) it."""
    cluster_types: _Table[PortType[Any, Any]] = field(init=False)
    """``lifecycle.cluster.type`` name -> its port type (a ``ClusterType``)."""
    storage_types: _Table[PortType[Any, Any]] = field(init=False)
    """``lifecycle.storage.type`` name -> its port type (a ``StorageType``)."""
    store_types: _Table[PortType[Any, Any]] = field(init=False)
    """``lifecycle.store.type`` name -> its store type (a ``StoreType``)."""
    secret_kinds: _Table[SecretKind] = field(init=False)
    """Secret reference kind -> its resolver."""
    policy_types: _Table[PolicyType[Any]] = field(init=False)
    """``policy.type`` name -> its policy type."""
    port_owners: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(kind, name)`` -> the plugin that registered it, for cluster, storage, store and
    secret kinds."""
    builtins: list[PluginInfo] = field(default_factory=list)
    """Core's own registrations (:mod:`powerplane.builtins`), not listed as plugins."""
    _demo_peers: dict[str, Peer] | None = field(default=None, repr=False)
    _checks: dict[str, DeploymentCheck] | None = field(default=None, repr=False)
    _check_owners: dict[str, str] = field(default_factory=dict, repr=False)
    _pending: dict[str, tuple[PluginInfo, bool]] = field(default_factory=dict, repr=False)
    """Plugin name -> (its info from the declaration, builtin) while its hooks have not run."""
    manager: pluggy.PluginManager = field(
        default_factory=lambda: _new_manager(),
    )
    _resolving: threading.RLock = field(default_factory=threading.RLock, repr=False)
    restriction: Restriction | None = None
    """What ``POWERPLANE_LOAD_PLUGINS`` restricted (None: the variable is not set)."""
    sources: tuple[tuple[str, str, str, str], ...] = ()
    """Every entry point :func:`load_plugins` found: (name, ``module:attr``, distribution,
    version), in load order, loaded or not."""

    def signature(self) -> tuple[Any, ...]:
        """What this registry's plugins are: every entry point found (:attr:`sources`:
        name, value, distribution, version) and what ``POWERPLANE_LOAD_PLUGINS`` restricted.
        The same for two registries loaded from the same installed plugins, whatever hooks
        each has run since (a cache of validated configs is keyed by it)."""
        return (self.sources, self.restriction)

    def restriction_hint(self, name: str) -> str:
        """For an unknown type or kind ``name``: ``; ...`` saying that
        ``POWERPLANE_LOAD_PLUGINS`` may have hidden it, or ``""`` when it is not set or left
        nothing out."""
        found = self.restriction
        if found is None or not found.not_loaded:
            return ""
        if name in found.not_loaded:
            return (f"; plugin {name!r} is installed but {found.setting} did not load it "
                    f"(add it to {ENV_RESTRICT}, or unset the variable)")
        return (f"; {found.setting} left out the installed plugins "
                f"{', '.join(found.not_loaded)}: the type may be one of theirs")

    def missing_hint(self, kind: str, name: str) -> str:
        """For a ``name`` of hook ``kind`` (``cluster``, ``storage``, ``store``,
        ``secret``) that nothing registered: ``; ...`` naming the project distribution
        that provides it (``install powerplane-kubernetes``), then what
        ``POWERPLANE_LOAD_PLUGINS`` may have hidden; ``""`` when neither applies."""
        provider = PROVIDERS.get(kind, {}).get(name)
        found = f"; {name!r} is provided by {provider}: install {provider}" if provider else ""
        return found + self.restriction_hint(name)

    def __post_init__(self) -> None:
        self.channel_types = _Table(self)
        self.cluster_types = _Table(self)
        self.storage_types = _Table(self)
        self.store_types = _Table(self)
        self.secret_kinds = _Table(self)
        self.policy_types = _Table(self)

    @property
    def plugins(self) -> list[PluginInfo]:
        """Every plugin loaded, in load order (every pending hook run first)."""
        self._resolve_all()
        return self._infos

    @plugins.setter
    def plugins(self, value: list[PluginInfo]) -> None:
        self._infos = value

    @property
    def failures(self) -> list[PluginFailure]:
        """Every plugin that failed, and why (every pending hook run first)."""
        self._resolve_all()
        return self._failures

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

    @property
    def deployment_checks(self) -> dict[str, DeploymentCheck]:
        """The deployment checks plugins register (``register_deployment_checks``), by name,
        core's built-ins first, then the plugins in load order.

        Collected on first use by calling that hook alone: never a plugin's other hooks, so
        a deployment that names none of a plugin's declared types (``REGISTERS``) still
        imports none of its config models. A plugin whose hook raises, or registers
        something other than a ``DeploymentCheck``, or a name already taken, is a failure
        of that plugin (listed by ``powerplane plugins``); its other registrations stay."""
        with self._resolving:
            if self._checks is None:
                self._checks = self._collect_checks()
            return self._checks

    @property
    def check_owners(self) -> dict[str, str]:
        """Deployment check name -> the plugin that registered it."""
        self.deployment_checks  # noqa: B018 -- collected on first use
        return self._check_owners

    def _collect_checks(self) -> dict[str, DeploymentCheck]:
        from powerplane.kinds import DeploymentCheck  # on first use: it imports pydantic

        checks: dict[str, DeploymentCheck] = {}
        self._check_owners.clear()
        loaded = [*self.builtins, *self._infos]
        order = {p.name: i for i, p in enumerate(loaded)}
        hooks = self.manager.hook
        impls = hooks.register_deployment_checks.get_hookimpls()
        for impl in sorted(impls, key=lambda i: order.get(i.plugin_name, len(order))):
            info = next((p for p in loaded if p.name == impl.plugin_name), None)
            found: list[Any] = []
            try:
                impl.function(register=found.append)
                for item in found:
                    if not isinstance(item, DeploymentCheck):
                        raise TypeError("register_deployment_checks takes a DeploymentCheck, "
                                        f"not {type(item).__name__}")
                names = [c.name for c in found]
                twice = sorted({n for n in names if names.count(n) > 1})
                if twice:
                    raise ValueError(f"registers deployment check {twice[0]!r} more than once")
                clash = next((n for n in names if n in checks), None)
                if clash is not None:
                    raise ValueError(f"deployment check {clash!r} is already registered by "
                                     f"plugin {self._check_owners[clash]!r}")
            except Exception as exc:  # a plugin's own bug: isolate it
                error = str(exc) if isinstance(exc, ValueError) else _describe(exc)
                self._failures.append(PluginFailure(
                    impl.plugin_name, info.distribution if info else "",
                    info.version if info else "", error))
                continue
            for check in found:
                checks[check.name] = check
                self._check_owners[check.name] = impl.plugin_name
        return checks

    def port_types(self, kind: str) -> Mapping[str, PortType[Any, Any]]:
        """The registered port types of ``kind``: ``cluster``, ``storage`` or ``store``."""
        tables: dict[str, Mapping[str, PortType[Any, Any]]] = {
            "cluster": self.cluster_types, "storage": self.storage_types,
            "store": self.store_types,
        }
        return tables[kind]

    def _table(self, kind: str) -> _Table[Any]:
        tables: dict[str, _Table[Any]] = {
            "channel": self.channel_types, "cluster": self.cluster_types,
            "storage": self.storage_types, "store": self.store_types,
            "secret": self.secret_kinds, "policy": self.policy_types,
        }
        return tables[kind]

    def _owner(self, kind: str, name: str) -> str:
        if kind == "channel":
            return self.owners[name]
        return self.port_owners[(kind, name)]

    def add_builtins(self) -> None:
        """Add core's own port types and secret kinds (:mod:`powerplane.builtins`).

        The built-ins are a plugin: loaded by name (:data:`BUILTINS`) as an entry point is,
        never imported by this module, which sits below every layer they register from
        (the simulators, the lifecycle's ports and store)."""
        from powerplane._version import __version__

        module = importlib.import_module(BUILTINS)
        self.add_module(module.NAME, module, CORE_DISTRIBUTION, __version__, builtin=True)

    def add_module(
        self, name: str, module: object, distribution: str = "", version: str = "",
        *, builtin: bool = False,
    ) -> None:
        """Register one plugin object (a module or a class instance) and collect what it
        registers through each hook.

        Used for entry points, and by tests to register a plugin for one test. ``builtin``:
        core's own registrations, kept out of :attr:`plugins`. A module that declares its
        names (:data:`REGISTERS`) has its hooks called on first lookup of one of them.
        """
        if self.manager.has_plugin(name) or any(p.name == name for p in self._infos):
            first = next((p for p in self._infos if p.name == name), None)
            by = f" by distribution {first.distribution!r}" if first and first.distribution else ""
            msg = (f"plugin name {name!r} is already taken{by}; the first one is kept "
                   "(rename this plugin's entry point)")
            self._failures.append(PluginFailure(name, distribution, version, msg))
            return
        declared = getattr(module, REGISTERS, None) if isinstance(module, ModuleType) else None
        if declared is not None:
            self._declare(name, module, declared, distribution, version, builtin)
            return
        try:
            self.manager.register(module, name=name)
            found = self._collect(name)
        except Exception as exc:  # a plugin's own bug: isolate it
            self._unregister(name)
            self._failures.append(PluginFailure(name, distribution, version, _describe(exc)))
            return
        names = {kind: [t.name for t in found[kind]] for kind in _KINDS}
        clash = self._clash(names)
        if clash is not None:
            self._unregister(name)
            self._failures.append(PluginFailure(name, distribution, version, clash))
            return
        self._install(name, found)
        self._demo_peers = None  # collected again on next use
        self._checks = None
        info = PluginInfo(name, distribution, version, *(tuple(names[k]) for k in _KINDS))
        (self.builtins if builtin else self._infos).append(info)

    def _collect(self, name: str) -> dict[str, list[Any]]:
        """Call plugin ``name``'s registration hooks; what each registered, by kind."""
        found: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
        hooks = self.manager.hook
        for hook, sink in (
            (hooks.register_channel_types, _sink("channel", found["channel"])),
            (hooks.register_cluster_types, _sink("cluster", found["cluster"])),
            (hooks.register_storage_types, _sink("storage", found["storage"])),
            (hooks.register_store_types, _sink("store", found["store"])),
            (hooks.register_secret_kinds, _sink("secret", found["secret"])),
            (hooks.register_policy_types, _sink("policy", found["policy"])),
        ):
            for impl in hook.get_hookimpls():
                if impl.plugin_name == name:
                    impl.function(register=sink)
        return found

    def _clash(self, names: Mapping[str, Sequence[str]]) -> str | None:
        """Why these names cannot be registered (taken, or twice), or ``None``."""
        for kind in _KINDS:
            table = self._table(kind)
            listed = list(names.get(kind, ()))
            clash = [n for n in listed if table.taken(n)]
            twice = sorted({n for n in listed if listed.count(n) > 1})
            if clash:
                return (f"{_WHAT[kind]} {clash[0]!r} is already registered by plugin "
                        f"{self._owner(kind, clash[0])!r}")
            if twice:
                return f"registers {_WHAT[kind]} {twice[0]!r} more than once"
        return None

    def _install(self, name: str, found: Mapping[str, list[Any]]) -> None:
        for kind in _KINDS:
            table = self._table(kind)
            for item in found[kind]:
                table[item.name] = item
                if kind == "channel":
                    self.owners[item.name] = name
                else:
                    self.port_owners[(kind, item.name)] = name

    def _declare(self, name: str, module: object, declared: object, distribution: str,
                 version: str, builtin: bool) -> None:
        """Register ``module`` by its declared names; its hooks run on first lookup."""
        names = _declared_names(declared)
        if names is None:
            self._failures.append(PluginFailure(
                name, distribution, version,
                f"{REGISTERS} must map kinds ({', '.join(_KINDS)}) to lists of names"))
            return
        clash = self._clash(names)
        if clash is not None:
            self._failures.append(PluginFailure(name, distribution, version, clash))
            return
        try:
            self.manager.register(module, name=name)
        except Exception as exc:  # a malformed hook implementation: isolate it
            self._unregister(name)
            self._failures.append(PluginFailure(name, distribution, version, _describe(exc)))
            return
        for kind in _KINDS:
            table = self._table(kind)
            for item in names[kind]:
                table.pending[item] = name
                if kind == "channel":
                    self.owners[item] = name
                else:
                    self.port_owners[(kind, item)] = name
        self._demo_peers = None
        self._checks = None
        info = PluginInfo(name, distribution, version, *(names[k] for k in _KINDS))
        (self.builtins if builtin else self._infos).append(info)
        self._pending[name] = (info, builtin)

    def _resolve(self, name: str) -> None:
        """Run pending plugin ``name``'s hooks: what they register must be what it declared.

        Under the registry's lock: a second thread looking up the same name waits for the
        first one's hooks rather than finding the name neither pending nor registered."""
        with self._resolving:
            self._resolve_locked(name)

    def _resolve_locked(self, name: str) -> None:
        entry = self._pending.pop(name, None)
        if entry is None:
            return
        info, builtin = entry
        declared = dict(zip(_KINDS, (info.channel_types, info.cluster_types,
                                     info.storage_types, info.store_types,
                                     info.secret_kinds, info.policy_types), strict=True))
        try:
            found = self._collect(name)
        except Exception as exc:  # a plugin's own bug: isolate it
            self._drop(name, info, builtin, _describe(exc))
            return
        for kind in _KINDS:
            got = tuple(t.name for t in found[kind])
            if sorted(got) != sorted(declared[kind]):
                self._drop(name, info, builtin,
                           f"registers {_WHAT[kind]}s {list(got)!r} but declares "
                           f"{list(declared[kind])!r} in {REGISTERS}")
                return
        self._install(name, found)

    def _resolve_all(self) -> None:
        for name in list(self._pending):
            self._resolve(name)

    def _drop(self, name: str, info: PluginInfo, builtin: bool, error: str) -> None:
        """A pending plugin whose hooks failed: out of every table, a failure of its own."""
        self._forget(name)
        if builtin:
            self.builtins = [p for p in self.builtins if p.name != name]
        self._failures.append(PluginFailure(name, info.distribution, info.version, error))

    def remove(self, name: str) -> None:
        """Unregister a plugin added with :meth:`add_module` (tests)."""
        self._pending.pop(name, None)
        self._forget(name)

    def _forget(self, name: str) -> None:
        self._unregister(name)
        self._demo_peers = None
        self._checks = None
        self._infos = [p for p in self._infos if p.name != name]
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


def _declared_names(declared: object) -> dict[str, tuple[str, ...]] | None:
    """A :data:`REGISTERS` value as names by kind (every kind present), or ``None``."""
    if not isinstance(declared, Mapping) or not set(declared) <= set(_KINDS):
        return None
    out: dict[str, tuple[str, ...]] = {}
    for kind in _KINDS:
        names = declared.get(kind, ())
        if isinstance(names, str) or not isinstance(names, (list, tuple)):
            return None
        if not all(isinstance(n, str) for n in names):
            return None
        out[kind] = tuple(names)
    return out


_WANT = {"channel": "ChannelType", "cluster": "ClusterType", "storage": "StorageType",
         "store": "StoreType", "secret": "SecretKind", "policy": "PolicyType"}
"""The type each hook's ``register`` takes, by kind (a port type's is the subclass of
:class:`~powerplane.kinds.PortType` whose ``port`` is that kind)."""


def _sink(kind: str, into: list[Any]) -> Callable[[Any], None]:
    """The ``register`` a hook of ``kind`` is given: it takes only that hook's type.

    The types are imported when a hook registers one, not with this module (they import
    pydantic; a command that registers nothing never does)."""

    def register(item: Any) -> None:
        from powerplane.channel import ChannelType
        from powerplane.kinds import PolicyType, PortType
        from powerplane.secrets import SecretKind

        if kind == "channel":
            ok = isinstance(item, ChannelType)
        elif kind == "secret":
            ok = isinstance(item, SecretKind)
        elif kind == "policy":
            ok = isinstance(item, PolicyType)
        else:
            ok = isinstance(item, PortType) and item.port == kind
        if not ok:
            raise TypeError(f"register_{kind}{'_kinds' if kind == 'secret' else '_types'} "
                            f"takes a {_WANT[kind]}, not {type(item).__name__}")
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


def _rank(ep: _entry_points.EntryPoint) -> int:
    """0: core's own distribution; 1: the project's plugin distributions; 2: any other."""
    dist = _normal(ep.dist)
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
    found = _entry_points.read(GROUP)  # the standard reader: every distribution finder
    order = sorted(range(len(found)), key=lambda i: (_rank(found[i]), found[i].name, i))
    eps = [found[i] for i in order]
    reg.sources = tuple((ep.name, ep.value, ep.dist, ep.version) for ep in eps)
    wanted = _selected(e.name for e in eps)
    if wanted is not None:
        installed = {ep.name for ep in eps}
        written = os.environ.get(ENV_RESTRICT, "").split(",")
        reg.restriction = Restriction(tuple(dict.fromkeys(n.strip() for n in written
                                                          if n.strip())),
                                      tuple(sorted(installed - wanted)),
                                      tuple(sorted(wanted - installed)))
        for name in reg.restriction.unknown:
            log.warning("warning: %s names %r, which no installed plugin has (installed: "
                        "%s)", ENV_RESTRICT, name, ", ".join(sorted(installed)) or "none")
    taken: dict[str, str] = {}
    for ep in eps:
        if wanted is not None and ep.name not in wanted:
            continue
        dist, version = ep.dist, ep.version
        if ep.name in taken:  # the first stays; this one is a failure of its own
            first = taken[ep.name]
            by = f" by distribution {first!r}" if first else ""
            reg._failures.append(PluginFailure(
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
            reg._failures.append(PluginFailure(ep.name, dist, version, _describe(exc)))
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
