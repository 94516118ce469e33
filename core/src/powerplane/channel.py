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

At most once across a timeout: a channel calls :func:`about_to_send` right before each
state-changing request leaves the process. Once the host has given up on the call
(``limits.timeout_s`` or cancellation), ``about_to_send`` raises instead, so nothing
leaves after the caller was told the call ended. A call that timed out after
``about_to_send`` is reported as :class:`~powerplane.errors.OutcomeUnknown` ("the request
was sent and may have been applied"); one that timed out before it, as
:class:`~powerplane.errors.ChannelTimeout` (nothing left). A channel type that does not
declare ``gated_sends=True`` gets :class:`~powerplane.errors.OutcomeUnknown` for every
timed-out verb, since the host cannot tell whether its request left.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.errors import ChannelTimeout, NotSupported

__all__ = [
    "Acceptance",
    "Channel",
    "ChannelType",
    "HasBootMarker",
    "PowerState",
    "Reading",
    "SendGate",
    "about_to_send",
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


@runtime_checkable
class HasBootMarker(Protocol):
    """Optional: ``boot_marker(target)``, a value that changes on every boot of the machine.

    Redfish ``LastResetTime``, Talos ``boot_time``, a simulated boot counter: the evidence
    that a reboot happened. ``None`` when the device publishes none for this target.
    """

    def boot_marker(self, target: Target) -> Any: ...  # str | None | Awaitable[str | None]


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
    gated_sends: bool = False
    """True when every state-changing request passes :func:`about_to_send` first."""


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


class SendGate:
    """One host call's gate: whether a request has left, and whether the host gave up.

    The host opens one per channel call; :func:`about_to_send` passes it (marking the
    call as sent) unless the host has already closed it, atomically, so a request can
    never leave after the host reported the call as ended.
    """

    __slots__ = ("_closed", "_lock", "sent")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self.sent = False
        """Whether a state-changing request has passed the gate (and so may have left)."""

    def pass_through(self) -> None:
        """Mark a request as leaving now; raise :class:`ChannelTimeout` if the gate is closed."""
        with self._lock:
            if self._closed:
                raise ChannelTimeout(
                    "the host gave up on this call before the request left; it was not sent"
                )
            self.sent = True

    def close(self) -> bool:
        """Close the gate; return whether a request had already passed it."""
        with self._lock:
            self._closed = True
            return self.sent


_GATE: contextvars.ContextVar[SendGate | None] = contextvars.ContextVar(
    "powerplane_send_gate", default=None
)


def about_to_send() -> None:
    """Call right before a state-changing request (a verb) leaves the process.

    Raises :class:`~powerplane.errors.ChannelTimeout` when the host has already given up on
    this call, so the request never leaves. Outside a host call it does nothing.
    """
    gate = _GATE.get()
    if gate is not None:
        gate.pass_through()
