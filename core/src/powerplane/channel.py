"""The protocol a plugin's channel implements, and the channel type it registers.

A channel is one configured power path (a BMC, a Talos endpoint, a set of PDU
outlets, a cloud account). It offers::

    capabilities(target) -> CapabilitySet
    reboot(target)       -> Acceptance | None
    shutdown(target)     -> Acceptance | None
    power_on(target)     -> Acceptance | None
    terminate(target)    -> Acceptance | None      (only channels that advertise terminate)
    read_power_state(target) -> Reading
    close()              -> None

Each may be ``async def`` or plain ``def``; the host runs plain ones in worker
threads. A verb method called for a verb the channel does not advertise must
raise :class:`~powerplane.errors.NotSupported` before doing any I/O
(:func:`require` does that from the channel's own capability set).

Optional: ``endpoint(target) -> str`` names the device a call reaches, so the host
can bound concurrent calls per endpoint (default: one endpoint per channel).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.errors import NotSupported

__all__ = [
    "Acceptance",
    "Channel",
    "ChannelType",
    "PowerState",
    "Reading",
    "maybe_await",
    "require",
]

Target = Any
"""A node as a channel addresses it: whatever the channel type's target parser returns."""


class PowerState(str, Enum):
    """A power reading."""

    ON = "on"
    """The machine is observed powered and running."""
    OFF = "off"
    """Power is observed absent (never reported for a machine the channel cannot see)."""
    UNKNOWN = "unknown"
    """The channel cannot see, the device did not answer, or the state is transitional."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Reading:
    """One readback: a state and, where useful, a detail in words."""

    state: PowerState
    detail: str = ""

    @classmethod
    def on(cls, detail: str = "") -> Reading:
        return cls(PowerState.ON, detail)

    @classmethod
    def off(cls, detail: str = "") -> Reading:
        return cls(PowerState.OFF, detail)

    @classmethod
    def unknown(cls, detail: str) -> Reading:
        return cls(PowerState.UNKNOWN, detail)


@dataclass(frozen=True)
class Acceptance:
    """What a channel says after a verb was accepted by the device.

    ``detail`` carries anything a person should know ("graceful shutdown did not
    finish within 30 s; ForceOff sent").
    """

    detail: str = ""


@runtime_checkable
class Channel(Protocol):
    """What a configured channel offers. Methods may be sync or async."""

    def capabilities(self, target: Target) -> Any: ...  # CapabilitySet | Awaitable[CapabilitySet]

    def reboot(self, target: Target) -> Any: ...

    def shutdown(self, target: Target) -> Any: ...

    def power_on(self, target: Target) -> Any: ...

    def read_power_state(self, target: Target) -> Any: ...  # Reading | Awaitable[Reading]

    def close(self) -> Any: ...


ChannelFactory = Callable[[str, Any], Channel]
"""``factory(channel_name, validated_config) -> Channel``."""


@dataclass(frozen=True)
class ChannelType:
    """What a plugin registers: a name, the pydantic model of its config keys, a factory.

    ``target`` optionally parses and validates a node's raw target value (raise
    ``ValueError`` with a plain message); the default accepts strings and mappings as
    they are. ``config`` must not declare ``type``: the host strips it.
    """

    name: str
    config: type[BaseModel]
    factory: ChannelFactory
    target: Callable[[Any], Any] | None = None
    description: str = ""


def require(caps: CapabilitySet, verb: Verb, channel: str) -> None:
    """Raise :class:`NotSupported` unless ``caps`` advertises ``verb``. Call before any I/O."""
    if not caps.advertises(verb):
        raise NotSupported(channel, verb.value, caps.detail)


async def maybe_await(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``: await it if it is a coroutine function, else run it in a worker thread."""
    import asyncio

    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        return await result
    return result
