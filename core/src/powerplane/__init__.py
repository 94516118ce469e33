"""powerplane: a plugin framework for controlling server power safely.

Public names load lazily (through :func:`powerplane._lazy.lazy_exports`), so
``import powerplane`` (and ``powerplane --help``) stays cheap: nothing heavy is imported
until a name is used.

:mod:`powerplane.testing` is the public helper set for peers, tests, benchmarks and
vendors: loopback peers (``Peer``/``StartedPeer``), free and closed ports, a server that
never answers, a child process stopped by its own handle, waiting until a peer is ready,
and throwaway certificates. It needs only the standard library.

Core's modules stand in layers, each importing only those below it (kept by the import
contracts in ``pyproject.toml``, ``lint-imports``; docs/reference.md, "Layers inside
core"), top first: ``cli``; ``builtins`` (core's plugin, loaded by name); ``sim``
(simulators) and ``testing``; ``lifecycle`` (inside it: service, reconciler, dispatch,
guard, ceremony/quorum, store, audit/phases, model, ports with the cluster and storage
protocols, settings); ``host``; ``config``, ``recovery`` and ``readback``; ``plugins`` and
``hookspecs``; the seam vocabulary ``channel``, ``fields`` and ``secrets``; at the bottom
``errors``, ``capabilities``, ``workers`` and ``scheduling``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane._lazy import lazy_exports

if TYPE_CHECKING:
    from powerplane.capabilities import CapabilitySet, Source, Verb
    from powerplane.channel import (
        Acceptance,
        Address,
        BatchDiscovery,
        BatchInvoker,
        Channel,
        ChannelType,
        HasBootMarker,
        HasEndpoint,
        Identifies,
        Outcome,
        PowerState,
        Reading,
        Terminates,
        about_to_send,
        require,
    )
    from powerplane.config import Deployment, load_config, parse_config
    from powerplane.errors import (
        AuthenticationFailed,
        ChannelError,
        ChannelTimeout,
        ConfigError,
        ConfigProblem,
        NotOffered,
        NotSupported,
        OutcomeUnknown,
        PluginLoadError,
        PowerplaneError,
        ProtocolError,
        RefusedByDevice,
        SecretError,
        TLSVerificationFailed,
        UnknownNode,
        Unreachable,
    )
    from powerplane.fields import StrictBool, StrictFloat, StrictInt, Timeouts, TlsVerify
    from powerplane.hookspecs import hookimpl
    from powerplane.host import InvokeResult, NodeReading, PowerHost
    from powerplane.lifecycle.audit import Action, AuditRecord
    from powerplane.lifecycle.cluster import ClusterPort, DrainProgress
    from powerplane.lifecycle.evacuation import EvacuationHook, LonghornHook
    from powerplane.lifecycle.model import Intent, NodeMaintenance, Phase
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
    )
    from powerplane.lifecycle.service import Lifecycle
    from powerplane.lifecycle.settings import LifecycleConfig
    from powerplane.lifecycle.storage import StoragePort
    from powerplane.lifecycle.store import AlreadyActive, ConcurrentChange, NotFound, StoreError
    from powerplane.lifecycle.store import Conflict as StoreConflict
    from powerplane.readback import PowerOffConfirmed, PowerOffWatch
    from powerplane.recovery import NodeOffer, VerbOffer
    from powerplane.secrets import SecretKind, SecretRef

__version__ = "0.1.0"

__all__ = [
    "Acceptance",
    "Action",
    "Address",
    "AlreadyActive",
    "AuditRecord",
    "AuthenticationFailed",
    "BatchDiscovery",
    "BatchInvoker",
    "CapabilitySet",
    "Channel",
    "ChannelError",
    "ChannelTimeout",
    "ChannelType",
    "ClusterPort",
    "ClusterType",
    "ConcurrentChange",
    "ConfigError",
    "ConfigProblem",
    "Deployment",
    "DrainProgress",
    "EvacuationHook",
    "HasBootMarker",
    "HasEndpoint",
    "Identifies",
    "Intent",
    "InvokeResult",
    "Lifecycle",
    "LifecycleConfig",
    "LonghornHook",
    "MaintenanceStore",
    "NodeMaintenance",
    "NodeOffer",
    "NodeReading",
    "NotFound",
    "NotOffered",
    "NotSupported",
    "Outcome",
    "OutcomeUnknown",
    "PermanentPortError",
    "Phase",
    "PluginLoadError",
    "PortContext",
    "PortError",
    "PowerHost",
    "PowerOffConfirmed",
    "PowerOffWatch",
    "PowerState",
    "PowerplaneError",
    "ProtocolError",
    "Reading",
    "RefusedByDevice",
    "SecretError",
    "SecretKind",
    "SecretRef",
    "Source",
    "StoragePort",
    "StorageType",
    "StoreConflict",
    "StoreContext",
    "StoreError",
    "StoreType",
    "StrictBool",
    "StrictFloat",
    "StrictInt",
    "TLSVerificationFailed",
    "TemporaryPortError",
    "Terminates",
    "Timeouts",
    "TlsVerify",
    "UnknownNode",
    "Unreachable",
    "Verb",
    "VerbOffer",
    "about_to_send",
    "hookimpl",
    "lazy_exports",
    "load_config",
    "parse_config",
    "require",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CapabilitySet": ".capabilities",
        "Source": ".capabilities",
        "Verb": ".capabilities",
        "Acceptance": ".channel",
        "Address": ".channel",
        "BatchDiscovery": ".channel",
        "BatchInvoker": ".channel",
        "Channel": ".channel",
        "ChannelType": ".channel",
        "HasBootMarker": ".channel",
        "HasEndpoint": ".channel",
        "Identifies": ".channel",
        "Outcome": ".channel",
        "Terminates": ".channel",
        "PowerState": ".channel",
        "Reading": ".channel",
        "about_to_send": ".channel",
        "require": ".channel",
        "Deployment": ".config",
        "StrictBool": ".fields",
        "StrictFloat": ".fields",
        "StrictInt": ".fields",
        "TlsVerify": ".fields",
        "Timeouts": ".fields",
        "load_config": ".config",
        "parse_config": ".config",
        "AuthenticationFailed": ".errors",
        "ChannelError": ".errors",
        "ChannelTimeout": ".errors",
        "ConfigError": ".errors",
        "ConfigProblem": ".errors",
        "NotOffered": ".errors",
        "NotSupported": ".errors",
        "OutcomeUnknown": ".errors",
        "PluginLoadError": ".errors",
        "PowerplaneError": ".errors",
        "ProtocolError": ".errors",
        "RefusedByDevice": ".errors",
        "SecretError": ".errors",
        "TLSVerificationFailed": ".errors",
        "UnknownNode": ".errors",
        "Unreachable": ".errors",
        "hookimpl": ".hookspecs",
        "InvokeResult": ".host",
        "NodeReading": ".host",
        "PowerHost": ".host",
        "PowerOffConfirmed": ".readback",
        "PowerOffWatch": ".readback",
        "NodeOffer": ".recovery",
        "VerbOffer": ".recovery",
        "SecretRef": ".secrets",
        "Action": ".lifecycle.audit",
        "AuditRecord": ".lifecycle.audit",
        "ClusterPort": ".lifecycle.cluster",
        "DrainProgress": ".lifecycle.cluster",
        "EvacuationHook": ".lifecycle.evacuation",
        "LonghornHook": ".lifecycle.evacuation",
        "Intent": ".lifecycle.model",
        "NodeMaintenance": ".lifecycle.model",
        "Phase": ".lifecycle.model",
        "ClusterType": ".lifecycle.ports",
        "MaintenanceStore": ".lifecycle.ports",
        "PermanentPortError": ".lifecycle.ports",
        "PortContext": ".lifecycle.ports",
        "PortError": ".lifecycle.ports",
        "StorageType": ".lifecycle.ports",
        "StoreContext": ".lifecycle.ports",
        "StoreType": ".lifecycle.ports",
        "TemporaryPortError": ".lifecycle.ports",
        "Lifecycle": ".lifecycle.service",
        "LifecycleConfig": ".lifecycle.settings",
        "StoragePort": ".lifecycle.storage",
        "AlreadyActive": ".lifecycle.store",
        "ConcurrentChange": ".lifecycle.store",
        "NotFound": ".lifecycle.store",
        "StoreError": ".lifecycle.store",
        "StoreConflict": ".lifecycle.store:Conflict",
        "SecretKind": ".secrets",
    },
)
