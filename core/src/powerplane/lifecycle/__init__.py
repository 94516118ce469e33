"""The node-maintenance lifecycle: cordon -> drain -> reboot / power-off -> return to service.

``Requested -> Cordoned -> Draining -> Drained -> Rebooting | PoweredOff -> Returning ->
Complete``, with ``Refused`` and ``Failed`` terminal. The quorum guard, virtual-node
refusal and storage evacuation run inside it; it reaches the cluster and storage through
small ports (:mod:`.cluster`, :mod:`.storage`) and power through the ``PowerHost``, and
keeps its objects in a store (:mod:`.store`: embedded SQLite by default). Cluster, storage
and store are port types plugins register through hooks (:mod:`.ports`). The same guard
runs for a direct ``invoke`` of reboot, shutdown and terminate (:func:`invoke_guard`).

Names load lazily (as :mod:`powerplane`'s do), so a plugin registering a port type does not
import the reconciler.

Modules: ``model`` (the object), ``phases`` (the graph), ``reconciler``, ``quorum``,
``guard`` (safety checks), ``evacuation`` (the hook), ``cluster``, ``storage``, ``ports``,
``store``, ``ceremony``, ``audit``, ``settings`` (the config section), ``service``
(``Lifecycle``), ``crash`` (crash points for the crash test). They stand in layers, each
importing only those below it (an import contract in ``pyproject.toml``), top first:
``service``; ``reconciler``; ``dispatch``; ``guard``; ``ceremony``, ``quorum``; ``store``;
``audit``, ``phases``; ``model``; ``ports``, ``cluster``, ``storage`` (the protocols);
``settings``, ``evacuation``, ``crash``. The package holds protocols and engine: the
simulated cluster, storage and machines are in :mod:`powerplane.sim`, above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane._lazy import lazy_exports

if TYPE_CHECKING:
    from powerplane.lifecycle.audit import Action, AuditRecord
    from powerplane.lifecycle.ceremony import Ceremony, CeremonyRequired, MaintenanceRefused
    from powerplane.lifecycle.evacuation import (
        EvacuationHook,
        EvacuationStatus,
        LonghornHook,
        evacuation_status,
    )
    from powerplane.lifecycle.guard import GuardRefused, InvokeGuard, LifecycleGuard, invoke_guard
    from powerplane.lifecycle.model import Intent, NodeMaintenance, Phase
    from powerplane.lifecycle.ports import (
        ClusterType,
        MaintenanceStore,
        PortContext,
        StorageType,
        StoreContext,
        StoreType,
        open_store,
    )
    from powerplane.lifecycle.reconciler import Reconciler, Result
    from powerplane.lifecycle.service import Lifecycle
    from powerplane.lifecycle.settings import LifecycleConfig, lifecycle_config
    from powerplane.lifecycle.store import (
        AlreadyActive,
        ConcurrentChange,
        NotFound,
        Store,
        StoreError,
    )
    from powerplane.lifecycle.store import Conflict as Conflict  # the private retry signal

__all__ = [
    "Action",
    "AlreadyActive",
    "AuditRecord",
    "Ceremony",
    "CeremonyRequired",
    "ClusterType",
    "ConcurrentChange",
    "EvacuationHook",
    "EvacuationStatus",
    "GuardRefused",
    "Intent",
    "InvokeGuard",
    "Lifecycle",
    "LifecycleConfig",
    "LifecycleGuard",
    "LonghornHook",
    "MaintenanceRefused",
    "MaintenanceStore",
    "NodeMaintenance",
    "NotFound",
    "Phase",
    "PortContext",
    "Reconciler",
    "Result",
    "StorageType",
    "Store",
    "StoreContext",
    "StoreError",
    "StoreType",
    "evacuation_status",
    "invoke_guard",
    "lifecycle_config",
    "open_store",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Action": ".audit",
        "AuditRecord": ".audit",
        "Ceremony": ".ceremony",
        "CeremonyRequired": ".ceremony",
        "MaintenanceRefused": ".ceremony",
        "EvacuationHook": ".evacuation",
        "EvacuationStatus": ".evacuation",
        "LonghornHook": ".evacuation",
        "evacuation_status": ".evacuation",
        "GuardRefused": ".guard",
        "InvokeGuard": ".guard",
        "LifecycleGuard": ".guard",
        "invoke_guard": ".guard",
        "Intent": ".model",
        "NodeMaintenance": ".model",
        "Phase": ".model",
        "ClusterType": ".ports",
        "MaintenanceStore": ".ports",
        "PortContext": ".ports",
        "StorageType": ".ports",
        "StoreContext": ".ports",
        "StoreType": ".ports",
        "open_store": ".ports",
        "Reconciler": ".reconciler",
        "Result": ".reconciler",
        "Lifecycle": ".service",
        "LifecycleConfig": ".settings",
        "lifecycle_config": ".settings",
        "AlreadyActive": ".store",
        "ConcurrentChange": ".store",
        "Conflict": ".store",
        "NotFound": ".store",
        "Store": ".store",
        "StoreError": ".store",
    },
)
