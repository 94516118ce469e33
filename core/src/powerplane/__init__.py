"""powerplane: a plugin framework for controlling server power safely.

Public names load lazily, so ``import powerplane`` (and ``powerplane --help``)
stays cheap: nothing heavy is imported until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerplane.capabilities import CapabilitySet, Source, Verb
    from powerplane.channel import (
        Acceptance,
        ChannelType,
        PowerState,
        Reading,
        about_to_send,
        require,
    )
    from powerplane.config import Deployment, load_config, parse_config
    from powerplane.errors import (
        AuthenticationFailed,
        ChannelError,
        ChannelTimeout,
        ConfigError,
        NotOffered,
        NotSupported,
        OutcomeUnknown,
        PluginLoadError,
        PowerplaneError,
        ProtocolError,
        RefusedByDevice,
        TLSVerificationFailed,
        UnknownNode,
        Unreachable,
    )
    from powerplane.hookspecs import hookimpl
    from powerplane.host import InvokeResult, NodeReading, PowerHost
    from powerplane.readback import PowerOffConfirmed, PowerOffWatch
    from powerplane.recovery import NodeOffer, VerbOffer
    from powerplane.secrets import SecretRef

__version__ = "0.1.0"

__all__ = [
    "Acceptance",
    "AuthenticationFailed",
    "CapabilitySet",
    "ChannelError",
    "ChannelTimeout",
    "ChannelType",
    "ConfigError",
    "Deployment",
    "InvokeResult",
    "NodeOffer",
    "NodeReading",
    "NotOffered",
    "NotSupported",
    "OutcomeUnknown",
    "PluginLoadError",
    "PowerHost",
    "PowerOffConfirmed",
    "PowerOffWatch",
    "PowerState",
    "PowerplaneError",
    "ProtocolError",
    "Reading",
    "RefusedByDevice",
    "SecretRef",
    "Source",
    "TLSVerificationFailed",
    "UnknownNode",
    "Unreachable",
    "Verb",
    "VerbOffer",
    "about_to_send",
    "hookimpl",
    "load_config",
    "parse_config",
    "require",
]

_WHERE = {
    "CapabilitySet": "capabilities",
    "Source": "capabilities",
    "Verb": "capabilities",
    "Acceptance": "channel",
    "ChannelType": "channel",
    "PowerState": "channel",
    "Reading": "channel",
    "require": "channel",
    "about_to_send": "channel",
    "Deployment": "config",
    "load_config": "config",
    "parse_config": "config",
    "hookimpl": "hookspecs",
    "InvokeResult": "host",
    "NodeReading": "host",
    "PowerHost": "host",
    "PowerOffConfirmed": "readback",
    "PowerOffWatch": "readback",
    "NodeOffer": "recovery",
    "VerbOffer": "recovery",
    "SecretRef": "secrets",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None and name in __all__:
        module = "errors"
    if module is None:
        raise AttributeError(f"module 'powerplane' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"powerplane.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
