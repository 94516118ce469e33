"""The protocol a plugin's channel implements, and the channel type it registers.

A channel is one configured power path (a BMC, a Talos endpoint, a set of PDU
outlets, a cloud account). :class:`Channel` is generic over the target type ``T``
the channel type's target parser returns; every channel offers::

    capabilities(target: T)     -> CapabilitySet
    reboot(target: T)           -> Acceptance | None
    shutdown(target: T)         -> Acceptance | None
    power_on(target: T)         -> Acceptance | None
    read_power_state(target: T) -> Reading
    close()                     -> None

Optional parts, each its own small ``runtime_checkable`` protocol, found one way: with
``isinstance`` once, when the channel is created, into one :class:`ChannelTraits` record
that the host and the conformance suite read:

* :class:`Terminates` -- ``terminate(target) -> Acceptance | None`` (only channels that
  advertise terminate: a cloud instance is destroyed, never restored);
* :class:`BatchInvoker` -- ``invoke_batch(verb, targets) -> Sequence[Acceptance | None |
  PowerplaneError]``, one outcome per target, in order: the host sends a channel's nodes in
  one batch;
* :class:`BatchDiscovery` -- ``capabilities_batch(targets) -> Sequence[CapabilitySet |
  PowerplaneError]``, one outcome per target, in order: the host discovers all of a
  channel's targets on one endpoint in one call (one API call per page, one ``$expand``
  read of a collection, ...) instead of one ``capabilities`` call per target;
* :class:`HasEndpoint` -- ``endpoint(target) -> str`` names the device a call reaches, so
  the host bounds concurrent calls per endpoint (default: one endpoint per channel);
* :class:`Identifies` -- ``identity(target) -> Mapping[str, object]`` (vendor, model,
  firmware) for the conformance report;
* :class:`HasBootMarker` -- ``boot_marker(target) -> str | None``, a value that changes on
  every boot: the evidence that a reboot happened.

Each method may be ``async def`` or plain ``def`` (hence the ``X | Awaitable[X]`` return
types); the host runs plain ones in worker threads (daemon threads of
:mod:`powerplane.workers`: a call the host gave up on never holds the process).
``mypy --strict`` checks a plugin's channel against these protocols where its factory is
passed to :class:`ChannelType`, so type the factory's return as the channel class, never
``Any``. A verb method called for a verb the channel does not advertise must raise
:class:`~powerplane.errors.NotSupported` before doing any I/O (:func:`require` does that
from the channel's own capability set).

A channel type's config model may implement :class:`ChecksLimits` (``check_limits``), a
check against ``limits.timeout_s`` run when the deployment is loaded.

:class:`ChannelType` declares, besides the factory, what core and the conformance suite
would otherwise be told by hand: where the device address lives (:class:`Address`), which
config fields hold secrets (every field typed :class:`~powerplane.secrets.SecretRef`,
found by :meth:`ChannelType.secret_fields`), and the config's
:class:`~powerplane.fields.Timeouts` (:meth:`ChannelType.timeouts_field`).

At most once across a timeout: a channel calls :func:`about_to_send` right before each
state-changing request leaves the process. Once the host has given up on the call
(``limits.timeout_s`` or cancellation), ``about_to_send`` raises instead, so nothing
leaves after the caller was told the call ended. A call that timed out after
``about_to_send`` is reported as :class:`~powerplane.errors.OutcomeUnknown` ("the request
was sent and may have been applied"); one that timed out before it, as
:class:`~powerplane.errors.ChannelTimeout` (nothing left). A channel type that does not
declare ``gated_sends=True`` gets :class:`~powerplane.errors.OutcomeUnknown` for every
timed-out verb, since the host cannot tell whether its request left. A verb call the host
gives up on by cancellation (Ctrl-C) is recorded as a :class:`CutCall` where
:func:`cut_calls` collects, with what its gate knew.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.errors import ChannelTimeout, NotSupported, PowerplaneError
from powerplane.fields import StrictFloat, StrictInt, Timeouts, secret_fields, timeouts_field

__all__ = [
    "Acceptance",
    "Address",
    "AddressFormat",
    "AddressSource",
    "BatchDiscovery",
    "BatchInvoker",
    "Channel",
    "ChannelFactory",
    "ChannelTraits",
    "ChannelType",
    "ChecksLimits",
    "CutCall",
    "HasBootMarker",
    "HasEndpoint",
    "Identifies",
    "Manners",
    "Outcome",
    "PowerState",
    "Reading",
    "SendGate",
    "Terminates",
    "about_to_send",
    "cut_calls",
    "enter_gate",
    "leave_gate",
    "maybe_await",
    "note_cut",
    "require",
    "verb_method",
]

TargetT = TypeVar("TargetT", default=Any)
"""A node as a channel addresses it: whatever the channel type's target parser returns."""
TargetT_contra = TypeVar("TargetT_contra", contravariant=True, default=Any)
"""The target type a channel protocol accepts."""
ConfigT = TypeVar("ConfigT", bound=BaseModel, default=Any)
"""A channel type's pydantic config model."""


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


Outcome = Acceptance | None | PowerplaneError
"""One target's outcome in a batch: accepted (with or without words), or the error."""


@runtime_checkable
class Channel(Protocol[TargetT_contra]):
    """What every configured channel offers. Methods may be sync or async."""

    def capabilities(
        self, target: TargetT_contra
    ) -> CapabilitySet | Awaitable[CapabilitySet]:
        """What this channel can do for ``target``, each verb with its source."""
        ...

    def reboot(self, target: TargetT_contra) -> Acceptance | Awaitable[Acceptance | None] | None:
        """Restart the machine (raise :class:`NotSupported` first if not advertised)."""
        ...

    def shutdown(
        self, target: TargetT_contra
    ) -> Acceptance | Awaitable[Acceptance | None] | None:
        """Power the machine off (graceful or hard, as the capability set says)."""
        ...

    def power_on(
        self, target: TargetT_contra
    ) -> Acceptance | Awaitable[Acceptance | None] | None:
        """Power the machine on."""
        ...

    def read_power_state(self, target: TargetT_contra) -> Reading | Awaitable[Reading]:
        """Read the machine's power state back (never ``off`` for what it cannot see)."""
        ...

    def close(self) -> Awaitable[None] | None:
        """Release connections and sessions; called once when the host stops."""
        ...


@runtime_checkable
class Terminates(Protocol[TargetT_contra]):
    """Optional: ``terminate(target)``, destroy the machine (a cloud instance); never undone.

    Only channels that advertise ``terminate`` implement it; the rule offers it only for
    nodes classified ``replaceable``.
    """

    def terminate(
        self, target: TargetT_contra
    ) -> Acceptance | Awaitable[Acceptance | None] | None:
        """Destroy the machine (raise :class:`NotSupported` first if not advertised)."""
        ...


@runtime_checkable
class BatchInvoker(Protocol[TargetT_contra]):
    """Optional: ``invoke_batch(verb, targets)``, one verb for many targets at once.

    Returns one :data:`Outcome` per target, in the order given; an error for one target is
    that target's outcome, not raised. The host sends all of a channel's nodes of one
    request in one batch (one API call per page, one SET per PDU, ...).
    """

    def invoke_batch(
        self, verb: Verb, targets: Sequence[TargetT_contra]
    ) -> Sequence[Outcome] | Awaitable[Sequence[Outcome]]:
        """Send ``verb`` to every target; one outcome per target, in order."""
        ...


@runtime_checkable
class BatchDiscovery(Protocol[TargetT_contra]):
    """Optional: ``capabilities_batch(targets)``, discovery of many targets in one call.

    Returns one outcome per target, in the order given: the target's
    :class:`~powerplane.capabilities.CapabilitySet`, or the error that prevented one (an
    error for one target is that target's outcome, not raised; an error raised is every
    target's). Each target must be judged from what the device says about that target
    alone, exactly as ``capabilities(target)`` would. The host calls it once per channel
    and endpoint with every target it is about to discover there (two or more; one target
    goes to ``capabilities``), as one channel call: bounded by the endpoint's and the total
    limit and by ``limits.timeout_s`` like any other.
    """

    def capabilities_batch(
        self, targets: Sequence[TargetT_contra]
    ) -> (Sequence[CapabilitySet | PowerplaneError]
          | Awaitable[Sequence[CapabilitySet | PowerplaneError]]):
        """``capabilities`` of every target; one outcome per target, in order."""
        ...


@runtime_checkable
class HasEndpoint(Protocol[TargetT_contra]):
    """Optional: ``endpoint(target)``, the device a call for ``target`` reaches.

    The host bounds concurrent calls per endpoint (``limits.per_endpoint``); without it
    a channel is one endpoint. Plain ``def``, no I/O: it is called for every call.
    """

    def endpoint(self, target: TargetT_contra) -> str:
        """A name of the device (``https://10.0.0.5``, ``pdu-a:161``)."""
        ...


@runtime_checkable
class Identifies(Protocol[TargetT_contra]):
    """Optional: ``identity(target)``, what the device says it is (vendor, model, firmware).

    Read by the conformance suite for its report; never needed to control power.
    """

    def identity(
        self, target: TargetT_contra
    ) -> Mapping[str, object] | Awaitable[Mapping[str, object]]:
        """The device's own words about itself, as a flat mapping."""
        ...


@runtime_checkable
class HasBootMarker(Protocol[TargetT_contra]):
    """Optional: ``boot_marker(target)``, a value that changes on every boot of the machine.

    Redfish ``LastResetTime``, Talos ``boot_time``, a simulated boot counter: the evidence
    that a reboot happened. ``None`` when the device publishes none for this target.
    """

    def boot_marker(self, target: TargetT_contra) -> str | Awaitable[str | None] | None:
        """This boot's marker, or ``None`` when the device publishes none."""
        ...


@runtime_checkable
class ChecksLimits(Protocol):
    """Optional, on a channel type's config model: a check of the config against the
    deployment's ``limits.timeout_s``, run when the config is loaded.

    Returns one ``(field, message)`` per problem (``field`` a dotted path inside the
    channel's config, ``""`` for the channel itself); each becomes a line-numbered problem
    at ``channels.<name>.<field>`` (e.g. a graceful-then-force wait that leaves no room for
    the force within one call's timeout). An exception it raises is reported as a problem
    of the channel, never a crash.
    """

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        """The problems of this config under ``limits.timeout_s``; ``[]`` when none."""
        ...


def verb_method(
    channel: Channel[TargetT], verb: Verb
) -> Callable[[TargetT], Acceptance | Awaitable[Acceptance | None] | None] | None:
    """The channel method that carries ``verb``; ``None`` when the channel has none.

    Only ``terminate`` is optional (:class:`Terminates`); the other verbs are part of
    :class:`Channel`.
    """
    if verb is Verb.TERMINATE:
        return channel.terminate if isinstance(channel, Terminates) else None
    if verb is Verb.REBOOT:
        return channel.reboot
    if verb is Verb.SHUTDOWN:
        return channel.shutdown
    return channel.power_on


@dataclass(frozen=True, slots=True)
class ChannelTraits:
    """Which optional parts a channel object has, found once, when the channel is created.

    The one way optional parts are found: ``isinstance`` against each part's protocol
    (:class:`HasEndpoint`, :class:`BatchInvoker`, :class:`BatchDiscovery`,
    :class:`Terminates`, :class:`HasBootMarker`, :class:`Identifies`), asked once per
    channel (a ``runtime_checkable`` check walks the protocol each time it is asked), then
    read from this record by the host and the conformance suite.
    """

    endpoint: Callable[[Any], str] | None
    """The channel's ``endpoint`` method (:class:`HasEndpoint`), or None: one endpoint."""
    batch_invoke: bool
    """:class:`BatchInvoker`: the host sends a channel's nodes of one request in one batch."""
    batch_discovery: bool
    """:class:`BatchDiscovery`: the host discovers an endpoint's targets in one call."""
    terminates: bool
    """:class:`Terminates`."""
    boot_marker: bool
    """:class:`HasBootMarker`."""
    identifies: bool
    """:class:`Identifies`."""

    @classmethod
    def of(cls, channel: object) -> ChannelTraits:
        """The optional parts ``channel`` has."""
        return cls(
            channel.endpoint if isinstance(channel, HasEndpoint) else None,
            isinstance(channel, BatchInvoker),
            isinstance(channel, BatchDiscovery),
            isinstance(channel, Terminates),
            isinstance(channel, HasBootMarker),
            isinstance(channel, Identifies),
        )


ChannelFactory = Callable[[str, ConfigT], Channel[TargetT]]
"""``factory(channel_name, validated_config) -> Channel[T]`` (a class or a function)."""

AddressSource = Literal["config", "target"]
"""Where the device address lives: a key of the channel's config, or each node's target."""
AddressFormat = Literal["url", "host", "host:port"]
AddressTransport = Literal["tcp", "udp"]
"""How it is written: ``https://h:p``, ``h`` (with the port in a key of its own, if any),
``h:p``."""


@dataclass(frozen=True)
class Address:
    """Where a channel type's device address lives, and how it is written.

    ``Address("endpoint")``: the config key ``endpoint`` holds a URL.
    ``Address("host", format="host", port_field="port")``: ``host`` and ``port`` keys.
    ``Address(None, source="target", format="host:port")``: each node's target is the
    device's ``host:port`` (one channel holds a fleet's credentials, as for IPMI);
    ``Address("host", source="target", format="host")``: a mapping target's ``host`` key.

    Core and the conformance suite read it instead of being told by hand: the suite's
    network negatives point a channel at a closed port or a silent server with
    :meth:`config_overrides` / :meth:`retarget`. Fields are top-level keys.
    """

    field: str | None
    """The key holding the address (a config key, or a key of a mapping target);
    ``None`` only with ``source="target"``: the whole target is the address."""
    source: AddressSource = "config"
    """``config``: a key of the channel's config; ``target``: each node's target."""
    format: AddressFormat = "url"
    """``url`` (``scheme://host:port[/...]``), ``host``, or ``host:port``."""
    port_field: str | None = None
    """With ``format="host"``: the key that holds the port, when there is one."""
    scheme: str = "https"
    """With ``format="url"``: the scheme :meth:`render` writes."""
    transport: AddressTransport = "tcp"
    """What the device is reached over: ``udp`` for IPMI and SNMP, so the conformance
    suite's closed-port and silent-server fakes speak it."""

    def __post_init__(self) -> None:
        if self.source not in ("config", "target"):
            raise ValueError(f"Address.source must be 'config' or 'target', not {self.source!r}")
        if self.format not in ("url", "host", "host:port"):
            raise ValueError("Address.format must be 'url', 'host' or 'host:port', "
                             f"not {self.format!r}")
        if self.source == "config" and not self.field:
            raise ValueError("Address(source='config') needs the config key (field)")
        if self.port_field is not None and self.format != "host":
            raise ValueError("Address.port_field goes with format='host' only")
        if self.transport not in ("tcp", "udp"):
            raise ValueError(f"Address.transport must be 'tcp' or 'udp', not {self.transport!r}")
        if self.port_field is not None and self.field is None:
            raise ValueError("Address.port_field needs a field for the host")

    def render(self, host: str, port: int) -> str:
        """``host``/``port`` written in this format (the port left out for ``host``)."""
        name = f"[{host}]" if ":" in host and not host.startswith("[") else host
        if self.format == "url":
            return f"{self.scheme}://{name}:{port}"
        if self.format == "host:port":
            return f"{name}:{port}"
        return host

    def _keys(self, host: str, port: int) -> dict[str, Any]:
        assert self.field is not None
        out: dict[str, Any] = {self.field: self.render(host, port)}
        if self.port_field is not None:
            out[self.port_field] = port
        return out

    def config_overrides(self, host: str, port: int) -> dict[str, Any]:
        """The config keys that point the channel at ``host:port`` (``source="config"``)."""
        if self.source != "config":
            raise ValueError("the address lives in the node's target: use retarget()")
        return self._keys(host, port)

    def retarget(self, target: Any, host: str, port: int) -> Any:
        """A raw node target like ``target`` that points at ``host:port`` (``source="target"``)."""
        if self.source != "target":
            raise ValueError("the address lives in the channel's config: use config_overrides()")
        if self.field is None:
            return self.render(host, port)
        if not isinstance(target, Mapping):
            raise ValueError(f"the target must be a mapping with key {self.field!r}")
        return {**target, **self._keys(host, port)}

    def read(self, config: BaseModel | Mapping[str, Any], target: Any = None) -> str | None:
        """The address as configured (``host:port`` joined for ``port_field``), or ``None``."""
        holder: Any = config if self.source == "config" else target
        if self.field is None:
            return holder if isinstance(holder, str) and holder else None

        def get(key: str) -> Any:
            if isinstance(holder, Mapping):
                return holder.get(key)
            return getattr(holder, key, None)

        value = get(self.field)
        if value is None or value == "":
            return None
        if self.port_field is not None and get(self.port_field) is not None:
            return f"{value}:{get(self.port_field)}"
        return str(value)


class Manners(BaseModel):
    """How the host treats one device (a BMC, a PDU) of a channel: what it can live with.

    A channel type declares its defaults (:attr:`ChannelType.manners`); a channel's
    ``manners:`` key in the config overrides them key by key (validated by this model;
    the host strips it before the plugin's config model sees the channel). The host
    enforces them on the one call path (:mod:`powerplane.host.calls`):

    - ``per_endpoint``: concurrent calls to one endpoint of the channel (the lower of
      this and ``limits.per_endpoint``; None: ``limits.per_endpoint`` alone);
    - ``sessions``: the sessions the device allows one client; every call holds at most
      one, so concurrent calls to one endpoint are bounded by it too (None: no cap);
    - ``min_interval_s``: the least time between the end of one power command to an
      endpoint and the start of the next (0: none); a command waits for it before its
      deadline starts, and a command cancelled while it waits was not sent;
    - ``lockout_s``: how long an authentication failure of an endpoint is remembered in
      this process (per channel, endpoint and config, credentials references included):
      meanwhile every call to it fails at once with that first error, nothing logs in.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_endpoint: StrictInt | None = Field(None, ge=1, le=10_000)
    """Concurrent calls to one endpoint: 1 to 10,000 (None: ``limits.per_endpoint``)."""
    sessions: StrictInt | None = Field(None, ge=1, le=10_000)
    """Sessions the device allows: 1 to 10,000 (None: no cap)."""
    min_interval_s: StrictFloat = Field(0.0, ge=0, le=3_600, allow_inf_nan=False)
    """Seconds between power commands to one endpoint: 0 to 3,600."""
    lockout_s: StrictFloat = Field(600.0, ge=0, le=604_800, allow_inf_nan=False)
    """Seconds an authentication failure is remembered: 0 (not at all) to a week."""

    def concurrency(self, per_endpoint: int) -> int:
        """Concurrent calls to one endpoint under ``limits.per_endpoint``."""
        return min(per_endpoint, self.per_endpoint or per_endpoint,
                   self.sessions or per_endpoint)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (``offers -o json``'s ``"manners"`` of a channel)."""
        return {"per_endpoint": self.per_endpoint, "sessions": self.sessions,
                "min_interval_s": self.min_interval_s, "lockout_s": self.lockout_s}


NO_MANNERS = Manners()
"""The defaults of a channel type that declares none: no pacing, no cap, 600 s lock-out."""


@dataclass(frozen=True)
class ChannelType(Generic[ConfigT, TargetT]):
    """What a plugin registers: a name, the pydantic model of its config keys, a factory.

    ``ChannelType[ConfigT, TargetT]``: ``factory(name, config: ConfigT) -> Channel[TargetT]``;
    ``target`` optionally parses and validates a node's raw target value into a
    ``TargetT`` (raise ``ValueError`` with a plain message); the default accepts strings
    and mappings as they are. ``config`` must not declare ``type``: the host strips it.

    It also declares what core and the conformance suite need to know without being told:
    ``address`` (where the device address lives), the secret fields (every field typed
    :class:`~powerplane.secrets.SecretRef`, see :meth:`secret_fields`), and the config's
    :class:`~powerplane.fields.Timeouts` field (:meth:`timeouts_field`).
    """

    name: str
    config: type[ConfigT]
    factory: Callable[[str, ConfigT], Channel[TargetT]]
    target: Callable[[Any], TargetT] | None = None
    description: str = ""
    gated_sends: bool = False
    """True when every state-changing request passes :func:`about_to_send` first."""
    address: Address | Callable[[ConfigT], Address | None] | None = None
    """Where the device address lives: one :class:`Address`, or a function of the validated
    config when it depends on it (a PDU reached over SNMP ``host``/``port`` or a Redfish
    ``endpoint``); ``None``: the channel has no network address (in-memory)."""
    manners: Manners = NO_MANNERS
    """The defaults of :class:`Manners` for this type's devices (a channel's ``manners:``
    key overrides them)."""
    unknown_target: Callable[[TargetT], Any] | None = None
    """For the conformance suite's unknown-target and secret-leak checks: given a node's
    target (as :attr:`target` parsed it), a well-formed target of the same device that the
    device does not have, written as a node's raw target (``target`` parses it again).
    ``None``: the suite appends a suffix to a string target (a target of any other kind
    needs ``conformance.negative.<channel>.unknown_target``)."""

    def address_for(self, config: ConfigT) -> Address | None:
        """The :class:`Address` of a channel with this validated ``config``."""
        if self.address is None or isinstance(self.address, Address):
            return self.address
        return self.address(config)

    def secret_fields(self) -> tuple[str, ...]:
        """Dotted paths of every config field typed ``SecretRef`` (``auth.password``).

        ``*`` stands for any key of a mapping or any item of a list (``feeds.*.community``).
        """
        return secret_fields(self.config)

    def timeouts_field(self) -> str | None:
        """The top-level config field typed :class:`~powerplane.fields.Timeouts`, if any."""
        return timeouts_field(self.config)

    def timeouts_of(self, config: ConfigT) -> Timeouts | None:
        """The :class:`~powerplane.fields.Timeouts` of a validated ``config``, if it has them."""
        key = self.timeouts_field()
        value = getattr(config, key, None) if key is not None else None
        return value if isinstance(value, Timeouts) else None


def require(caps: CapabilitySet, verb: Verb, channel: str) -> None:
    """Raise :class:`NotSupported` unless ``caps`` advertises ``verb``. Call before any I/O."""
    if not caps.advertises(verb):
        raise NotSupported(channel, verb.value, caps.detail)


async def maybe_await(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``: await it if it is a coroutine function, else run it in a worker thread.

    The thread is one of :func:`powerplane.workers.shared_pool`'s daemon threads, so a call
    still blocked in a plugin's library never holds the process at exit.
    """
    from powerplane.workers import call

    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await call(fn, *args)
    if inspect.isawaitable(result):
        return await result
    return result


class SendGate:
    """One host call's gate: whether a request has left, and whether the host gave up.

    The host opens one per channel call; :func:`about_to_send` passes it (marking the
    call as sent) unless the host has already closed it, atomically, so a request can
    never leave after the host reported the call as ended.

    A gate is a context manager, the one way to put it in force: inside ``with gate:``
    (and in every task and worker thread started with a copy of that context)
    :func:`about_to_send` passes this gate. The host enters a fresh gate for every
    channel call; a plugin's tests do the same (or use
    :func:`powerplane.testing.send_gate`) and close the gate to act as the host giving up::

        with SendGate() as gate:
            await channel.reboot(target)
        assert gate.sent
    """

    __slots__ = ("_closed", "_token", "sent")

    def __init__(self) -> None:
        self._closed = False
        self._token: contextvars.Token[SendGate | None] | None = None
        self.sent = False
        """Whether a state-changing request has passed the gate (and so may have left)."""

    def __enter__(self) -> SendGate:
        """Put this gate in force for the calls made in this context."""
        self._token = _GATE.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        token, self._token = self._token, None
        if token is not None:
            _GATE.reset(token)

    def pass_through(self) -> None:
        """Mark a request as leaving now; raise :class:`ChannelTimeout` if the gate is closed."""
        with _GATE_LOCK:
            if self._closed:
                raise ChannelTimeout(
                    "the host gave up on this call before the request left; it was not sent"
                )
            self.sent = True

    def close(self) -> bool:
        """Close the gate; return whether a request had already passed it."""
        with _GATE_LOCK:
            self._closed = True
            return self.sent


_GATE_LOCK = threading.Lock()
"""Makes each gate's pass and close atomic (one lock for every gate: each holds it for two
assignments, so a lock object per call would cost more than the sharing does)."""

_GATE: contextvars.ContextVar[SendGate | None] = contextvars.ContextVar(
    "powerplane_send_gate", default=None
)

enter_gate: Callable[[SendGate], contextvars.Token[SendGate | None]] = _GATE.set
"""``with gate:`` as two calls, for the host's call path (no Python frame per call): put
``gate`` in force in the current context; returns the token :data:`leave_gate` takes."""
leave_gate: Callable[[contextvars.Token[SendGate | None]], None] = _GATE.reset
"""End what :data:`enter_gate` started (the token it returned)."""


@dataclass(frozen=True, slots=True)
class CutCall:
    """A state-changing call a host gave up on by cancellation (Ctrl-C, SIGTERM, a task
    cancelled) before the channel answered: what its send gate knew."""

    channel: str
    method: str
    """The channel method (``reboot``, ``shutdown``, ``power_on``, ``terminate``,
    ``invoke_batch``)."""
    target: Any
    nodes: tuple[str, ...]
    """The nodes the call was for, where the host knew them."""
    sent: bool | None
    """True: the request had passed the gate and may have been applied (outcome unknown);
    False: it had not, and never will; None: the channel type does not gate its sends
    (``gated_sends``), so it may have left."""

    def words(self) -> str:
        """One line for a person: which call, and whether it may have left."""
        verb = self.method.replace("_", "-")
        who = ", ".join(self.nodes) if self.nodes else repr(self.target)
        if self.sent is False:
            how = "not sent (it never will be)"
        elif self.sent:
            how = "may have been sent: its outcome is unknown"
        else:
            how = ("may have been sent: its outcome is unknown (the channel type does not "
                   "say when its requests leave)")
        return f"{verb} {who} via {self.channel}: {how}"


_CUT: contextvars.ContextVar[list[CutCall] | None] = contextvars.ContextVar(
    "powerplane_cut_calls", default=None
)


@contextlib.contextmanager
def cut_calls() -> Iterator[list[CutCall]]:
    """Collect every state-changing call a host gives up on by cancellation, in this
    context and every task started from it (the CLI says which calls may have left when
    it is interrupted). Outside it nothing is collected."""
    found: list[CutCall] = []
    token = _CUT.set(found)
    try:
        yield found
    finally:
        _CUT.reset(token)


def note_cut(call: CutCall) -> None:
    """Record ``call`` where :func:`cut_calls` collects (nothing outside it)."""
    found = _CUT.get()
    if found is not None:
        found.append(call)


def about_to_send() -> None:
    """Call right before a state-changing request (a verb) leaves the process.

    Raises :class:`~powerplane.errors.ChannelTimeout` when the host has already given up on
    this call, so the request never leaves. Outside a host call it does nothing.
    """
    gate = _GATE.get()
    if gate is not None:
        gate.pass_through()
