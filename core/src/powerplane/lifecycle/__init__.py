"""The node-maintenance lifecycle: cordon -> drain -> reboot / power-off -> return to service.

``Requested -> Cordoned -> Draining -> Drained -> Rebooting | PoweredOff -> Returning ->
Complete``, with ``Refused`` and ``Failed`` terminal. The quorum guard, virtual-node
refusal and storage evacuation run inside it; it reaches the cluster and storage through
small ports (:mod:`.cluster`, :mod:`.storage`) and power through the ``PowerHost``, and
keeps its objects in an embedded SQLite store (:mod:`.store`). The same guard runs for a
direct ``invoke`` of reboot, shutdown and terminate (:func:`invoke_guard`).

Modules: ``model`` (the object), ``phases`` (the graph), ``reconciler``, ``quorum``,
``guard`` (safety checks), ``evacuation`` (the hook), ``cluster``, ``storage``, ``ports``,
``store``, ``ceremony``, ``audit``, ``settings`` (the config section), ``service``
(``Lifecycle``), ``crash`` (crash points for the crash test).
"""

from __future__ import annotations

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
    "NodeMaintenance",
    "NotFound",
    "Phase",
    "Reconciler",
    "Result",
    "Store",
    "StoreError",
    "evacuation_status",
    "invoke_guard",
    "lifecycle_config",
]
