"""powerplane: a plugin framework for controlling server power safely.

Each audience imports from one home (docs/reference/plugin-api.md, "Public API: one home per
audience"; ``core/tests/test_public_api.py`` keeps each home's ``__all__`` equal to what it
gives):

- ``powerplane`` (this module) is the **channel SDK**, what a channel plugin imports
  (``hookimpl``, ``ChannelType``, ``Channel`` and its optional protocols, ``Verb``,
  capabilities, the config key types, secret references, the errors a channel raises with
  the one status-code rule and TLS-failure test (``status_error``, ``is_tls_failure``), the
  one ``Backoff`` a retry waits by), and
  the **embedding API**, what an application driving power imports (``PowerHost`` and what
  its methods return, ``open_deployment`` and its ``Runtime`` (the host, the authority and
  the lifecycle composed once: :mod:`powerplane.runtime`), ``load_config``/``parse_config``,
  the errors a call raises);
- :mod:`powerplane.lifecycle` is the **port SDK** (cluster, storage and store port types,
  their protocols and errors) and the maintenance engine an application runs; none of its
  names is exported here;
- :mod:`powerplane.testing` the helpers for peers and tests, :mod:`powerplane.cli.kit` the
  kit of a command added to the CLI.

Every other module is internal. Public names load lazily (through
:func:`powerplane._lazy.lazy_exports`), so ``import powerplane`` (and ``powerplane --help``)
stays cheap: nothing heavy is imported until a name is used.

:mod:`powerplane.testing` is the public helper set for peers, tests, benchmarks and
vendors: loopback peers (``Peer``/``StartedPeer``), free and closed ports, a server that
never answers, a child process stopped by its own handle, waiting until a peer is ready,
and throwaway certificates. It needs only the standard library.

Core's modules stand in layers, each importing only those below it, at run time, inside a
function or under ``TYPE_CHECKING`` alike (kept by the import contracts in
``pyproject.toml``, ``lint-imports``, with no import excepted; docs/reference/plugin-api.md, "Layers
inside core"), top first: ``cli``; ``builtins`` (core's plugin, loaded by name); ``sim``
(simulators) and ``testing``; ``runtime`` (one composition of a deployment); ``lifecycle``
(its own layers in its package docstring); ``host``; ``config_cache`` (the validated-config
cache); ``recovery`` (the rule) and
``readback``; ``config`` (the deployment file); ``settings`` (the file's other sections,
validated) and ``authority`` (who may act; its layers in its package docstring);
``plugins`` and ``hookspecs``; the seam vocabulary ``channel``, ``fields``, ``secrets``,
``files``, ``nodes``, ``peers`` and ``kinds``; at the bottom ``errors``, ``capabilities``,
``workers`` and ``scheduling``.
"""

from __future__ import annotations

import typing

from powerplane._lazy import lazy_exports
from powerplane._version import __version__ as __version__

if typing.TYPE_CHECKING:
    from powerplane.authority.identity import Identity
    from powerplane.authority.policy import Decision, Policy, PolicyContext
    from powerplane.authority.service import Authority
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
        Manners,
        Outcome,
        PowerState,
        Reading,
        Terminates,
        about_to_send,
        require,
    )
    from powerplane.config import Deployment, load_config, parse_config
    from powerplane.errors import (
        AuditNotRecorded,
        AuthenticationFailed,
        ChannelError,
        ChannelTimeout,
        ConfigError,
        ConfigProblem,
        NotOffered,
        NotSupported,
        OutcomeUnknown,
        PluginLoadError,
        PolicyDenied,
        PowerplaneError,
        ProtocolError,
        RefusedByDevice,
        SecretError,
        TLSVerificationFailed,
        UnknownNode,
        Unreachable,
        is_tls_failure,
        status_error,
    )
    from powerplane.fields import StrictBool, StrictFloat, StrictInt, Timeouts, TlsVerify
    from powerplane.hookspecs import Registers, hookimpl
    from powerplane.host import InvokeResult, NodeReading
    from powerplane.kinds import DeploymentCheck, PolicyType
    from powerplane.nodes import NodeSpec
    from powerplane.readback import PowerOffConfirmed, PowerOffWatch
    from powerplane.recovery import NodeOffer, VerbOffer
    from powerplane.runtime import PowerHost, Runtime, authority_for, open_deployment
    from powerplane.scheduling import Backoff, Retrying
    from powerplane.secrets import SecretKind, SecretRef

__all__ = [
    "Acceptance",
    "Address",
    "AuditNotRecorded",
    "AuthenticationFailed",
    "Authority",
    "Backoff",
    "BatchDiscovery",
    "BatchInvoker",
    "CapabilitySet",
    "Channel",
    "ChannelError",
    "ChannelTimeout",
    "ChannelType",
    "ConfigError",
    "ConfigProblem",
    "Decision",
    "Deployment",
    "DeploymentCheck",
    "HasBootMarker",
    "HasEndpoint",
    "Identifies",
    "Identity",
    "InvokeResult",
    "Manners",
    "NodeOffer",
    "NodeReading",
    "NodeSpec",
    "NotOffered",
    "NotSupported",
    "Outcome",
    "OutcomeUnknown",
    "PluginLoadError",
    "Policy",
    "PolicyContext",
    "PolicyDenied",
    "PolicyType",
    "PowerHost",
    "PowerOffConfirmed",
    "PowerOffWatch",
    "PowerState",
    "PowerplaneError",
    "ProtocolError",
    "Reading",
    "RefusedByDevice",
    "Registers",
    "Retrying",
    "Runtime",
    "SecretError",
    "SecretKind",
    "SecretRef",
    "Source",
    "StrictBool",
    "StrictFloat",
    "StrictInt",
    "TLSVerificationFailed",
    "Terminates",
    "Timeouts",
    "TlsVerify",
    "UnknownNode",
    "Unreachable",
    "Verb",
    "VerbOffer",
    "about_to_send",
    "authority_for",
    "hookimpl",
    "is_tls_failure",
    "lazy_exports",
    "load_config",
    "open_deployment",
    "parse_config",
    "require",
    "status_error",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        # the channel SDK: what a channel plugin imports (lazy_exports is imported above)
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
        "Manners": ".channel",
        "Outcome": ".channel",
        "PowerState": ".channel",
        "Reading": ".channel",
        "Terminates": ".channel",
        "about_to_send": ".channel",
        "require": ".channel",
        "AuthenticationFailed": ".errors",
        "ChannelError": ".errors",
        "ChannelTimeout": ".errors",
        "ConfigError": ".errors",
        "ConfigProblem": ".errors",
        "NotSupported": ".errors",
        "OutcomeUnknown": ".errors",
        "PowerplaneError": ".errors",
        "ProtocolError": ".errors",
        "RefusedByDevice": ".errors",
        "SecretError": ".errors",
        "TLSVerificationFailed": ".errors",
        "Unreachable": ".errors",
        "is_tls_failure": ".errors",
        "status_error": ".errors",
        "StrictBool": ".fields",
        "StrictFloat": ".fields",
        "StrictInt": ".fields",
        "Timeouts": ".fields",
        "TlsVerify": ".fields",
        "Registers": ".hookspecs",
        "hookimpl": ".hookspecs",
        "DeploymentCheck": ".kinds",
        "SecretKind": ".secrets",
        "SecretRef": ".secrets",
        "Backoff": ".scheduling",
        "Retrying": ".scheduling",
        # the embedding API: what an application (or a tool) that drives power imports
        "Deployment": ".config",
        "NodeSpec": ".nodes",
        "load_config": ".config",
        "parse_config": ".config",
        "NotOffered": ".errors",
        "PluginLoadError": ".errors",
        "UnknownNode": ".errors",
        "InvokeResult": ".host",
        "NodeReading": ".host",
        "PowerHost": ".runtime",
        "Runtime": ".runtime",
        "open_deployment": ".runtime",
        "PowerOffConfirmed": ".readback",
        "PowerOffWatch": ".readback",
        "NodeOffer": ".recovery",
        "VerbOffer": ".recovery",
        # authority: who may act (the embedding API), and a policy type (the policy SDK)
        "AuditNotRecorded": ".errors",
        "PolicyDenied": ".errors",
        "Identity": ".authority.identity",
        "Decision": ".authority.policy",
        "Policy": ".authority.policy",
        "PolicyContext": ".authority.policy",
        "PolicyType": ".kinds",
        "Authority": ".authority.service",
        "authority_for": ".runtime",
    },
)
