"""The node-maintenance lifecycle: cordon -> drain -> reboot / power-off -> return to service.

``Requested -> Cordoned -> Draining -> Drained -> Rebooting | PoweredOff -> Returning ->
Complete``, with ``Refused`` and ``Failed`` terminal. The quorum guard, virtual-node
refusal and storage evacuation run inside it; it reaches the cluster and storage through
small ports (:mod:`.cluster`, :mod:`.storage`) and power through the ``PowerHost``, and
keeps its objects in a store (:mod:`.store`: embedded SQLite by default). Cluster, storage
and store are port types plugins register through hooks (:mod:`.ports`). The same guard
runs for a direct ``invoke`` of reboot, shutdown and terminate: the runtime attaches it to
every host of a deployment with a ``lifecycle:`` section (:mod:`powerplane.runtime`).

This package is the one public home of the lifecycle's names, for two audiences (its
``__all__``; nothing of it is exported by :mod:`powerplane`):

- port vendors, a plugin's cluster, storage or store type: ``ClusterType``, ``StorageType``,
  ``StoreType``, ``PortContext``, ``StoreContext``, the protocols ``ClusterPort``,
  ``StoragePort`` and ``MaintenanceStore`` (with ``find_maintenance``), what a store keeps
  (``NodeMaintenance``, ``Phase``, ``AuditRecord``, and for a store chaining its own
  trail ``AuditEntry`` and ``encode_entry``, ...) and what ports and stores raise
  (``PortError`` and its two kinds, ``StoreError``, ``NotFound``, ``StoreConflict``: the store's
  retry signal, ...);
- embedders running maintenance: ``Lifecycle``, ``Store``, ``open_store``, the ceremony,
  the settings (``lifecycle_config``).

The engine's own classes (``Reconciler``, the guards' classes) are internal: importable from
their modules, with no promise. Names load lazily (as :mod:`powerplane`'s do), so a plugin
registering a port type does not import the reconciler.

Modules: ``model`` (the object), ``phases`` (the graph), ``reconciler``, ``admission``,
``dispatch``, ``direct`` (the guard of a direct invoke), ``quorum``, ``guard`` (safety
checks), ``evacuation`` (the hook), ``cluster``, ``storage``, ``ports``, ``store``,
``trail`` (the audit beside the maintenances), ``ledger`` (what was dispatched, append-only),
``ceremony``, ``audit``, ``service``
(``Lifecycle``), ``crash`` (crash points for the crash test); the ``lifecycle:`` section's
settings are :mod:`powerplane.settings.lifecycle`, below the package. They stand in layers,
each importing only those below it, type-only imports included (an import contract in
``pyproject.toml``), top first: ``service``; ``reconciler``; ``admission``; ``dispatch``,
``direct``; ``guard``; ``ceremony``, ``quorum``; ``store``, ``trail``; ``ports`` (the
port types, the store's protocol, the contexts, opening a store); ``audit``, ``ledger``
(the dispatch ledger), ``phases``; ``model``;
``cluster``, ``storage`` (their protocols); ``evacuation``, ``crash``. The
package holds protocols and engine: the simulated cluster, storage and machines are in
:mod:`powerplane.sim`, above it.
"""

from __future__ import annotations

import typing

from powerplane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from powerplane.lifecycle.audit import (
        Action,
        AuditEntry,
        AuditRecord,
        action_for_intent,
        action_for_request,
        encode_entry,
    )
    from powerplane.lifecycle.ceremony import Ceremony, CeremonyRequired, MaintenanceRefused
    from powerplane.lifecycle.cluster import ClusterPort, DrainProgress
    from powerplane.lifecycle.evacuation import (
        EvacuationHook,
        EvacuationStatus,
        LonghornHook,
        evacuation_status,
    )
    from powerplane.lifecycle.guard import GuardRefused
    from powerplane.lifecycle.ledger import (
        DispatchLedger,
        LedgerConflict,
        LedgerEntry,
        LedgerKind,
    )
    from powerplane.lifecycle.model import (
        AbandonRequest,
        Dispatch,
        Evidence,
        Intent,
        NodeMaintenance,
        Phase,
    )
    from powerplane.lifecycle.ports import (
        ClusterType,
        MaintenanceStore,
        PermanentPortError,
        PortContext,
        PortError,
        StorageType,
        StoreContext,
        StoreType,
        TemporaryPortError,
        open_store,
    )
    from powerplane.lifecycle.reconciler import Result
    from powerplane.lifecycle.service import Lifecycle
    from powerplane.lifecycle.storage import StoragePort
    from powerplane.lifecycle.store import (
        AlreadyActive,
        ConcurrentChange,
        NotFound,
        Store,
        StoreConflict,
        StoreError,
        find_maintenance,
    )
    from powerplane.settings.lifecycle import LifecycleConfig, lifecycle_config

__all__ = [
    "AbandonRequest",
    "Action",
    "AlreadyActive",
    "AuditEntry",
    "AuditRecord",
    "Ceremony",
    "CeremonyRequired",
    "ClusterPort",
    "ClusterType",
    "ConcurrentChange",
    "Dispatch",
    "DispatchLedger",
    "DrainProgress",
    "EvacuationHook",
    "EvacuationStatus",
    "Evidence",
    "GuardRefused",
    "Intent",
    "LedgerConflict",
    "LedgerEntry",
    "LedgerKind",
    "Lifecycle",
    "LifecycleConfig",
    "LonghornHook",
    "MaintenanceRefused",
    "MaintenanceStore",
    "NodeMaintenance",
    "NotFound",
    "PermanentPortError",
    "Phase",
    "PortContext",
    "PortError",
    "Result",
    "StoragePort",
    "StorageType",
    "Store",
    "StoreConflict",
    "StoreContext",
    "StoreError",
    "StoreType",
    "TemporaryPortError",
    "action_for_intent",
    "action_for_request",
    "encode_entry",
    "evacuation_status",
    "find_maintenance",
    "lifecycle_config",
    "open_store",
]

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        # the port SDK: what a cluster, storage or store plugin builds, registers and raises
        "Action": ".audit",
        "AuditRecord": ".audit",
        "AuditEntry": ".audit",
        "encode_entry": ".audit",
        "action_for_intent": ".audit",
        "action_for_request": ".audit",
        "ClusterPort": ".cluster",
        "DrainProgress": ".cluster",
        "EvacuationHook": ".evacuation",
        "LonghornHook": ".evacuation",
        "AbandonRequest": ".model",
        "Dispatch": ".model",
        "Evidence": ".model",
        "DispatchLedger": ".ledger",
        "LedgerConflict": ".ledger",
        "LedgerEntry": ".ledger",
        "LedgerKind": ".ledger",
        "Intent": ".model",
        "NodeMaintenance": ".model",
        "Phase": ".model",
        "ClusterType": ".ports",
        "MaintenanceStore": ".ports",
        "PermanentPortError": ".ports",
        "PortContext": ".ports",
        "PortError": ".ports",
        "StorageType": ".ports",
        "StoreContext": ".ports",
        "StoreType": ".ports",
        "TemporaryPortError": ".ports",
        "StoragePort": ".storage",
        "AlreadyActive": ".store",
        "ConcurrentChange": ".store",
        "StoreConflict": ".store",
        "NotFound": ".store",
        "StoreError": ".store",
        "find_maintenance": ".store",
        # the embedding API: run maintenance, guard a direct invoke, read the settings
        "Ceremony": ".ceremony",
        "CeremonyRequired": ".ceremony",
        "MaintenanceRefused": ".ceremony",
        "EvacuationStatus": ".evacuation",
        "evacuation_status": ".evacuation",
        "GuardRefused": ".guard",
        "open_store": ".ports",
        "Result": ".reconciler",
        "Lifecycle": ".service",
        "LifecycleConfig": "powerplane.settings.lifecycle",
        "lifecycle_config": "powerplane.settings.lifecycle",
        "Store": ".store",
    },
)
