"""The ports a maintenance reaches the world through, and the port types plugins register.

Power is the ``PowerHost`` (the offer is re-checked at every dispatch); the cluster and
storage ports and the store come from ``lifecycle.cluster``, ``lifecycle.storage`` and
``lifecycle.store``, each a *port type* registered through a hook, as channel types are
(:mod:`powerplane.hookspecs`)::

    @hookimpl
    def register_cluster_types(register):
        register(ClusterType(name="kubernetes", config=KubeConfig, factory=make_cluster))

A port type's ``config`` is a pydantic model with a ``type: Literal["<name>"]`` field;
``lifecycle.<port>`` is validated against it (path-named problems). Its ``factory`` builds
the port: ``factory(config, PortContext) -> ClusterPort`` (cluster),
``factory(config, PortContext) -> StoragePort`` (storage), and
``factory(config, StoreContext) -> MaintenanceStore`` (store): ``ClusterType``,
``StorageType`` and ``StoreType`` narrow the generic :class:`~powerplane.kinds.PortType`
(of the seam layer, which the registry names) to these. Core registers ``simulated``
and ``none`` clusters, ``none`` and ``simulated`` storage and the ``sqlite`` store through
the same hooks (:mod:`powerplane.builtins`); the simulated ones, and the simulated machines
they read, live in :mod:`powerplane.sim`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from powerplane import workers
from powerplane.errors import LifecycleError, PowerplaneError
from powerplane.kinds import PortType
from powerplane.lifecycle.crash import crashpoint as _crashpoint
from powerplane.plugins import registry as default_registry
from powerplane.settings.lifecycle import unknown_port_type

if TYPE_CHECKING:
    from powerplane.host import Host
    from powerplane.lifecycle.audit import AuditRecord
    from powerplane.lifecycle.cluster import ClusterPort
    from powerplane.lifecycle.model import NodeMaintenance, Phase
    from powerplane.lifecycle.storage import StoragePort
    from powerplane.plugins import Registry
    from powerplane.settings.lifecycle import LifecycleConfig

__all__ = [
    "ClusterType",
    "MaintenanceStore",
    "PermanentPortError",
    "PortContext",
    "PortError",
    "Ports",
    "SharedStore",
    "StorageType",
    "StoreContext",
    "StoreType",
    "TemporaryPortError",
    "build_ports",
    "call_store",
    "machine_state",
    "open_store",
]

ConfigT = TypeVar("ConfigT", bound=BaseModel)
T = TypeVar("T")


class PortError(LifecycleError):
    """A cluster or storage port failed."""


class TemporaryPortError(PortError):
    """A port failed in a way that may pass (a timeout, a conflict): tried again next pass."""


class PermanentPortError(PortError):
    """A port failed in a way that will not pass (forbidden, not found, invalid): the
    maintenance fails with this message instead of waiting forever."""


@dataclass(frozen=True)
class PortContext:
    """What a cluster or storage factory is given beside its own config."""

    host: Host
    """The started host (power, the offer, the ordinary readback)."""
    labels: Mapping[str, Mapping[str, str]]
    """The deployment's node labels (``nodes.<n>.labels``) by node."""
    power_of: Callable[[str], Awaitable[str]]
    """A node's machine power state through the ordinary readback (:func:`machine_state`):
    ``on``, ``off``, ``unknown``, or ``none`` for a node without a channel."""
    config_dir: Path | None
    """The directory of the config file (relative paths in a port's config are relative to
    it); None for a config that did not come from a file."""
    lifecycle: LifecycleConfig
    """The whole validated ``lifecycle:`` section."""


@dataclass(frozen=True)
class StoreContext:
    """What a store factory is given beside its own config (no host: ``maintenance list``
    opens the store without starting one)."""

    config_dir: Path | None
    """The directory of the config file (None: the config did not come from a file)."""
    lifecycle: LifecycleConfig
    """The whole validated ``lifecycle:`` section."""
    create: bool = True
    """False for a dry run: a store that does not exist yet must not be created (read it as
    empty instead)."""
    crashpoint: Callable[[str], None] = field(default=_crashpoint)
    """Call it, with a name, at each point of the store's own writes where a crash must be
    survivable: the crash test kills the process there (``POWERPLANE_CRASH_AT``); a no-op
    otherwise."""
    signer: Callable[[], Any] | None = None
    """The deployment's ``audit.key`` as a signer (``powerplane.authority.seal.Signer``),
    loaded when called (None: no key): a store that writes audit records of its own (the
    ``kubernetes`` store's, with the writes they record) seals them with it."""


@dataclass(frozen=True)
class ClusterType(PortType[ConfigT, "ClusterPort"]):
    """A cluster port type: ``factory(config, PortContext) -> ClusterPort``."""

    port: ClassVar[str] = "cluster"
    factory: Callable[[ConfigT, PortContext], ClusterPort]


@dataclass(frozen=True)
class StorageType(PortType[ConfigT, "StoragePort"]):
    """A storage port type: ``factory(config, PortContext) -> StoragePort``."""

    port: ClassVar[str] = "storage"
    factory: Callable[[ConfigT, PortContext], StoragePort]


@dataclass(frozen=True)
class StoreType(PortType[ConfigT, "MaintenanceStore"]):
    """A store type: ``factory(config, StoreContext) -> MaintenanceStore``."""

    port: ClassVar[str] = "store"
    factory: Callable[[ConfigT, StoreContext], MaintenanceStore]


async def call_store(store: object, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, one of ``store``'s methods: in a worker thread of the process's pool
    (:func:`powerplane.workers.call`) where the store sets ``blocking = True``, else here.

    Cancelled while a call runs, it returns at once and the call finishes in its thread:
    a write it makes still names the version it read, so nothing is written twice, and a
    dispatch it recorded without the send that would follow is settled by evidence."""
    if getattr(store, "blocking", False):
        return await workers.call(fn, *args)
    return fn(*args)


class MaintenanceStore(Protocol):
    """What the service, the reconciler, the guard and the CLI need from a store.

    Writes are optimistic: :meth:`update` names the ``resource_version`` it read and raises
    :class:`~powerplane.lifecycle.store.StoreConflict` (``powerplane.lifecycle.StoreConflict``)
    when the stored one differs, restoring ``m.resource_version``; the caller reads again and
    retries. One active maintenance per node (:meth:`create` raises ``AlreadyActive``). A store that
    cannot be used raises ``StoreError`` (exit 1), naming where it is and why. Audit
    records are append-only and outlive the maintenances they name.
    """

    after_write: Callable[[NodeMaintenance], None] | None
    """Called after every committed maintenance write (progress output, tests)."""

    # A store whose every call is a network request (the ``kubernetes`` store) also sets a
    # class attribute ``blocking = True``: the reconciler and the admission then make its
    # calls from a worker thread (:func:`call_store`), so none holds the event loop. A
    # local store (SQLite: a connection bound to its thread, answers in microseconds) is
    # called in place.

    def create(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Record a new maintenance (version 1) and, atomically with it, its audit record."""
        ...

    def update(self, m: NodeMaintenance, audit: AuditRecord | None = None) -> NodeMaintenance:
        """Write ``m`` if its version is still current (bumps it); raises the conflict."""
        ...

    def get(self, name: str) -> NodeMaintenance:
        """The maintenance by name; raises ``NotFound``."""
        ...

    def active_for(self, node: str) -> NodeMaintenance | None:
        """The node's active maintenance, if any."""
        ...

    def latest_for(self, node: str) -> NodeMaintenance | None:
        """The node's active maintenance, else its most recent one."""
        ...

    def find(self, name_or_node: str) -> NodeMaintenance:
        """By name, else the latest of the node by that name; raises ``NotFound``."""
        ...

    def all(self, active_only: bool = False) -> list[NodeMaintenance]:
        """Every maintenance, oldest first."""
        ...

    def active(self) -> list[NodeMaintenance]:
        """Every active maintenance, oldest first."""
        ...

    def active_phases(self) -> list[tuple[str, str, Phase]]:
        """``(name, node, phase)`` of every active maintenance."""
        ...

    def append_audit(self, rec: AuditRecord) -> None:
        """Append one audit record on its own."""
        ...

    def audit(self, node: str | None = None) -> list[AuditRecord]:
        """The audit trail (of one node), in the order it was written."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


@dataclass
class Ports:
    """Power, cluster and storage, as one maintenance sees them."""

    host: Host
    cluster: ClusterPort
    storage: StoragePort


async def machine_state(host: Host, node: str) -> str:
    """A node's machine power state as the host reads it back (``none``: no channel).

    Through the ordinary readback, as any port reads it: ``on``, ``off`` or ``unknown``
    (a blind channel cannot see off; a machine in transition reads unknown).
    """
    if not host.nodes[node].channels:
        return "none"
    try:
        return (await host.read_power_state(node)).state.value
    except PowerplaneError:
        return "unknown"


def _config_dir(source: str) -> Path | None:
    if not source or source.startswith("<"):
        return None
    return Path(source).resolve().parent


def _port_type(registry: Registry | None, kind: str, name: str) -> PortType[Any, Any]:
    """The registered port type, else the config error :func:`lifecycle_config` gives."""
    reg = registry if registry is not None else default_registry()
    found: PortType[Any, Any] | None = reg.port_types(kind).get(name)
    if found is None:
        raise unknown_port_type(reg, kind, name)
    return found


def build_ports(
    host: Host, config: LifecycleConfig, registry: Registry | None = None
) -> Ports:
    """The ports the config names (through the registered port types), wired to ``host``."""
    labels = {name: dict(spec.labels) for name, spec in host.nodes.items()}

    async def power_of(node: str) -> str:
        return await machine_state(host, node)

    context = PortContext(host=host, labels=labels, power_of=power_of,
                          config_dir=_config_dir(host.deployment.source), lifecycle=config)
    ctype = _port_type(registry, "cluster", str(getattr(config.cluster, "type", "")))
    stype = _port_type(registry, "storage", str(getattr(config.storage, "type", "")))
    cluster: ClusterPort = ctype.factory(config.cluster, context)
    storage: StoragePort = stype.factory(config.storage, context)
    return Ports(host, cluster, storage)


def open_store(
    config: LifecycleConfig,
    source: str = "<memory>",
    *,
    create: bool = True,
    registry: Registry | None = None,
    signer: Callable[[], Any] | None = None,
) -> MaintenanceStore:
    """The store ``lifecycle.store`` names, through its registered store type.

    ``source`` is the config file (relative paths are relative to its directory); with
    ``create=False`` a store that does not exist yet is not created (a dry run);
    ``signer``: the audit key (:attr:`StoreContext.signer`).
    """
    stype = _port_type(registry, "store", str(getattr(config.store, "type", "")))
    context = StoreContext(config_dir=_config_dir(source), lifecycle=config, create=create,
                           signer=signer)
    store: MaintenanceStore = stype.factory(config.store, context)
    return store


class SharedStore:
    """One deployment's lifecycle store as everything one runtime holds reaches it: the
    guard (which maintenances are active), the audit trail (records beside the
    maintenances) and the lifecycle itself.

    Once the lifecycle holds it open (:meth:`hold`), every :meth:`using` is that same open
    store (one SQLite connection, one Kubernetes watch). Before, each :meth:`using` opens
    it and closes it again: a direct call's command keeps no store open between its acts,
    and a reader (``create=False``) creates no store that does not exist yet.
    """

    def __init__(self, config: LifecycleConfig, source: str = "<memory>",
                 registry: Registry | None = None,
                 signer: Callable[[], Any] | None = None) -> None:
        self.config = config
        self.source = source
        self.registry = registry
        self.signer = signer
        """The audit key each store opened is given (:attr:`StoreContext.signer`)."""
        self._held: MaintenanceStore | None = None
        self._holders = 0

    def hold(self, create: bool = True) -> MaintenanceStore:
        """The store, opened once and kept open until every holder has released it (a
        lifecycle holds it). ``create`` False: where no one holds it, a store that does
        not exist yet is read as empty and not held (a dry run creates nothing)."""
        if self._held is None:
            store = open_store(self.config, self.source, create=create,
                               registry=self.registry, signer=self.signer)
            if not create:
                return store
            self._held = store
        self._holders += 1
        return self._held

    def release(self, store: MaintenanceStore) -> None:
        """Give back ``store`` (from :meth:`hold`): closed when its last holder gives it
        back (the next :meth:`using` then opens its own)."""
        if store is not self._held:
            store.close()
            return
        self._holders -= 1
        if self._holders <= 0:
            self._held = None
            self._holders = 0
            store.close()

    @contextlib.contextmanager
    def using(self, create: bool = True) -> Iterator[MaintenanceStore]:
        """The held store, else one opened for this use and closed after it."""
        if self._held is not None:
            yield self._held
            return
        store = open_store(self.config, self.source, create=create, registry=self.registry,
                           signer=self.signer)
        try:
            yield store
        finally:
            store.close()
