"""Core's own port types, secret kinds and policy type, registered through the plugin hooks.

``simulated`` and ``none`` clusters, ``none`` and ``simulated`` storage, the ``sqlite``
store, the ``env`` and ``file`` secret kinds and the ``local`` policy type.
:func:`powerplane.plugins.load_plugins` adds this module before any entry point, whatever
``POWERPLANE_LOAD_PLUGINS`` says: these are part of core's config language, not device
plugins. :data:`REGISTERS` names them, so
the hooks run (importing :mod:`powerplane.lifecycle.ports` and the settings models) only
when a config or a command looks one of them up, and the factories import their adapters
on first use: a power command on a deployment without ``lifecycle:`` imports neither.

The simulators it registers live in :mod:`powerplane.sim` (the simulated channel type is
that package's own entry point, ``simulated``); this module is a plugin like any other,
loaded by name (:meth:`powerplane.plugins.Registry.add_builtins`), so it sits above the
layers it registers from and nothing below imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane.hookspecs import Registers, hookimpl

if TYPE_CHECKING:  # imported inside the hooks; the adapters inside the factories
    from powerplane.kinds import PolicyType
    from powerplane.lifecycle.cluster import ClusterPort
    from powerplane.lifecycle.ports import (
        ClusterType,
        MaintenanceStore,
        PortContext,
        StorageType,
        StoreContext,
        StoreType,
    )
    from powerplane.lifecycle.storage import StoragePort
    from powerplane.secrets import SecretKind
    from powerplane.settings.lifecycle import (
        NoneClusterConfig,
        NoneStorageConfig,
        SimulatedClusterConfig,
        SimulatedStorageConfig,
        SqliteStoreConfig,
    )

__all__ = [
    "NAME",
    "REGISTERS",
    "register_cluster_types",
    "register_policy_types",
    "register_secret_kinds",
    "register_storage_types",
    "register_store_types",
]

NAME = "powerplane"
"""The plugin name core's own registrations go under (owners in duplicate messages)."""

REGISTERS: Registers = {"cluster": ("simulated", "none"), "storage": ("none", "simulated"),
                        "store": ("sqlite",), "secret": ("env", "file"),
                        "policy": ("local",)}
"""What the hooks below register, read by the registry without calling them."""


def _simulated_cluster(config: SimulatedClusterConfig, context: PortContext) -> ClusterPort:
    from powerplane.sim.cluster import SimulatedCluster
    from powerplane.sim.machines import SimulatedMachines

    # the node's own machine, as a kubelet's Ready condition and boot id come from the node
    # itself (no channel request), found once per node while the host's channels stay the
    # same objects; None (another channel type): the ordinary readback
    machines = SimulatedMachines(context.host)

    async def boot_of(node: str) -> str | None:
        boots = machines.boots(node)
        return None if boots is None else str(boots)

    return SimulatedCluster(config, context.labels, context.power_of,
                            boot_of if config.boot_id else None, machines.state)


def _no_cluster(config: NoneClusterConfig, context: PortContext) -> ClusterPort:
    from powerplane.lifecycle.cluster import NoCluster

    return NoCluster(context.labels, context.power_of)


def _no_storage(config: NoneStorageConfig, context: PortContext) -> StoragePort:
    from powerplane.lifecycle.storage import NoStorage

    return NoStorage()


def _simulated_storage(config: SimulatedStorageConfig, context: PortContext) -> StoragePort:
    from powerplane.sim.storage import SimulatedStorage

    return SimulatedStorage(config)


def _sqlite_store(config: SqliteStoreConfig, context: StoreContext) -> MaintenanceStore:
    from pathlib import Path

    from powerplane.lifecycle.store import Store

    path = Path(config.path)
    if not path.is_absolute() and context.config_dir is not None:
        path = context.config_dir / path
    busy = context.lifecycle.busy_timeout_s
    if not context.create and not path.exists() and not path.is_symlink():
        store = Store(":memory:", busy)
        store.path = path  # errors and messages name the configured file
        return store
    return Store(path, busy)


@hookimpl
def register_cluster_types(register: Callable[[ClusterType[Any]], None]) -> None:
    """Core's cluster types: ``simulated`` and ``none``."""
    from powerplane.lifecycle.ports import ClusterType
    from powerplane.settings.lifecycle import NoneClusterConfig, SimulatedClusterConfig

    register(ClusterType("simulated", SimulatedClusterConfig, _simulated_cluster,
                         description="in-memory nodes, pods and PDBs; readiness follows power"))
    register(ClusterType("none", NoneClusterConfig, _no_cluster,
                         description="bare machines: cordon and drain not applicable"))


@hookimpl
def register_storage_types(register: Callable[[StorageType[Any]], None]) -> None:
    """Core's storage types: ``none`` and ``simulated``."""
    from powerplane.lifecycle.ports import StorageType
    from powerplane.settings.lifecycle import NoneStorageConfig, SimulatedStorageConfig

    register(StorageType("none", NoneStorageConfig, _no_storage,
                         description="no storage system: nothing to evacuate"))
    register(StorageType("simulated", SimulatedStorageConfig, _simulated_storage,
                         description="in-memory storage validated like Longhorn's webhook"))


@hookimpl
def register_store_types(register: Callable[[StoreType[Any]], None]) -> None:
    """Core's store type: ``sqlite`` (``lifecycle.store: PATH`` is this one)."""
    from powerplane.lifecycle.ports import StoreType
    from powerplane.settings.lifecycle import SqliteStoreConfig

    register(StoreType("sqlite", SqliteStoreConfig, _sqlite_store,
                       description="one SQLite file with the maintenances and the audit"))


@hookimpl
def register_secret_kinds(register: Callable[[SecretKind], None]) -> None:
    """Core's secret kinds: ``env`` and ``file``."""
    from powerplane.secrets import CORE_KINDS

    for kind in CORE_KINDS.values():
        register(kind)


@hookimpl
def register_policy_types(register: Callable[[PolicyType[Any]], None]) -> None:
    """Core's policy type: ``local`` (a roles file)."""
    from powerplane.authority.roles import LOCAL

    register(LOCAL)
