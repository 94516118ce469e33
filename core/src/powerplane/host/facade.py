"""``PowerHost``: the asyncio-native host that discovers, offers, invokes and reads back.

::

    async with PowerHost.from_config("powerplane.yaml") as host:   # discovers capabilities
        offer = host.offer_for("node-1")
        result = await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")

    async with PowerHost.from_config("powerplane.yaml", nodes=["node-1"]) as host:
        ...   # creates and discovers only what node-1 uses; the rest on first use

Every channel call is bounded per endpoint (``limits.per_endpoint``) and in total
(``limits.total``), and times out after ``limits.timeout_s``. Discovery and fleet calls
run a bounded pool of workers (:mod:`powerplane.scheduling`), never a task per node; a
channel with ``capabilities_batch`` discovers its targets on one endpoint in one call.
A verb is sent at most once per request: the host never retries a verb. Any exception a
plugin lets escape unmapped becomes a :class:`~powerplane.errors.ProtocolError` naming its type.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import json
import logging
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import (
    _GATE,
    Acceptance,
    Channel,
    CutCall,
    HasBootMarker,
    PowerState,
    Reading,
    SendGate,
    note_cut,
)
from powerplane.config import (
    ConfiguredChannel,
    Deployment,
    NodeSpec,
    channel_secret_problems,
    load_config,
)
from powerplane.errors import (
    ChannelError,
    ChannelTimeout,
    ConfigError,
    NotOffered,
    OutcomeUnknown,
    PowerplaneError,
    ProtocolError,
    UnknownNode,
)
from powerplane.plugins import Registry
from powerplane.readback import PowerOffWatch
from powerplane.recovery import ChannelView, NodeOffer, VerbOffer, decide
from powerplane.scheduling import (
    Limiter,
    SharedDeadlines,
    acquire_both,
    drain,
    quiet_gc,
    run_workers,
    slots_of,
    try_both,
)
from powerplane.workers import call as in_worker

__all__ = ["ChannelReading", "InvokeGuard", "InvokeResult", "NodeReading", "Plan", "PowerHost"]

log = logging.getLogger("powerplane.host")

VERB_METHODS = frozenset({"reboot", "shutdown", "power_on", "terminate", "invoke_batch"})
"""The channel methods that change a machine's state (their timeouts may be unknown outcomes)."""

GUARDED = frozenset({Verb.REBOOT, Verb.SHUTDOWN, Verb.TERMINATE})

CLOSE_GRACE_S = 0.5
"""How long :meth:`PowerHost.close` waits for a channel's close once the host gave up on one
of its calls, or was itself cancelled (an interrupt): the rest is left to its thread."""
STUCK_CLOSE_S = 0.1
"""The same after an interrupt for a channel with a call the host gave up on (a close of a
channel whose library is stuck in a call usually waits for that call)."""

DISCOVERY_WORKERS = 2048
"""At most this many discovery calls at once, within ``limits.total`` (each call in flight
holds its stack until it answers: 20,000 at once for a 50,000-node start held 60 MiB)."""
"""The verbs an :class:`InvokeGuard` is asked about (they take a node out of service)."""


class InvokeGuard(Protocol):
    """A check every direct ``invoke`` of reboot, shutdown and terminate passes (the lifecycle's).

    Called once per request with every node of it (nodes of one request count together,
    as a rolling reboot would); returns, per node, ``None`` when allowed or the error to
    raise (a refusal, exit 3; a reason the policy rejects, exit 2; a hazard, the last of
    the quorum margin, without an acceptable ``hazard_reason``, exit 2).
    """

    async def __call__(
        self, nodes: Sequence[str], verb: Verb, reason: str, *,
        hazard_reason: str | None = None,
    ) -> Mapping[str, PowerplaneError | None]: ...


@dataclass(frozen=True, slots=True)
class InvokeResult:
    """The outcome of one verb on one node."""

    node: str
    verb: Verb
    channel: str
    accepted: bool
    readback: PowerState | None = None
    detail: str = ""

    @property
    def expected(self) -> PowerState:
        """The state the verb leads to."""
        return _expected(self.verb)

    @property
    def reached(self) -> bool | None:
        """Whether the readback saw the expected state (None: not read back)."""
        return None if self.readback is None else self.readback is self.expected

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane invoke -o json``."""
        out = {
            "node": self.node,
            "verb": self.verb.value,
            "channel": self.channel,
            "accepted": self.accepted,
            "readback": self.readback.value if self.readback is not None else None,
            "detail": self.detail,
        }
        if self.readback is not None:
            out["expected"] = self.expected.value
            out["reached"] = self.reached
        return out


def _expected(verb: Verb) -> PowerState:
    return PowerState.OFF if verb in (Verb.SHUTDOWN, Verb.TERMINATE) else PowerState.ON


@dataclass(frozen=True, slots=True)
class Plan:
    """What ``invoke`` would send for one node, after the rule and the guard: nothing sent."""

    node: str
    verb: Verb
    channel: str
    target: Any
    graceful: bool | None
    guard: str
    """What the guard said ("allowed by the lifecycle guard", or that none is configured)."""
    recovery: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane invoke --dry-run -o json``, per node."""
        return {
            "node": self.node,
            "verb": self.verb.value,
            "channel": self.channel,
            "target": self.target,
            "graceful": self.graceful,
            "recovery": self.recovery,
            "guard": self.guard,
            "sent": False,
        }


@dataclass(frozen=True)
class ChannelReading:
    """One channel's readback of a node: a state, or the error that prevented one."""

    channel: str
    state: PowerState
    detail: str = ""
    error: str | None = None
    """The error class when the channel failed (no reading was taken)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "channel": self.channel, "state": self.state.value, "detail": self.detail,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class NodeReading:
    """A node's power state as read back through its channels.

    ``state`` is the first believable ``on``/``off`` in the node's preference order;
    ``readings`` holds what every channel read (or the first that answered, when the
    host was asked for one reading only).
    """

    node: str
    state: PowerState
    channel: str | None
    detail: str = ""
    readings: tuple[ChannelReading, ...] = field(default=())

    @property
    def observed(self) -> bool:
        """Whether any channel produced a reading (a blind channel's declared unknown counts)."""
        return any(r.error is None for r in self.readings)

    @property
    def disagreement(self) -> bool:
        """Whether believable channels read different states (one on, another off)."""
        seen = {r.state for r in self.readings
                if r.error is None and r.state is not PowerState.UNKNOWN}
        return len(seen) > 1

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane state -o json``."""
        return {
            "node": self.node,
            "state": self.state.value,
            "channel": self.channel,
            "detail": self.detail,
            "readings": [r.as_dict() for r in self.readings],
            "disagreement": self.disagreement,
        }


@dataclass(frozen=True, slots=True)
class _Traits:
    """What a channel object offers beside :class:`Channel`, looked up once at creation
    (a ``runtime_checkable`` isinstance walks the protocol each time it is asked)."""

    endpoint: Callable[[Any], Any] | None
    batch_invoke: bool
    batch_discovery: bool

    @classmethod
    def of(cls, channel: Channel) -> _Traits:
        endpoint = getattr(channel, "endpoint", None)
        return cls(
            endpoint if callable(endpoint) else None,
            callable(getattr(channel, "invoke_batch", None)),
            callable(getattr(channel, "capabilities_batch", None)),
        )


def _target_key(target: Any) -> Any:
    try:
        hash(target)
        return target
    except TypeError:
        return json.dumps(target, sort_keys=True, default=str)


class PowerHost:
    """Discovers channels' capabilities, offers verbs under the rule, invokes them.

    ``nodes``: start for these nodes only (see :meth:`start`); None, every node.
    """

    def __init__(
        self,
        deployment: Deployment,
        *,
        guard: InvokeGuard | None = None,
        nodes: Iterable[str] | None = None,
    ) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self.guard = guard
        """Asked before every reboot, shutdown and terminate (the lifecycle's guard)."""
        self._channels: dict[str, Channel] = {}
        self._broken: dict[str, PowerplaneError] = {}
        """Channel name -> why it could not be created (the factory's own error)."""
        self._caps: dict[tuple[str, Any], CapabilitySet | str] = {}
        self._errors: dict[tuple[str, Any], PowerplaneError] = {}
        self._offers: dict[str, NodeOffer] = {}
        self._memo: dict[Any, dict[Verb, VerbOffer]] = {}
        self._rules: dict[str, dict[Verb, VerbOffer]] = {}
        """Per node, the rule's verdict on what discovery holds now (emptied whenever
        discovery records anything, so it is never older than the capabilities)."""
        self._complete = False
        """Whether every (channel, target) of the deployment has been discovered once."""
        self._traits: dict[str, _Traits] = {}
        self._ep_sems: dict[Any, Limiter] = {}
        self._total: Limiter | None = None
        self._gave_up: set[str] = set()
        """Channels with a plain-def call the host gave up on (its thread may still run):
        closed with :data:`CLOSE_GRACE_S`, not ``limits.timeout_s``."""
        self._async_methods: dict[tuple[str, str], bool] = {}
        self._discovering: dict[tuple[str, Any], asyncio.Future[None]] = {}
        self._scope = None if nodes is None else tuple(nodes)
        """What ``async with`` starts for: None every node, else only these (see start)."""
        self._started = False

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        registry: Registry | None = None,
        *,
        guard: InvokeGuard | None = None,
        nodes: Iterable[str] | None = None,
    ) -> PowerHost:
        """A host for the deployment file at ``path`` (as ``find_config`` finds it)."""
        return cls(load_config(path, registry=registry), guard=guard, nodes=nodes)

    async def __aenter__(self) -> PowerHost:
        await self.start(self._scope)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, nodes: Iterable[str] | None = None) -> None:
        """Create the channels and discover capabilities (what ``async with`` does).

        ``nodes`` None (the default): every channel is created and every (channel, target)
        discovered, concurrently. A list of nodes: only the channels and targets those
        nodes use (none for an empty list); every other channel is created, and every
        other (channel, target) discovered, on first use (:meth:`discover`, :meth:`plan`,
        :meth:`invoke`, :meth:`read_power_state`, ...), so a channel no call touches is
        never created and its library never imported. Raises ``UnknownNode`` for a name
        the deployment does not have.
        """
        if not self._started:
            self._total = Limiter(self.limits.total)
            self._started = True
            if nodes is None:
                for name, configured in self.deployment.channels.items():
                    if name not in self._channels and name not in self._broken:
                        self._create(name, configured)
                await self.refresh()
                return
        if nodes is not None:
            await self.discover(nodes)

    def _channel_for(self, name: str) -> Channel | None:
        """Channel ``name``, created on first use (None: it could not be, or no such)."""
        channel = self._channels.get(name)
        if channel is None and name not in self._broken:
            configured = self.deployment.channels.get(name)
            if configured is not None:
                self._create(name, configured)
                channel = self._channels.get(name)
        return channel

    def _create(self, name: str, configured: ConfiguredChannel) -> None:
        missing = channel_secret_problems(configured)  # its secrets, when it opens
        if missing:
            self._broken[name] = ConfigError(missing, source=self.deployment.source)
            return
        try:
            channel = configured.type.factory(name, configured.config)
            self._traits[name] = _Traits.of(channel)
            self._channels[name] = channel
        except PowerplaneError as exc:
            self._broken[name] = exc.with_traceback(None)
        except Exception as exc:  # a plugin bug must not take the host down
            self._broken[name] = ChannelError(
                f"channel could not be created: {type(exc).__name__}")
            log.warning("channel %s: factory raised %s", name, type(exc).__name__)

    def _unopened(self, name: str) -> PowerplaneError:
        """Why channel ``name`` cannot be called: a config error its factory raised
        (e.g. a secret that holds no PEM) as it was raised, so it stays bad input (exit 2);
        any other failure to create it, or no such channel, a :class:`ChannelError`."""
        err = self._broken.get(name)
        if isinstance(err, ConfigError):
            return err.with_traceback(None)  # raised again: no traceback piles up on it
        return ChannelError(str(err) if err is not None else "no such channel", channel=name)

    async def close(self) -> None:
        """Close every channel (each plugin logs out its sessions), concurrently.

        Each close is bounded: by ``limits.timeout_s``, or by :data:`CLOSE_GRACE_S` for a
        channel with a call the host gave up on and when the host closes because its task
        was cancelled (Ctrl-C), :data:`STUCK_CLOSE_S` when both: a close that does not finish
        is left to its worker thread.
        """
        task = asyncio.current_task()
        cancelled = task is not None and task.cancelling() > 0
        channels = list(self._channels.items())
        self._channels.clear()

        async def one(name: str, channel: Channel) -> None:
            stuck = name in self._gave_up
            bound = (STUCK_CLOSE_S if cancelled and stuck else
                     CLOSE_GRACE_S if cancelled or stuck else self.limits.timeout_s)
            bound = min(bound, self.limits.timeout_s)
            try:
                async with asyncio.timeout(bound):
                    await self._run(channel.close)
            except TimeoutError:
                # after an interrupt this is expected, not news
                log.log(logging.INFO if cancelled else logging.WARNING,
                        "channel %s: close did not finish within %g s; left to its worker "
                        "thread", name, bound)
            except Exception as exc:
                log.warning("channel %s: close failed: %s", name, type(exc).__name__)

        if channels:
            await asyncio.gather(*(one(name, channel) for name, channel in channels))
        self._gave_up.clear()
        self._started = False

    # -- discovery ---------------------------------------------------------------------------
    async def refresh(self, nodes: Iterable[str] | None = None) -> None:
        """Discover every (channel, target) capability set again, concurrently.

        ``nodes``: only the channels and targets those nodes use (creating each channel
        on first use); None: every node's. A channel with ``capabilities_batch``
        (:class:`~powerplane.channel.BatchDiscovery`) is asked once per endpoint for all
        of its targets there; any other is asked per target, by at most
        ``limits.per_endpoint`` workers per endpoint and ``limits.total`` in all.
        """
        await self._discover_pairs(self._pairs(nodes), again=True)
        if nodes is None:
            self._complete = True
            self._memo.clear()
            self._rules.clear()
            self._offers.clear()  # each decided when first asked for (offer_for)

    async def discover(self, nodes: Iterable[str] | None = None) -> None:
        """Discover what ``nodes`` use (every node: None) and is not discovered yet.

        Concurrent; each channel is created on first use, and a (channel, target) being
        discovered by another call is awaited, never asked twice. Raises ``UnknownNode``
        for a name the deployment does not have.
        """
        await self._discover_pairs(self._pairs(nodes), again=False)
        if nodes is None:
            self._complete = True

    def _pairs(self, nodes: Iterable[str] | None) -> dict[tuple[str, Any], Any]:
        """(channel, target key) -> target of every channel reference of ``nodes``."""
        specs = (self.deployment.nodes.values() if nodes is None
                 else [self._spec(n) for n in dict.fromkeys(nodes)])
        pairs: dict[tuple[str, Any], Any] = {}
        for spec in specs:
            for ref in spec.channels:
                pairs.setdefault((ref.channel, _target_key(ref.target)), ref.target)
        return pairs

    async def _ensure(self, nodes: Iterable[str]) -> None:
        """Discover, on first use, what the known nodes among ``nodes`` use."""
        if self._complete:
            return
        known = self.deployment.nodes
        wanted = [n for n in dict.fromkeys(nodes) if n in known]
        if any((ref.channel, _target_key(ref.target)) not in self._caps
               for n in wanted for ref in known[n].channels):
            await self.discover(wanted)

    async def _discover_pairs(
        self, pairs: Mapping[tuple[str, Any], Any], *, again: bool
    ) -> None:
        """Discover ``pairs`` concurrently (``again``: those already discovered too)."""
        mine: dict[tuple[str, Any], Any] = {}
        running: set[asyncio.Future[None]] = set()
        discovering = self._discovering
        for key, target in pairs.items():
            busy = discovering.get(key)
            if busy is not None:
                running.add(busy)
            elif again or key not in self._caps:
                mine[key] = target
        if mine:
            # one future for the whole call, under each of its keys (a future per key was
            # a tenth of a 100,000-node start)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            discovering.update(dict.fromkeys(mine, done))
            try:
                with quiet_gc():
                    await self._discover_all(mine)
            finally:
                for key in mine:
                    if discovering.get(key) is done:
                        del discovering[key]
                done.set_result(None)
            self._offers.clear()  # offer_for decides again from what is known now
        if running:
            # shielded: a caller cancelled while waiting does not cancel the discovery
            await asyncio.gather(*(asyncio.shield(f) for f in running))

    async def _discover_all(self, mine: Mapping[tuple[str, Any], Any]) -> None:
        """Discover ``mine``: per endpoint, one batch call where the channel has
        ``capabilities_batch`` and two or more targets there, else one call per target;
        run by :func:`~powerplane.scheduling.drain`'s bounded workers under one shared
        deadline timer."""
        groups: dict[tuple[str, Any], list[tuple[tuple[str, Any], Any]]] = {}
        errors = self._errors
        opened: dict[str, bool] = {}  # per channel name, looked up once for the call
        for key, target in mine.items():
            name = key[0]
            if errors:
                errors.pop(key, None)
            ok = opened.get(name)
            if ok is None:
                ok = opened[name] = self._channel_for(name) is not None
            if not ok:
                self._record(key, self._unopened(name))
                continue
            groups.setdefault((name, self._endpoint(name, target)), []).append((key, target))
        queues: dict[Any, deque[list[tuple[tuple[str, Any], Any]]]] = {}
        for (name, endpoint), items in groups.items():
            queue = queues.setdefault(endpoint, deque())
            if len(items) > 1 and self._traits[name].batch_discovery:
                queue.append(items)
            else:
                queue.extend([item] for item in items)
        if not queues:
            return
        deadlines = SharedDeadlines(self.limits.timeout_s)

        async def work(endpoint: Any, job: list[tuple[tuple[str, Any], Any]]) -> None:
            if len(job) == 1:
                await self._discover_one(*job[0], deadlines)
            else:
                await self._discover_batch(job, deadlines)

        try:
            await drain(queues, self.limits.per_endpoint,
                        min(self.limits.total, DISCOVERY_WORKERS), work)
        finally:
            deadlines.close()

    def _record(self, key: tuple[str, Any], outcome: CapabilitySet | PowerplaneError) -> None:
        """What discovery found for ``key``: its set, or the error (and its words)."""
        if self._rules:
            self._rules.clear()
        if isinstance(outcome, CapabilitySet):
            self._caps[key] = outcome
            self._errors.pop(key, None)
        else:
            self._caps[key] = str(outcome)
            self._errors[key] = outcome

    async def _discover_one(
        self, key: tuple[str, Any], target: Any, deadlines: SharedDeadlines | None = None
    ) -> None:
        name = key[0]
        try:
            caps = await self._call(name, "capabilities", target, deadlines=deadlines)
            if not isinstance(caps, CapabilitySet):
                raise ProtocolError(
                    f"capabilities() returned {type(caps).__name__}, not a CapabilitySet",
                    channel=name,
                )
        except PowerplaneError as exc:
            self._record(key, exc)
            return
        self._record(key, caps)

    async def _discover_batch(
        self, job: Sequence[tuple[tuple[str, Any], Any]], deadlines: SharedDeadlines
    ) -> None:
        """One ``capabilities_batch`` call for every target of ``job`` (one channel and
        endpoint); each target gets its own outcome, or the call's error."""
        name = job[0][0][0]
        targets = [target for _, target in job]
        try:
            outcomes = await self._call(name, "capabilities_batch", targets[0], targets,
                                        deadlines=deadlines)
            if (not isinstance(outcomes, Sequence) or isinstance(outcomes, str | bytes)
                    or len(outcomes) != len(targets)):
                count = (len(outcomes) if isinstance(outcomes, Sequence)
                         else type(outcomes).__name__)
                raise ProtocolError(
                    f"capabilities_batch() returned {count} outcomes for {len(targets)} "
                    "targets (one per target, in order, is the contract)",
                    channel=name,
                )
        except PowerplaneError as exc:
            for key, _ in job:
                self._record(key, exc)
            return
        caps, errors = self._caps, self._errors
        self._rules.clear()  # as _record does, once for the batch
        for (key, target), outcome in zip(job, outcomes, strict=True):
            if type(outcome) is CapabilitySet:  # _record's set case, written out
                caps[key] = outcome
                if errors:
                    errors.pop(key, None)
                continue
            if not isinstance(outcome, CapabilitySet | PowerplaneError):
                outcome = ProtocolError(
                    f"capabilities_batch() returned {type(outcome).__name__} for this "
                    "target, not a CapabilitySet or an error",
                    channel=name,
                    target=target,
                )
            self._record(key, outcome)

    def _node_offer(self, name: str, spec: NodeSpec) -> NodeOffer:
        channels: list[tuple[str, str | None, str]] = []
        for ref in spec.channels:
            err = self._errors.get((ref.channel, _target_key(ref.target)))
            if err is None and (ref.channel, _target_key(ref.target)) not in self._caps:
                channels.append((ref.channel, "ChannelError", "not discovered"))
            elif err is None:
                channels.append((ref.channel, None, ""))
            else:
                channels.append((ref.channel, type(err).__name__, str(err)))
        return NodeOffer(name, spec.site, self._decide(spec), tuple(channels))

    def discovery_error(self, node: str) -> PowerplaneError | None:
        """The first discovery error among ``node``'s channels, in preference order."""
        spec = self._spec(node)
        for ref in spec.channels:
            key = (ref.channel, _target_key(ref.target))
            err = self._errors.get(key)
            if err is not None:
                return err
            if key not in self._caps:
                return ChannelError("not discovered", channel=ref.channel, target=ref.target)
        return None

    def _views(self, spec: NodeSpec) -> list[ChannelView]:
        return [
            (ref.channel, self._caps.get((ref.channel, _target_key(ref.target)), "not discovered"))
            for ref in spec.channels
        ]

    def _decide(self, spec: NodeSpec) -> dict[Verb, VerbOffer]:
        views = self._views(spec)
        key = (tuple(views), spec.site, spec.classification)
        found = self._memo.get(key)
        if found is None:
            found = decide(views, spec.site, spec.classification, self.deployment.recovery)
            self._memo[key] = found
        return found

    def capabilities(self, channel: str, target: Any) -> CapabilitySet | str:
        """What discovery found for ``(channel, target)``: a set, or why there is none."""
        return self._caps.get((channel, _target_key(target)), "not discovered")

    def channel(self, name: str) -> Channel:
        """The live channel object named ``name``, created on first use (KeyError: none)."""
        channel = self._channel_for(name)
        if channel is None:
            raise KeyError(name)
        return channel

    @property
    def nodes(self) -> Mapping[str, NodeSpec]:
        return self.deployment.nodes

    def _spec(self, node: str) -> NodeSpec:
        spec = self.deployment.nodes.get(node)
        if spec is None:
            raise UnknownNode(node, list(self.deployment.nodes))
        return spec

    # -- the rule ----------------------------------------------------------------------------
    def offer_for(self, node: str) -> NodeOffer:
        """Per verb: offered (channel, graceful, recovery) or withheld (reason). Pure."""
        offer = self._offers.get(node)
        if offer is None:
            offer = self._offers[node] = self._node_offer(node, self._spec(node))
        return offer

    def offers(self, nodes: Iterable[str] | None = None) -> list[NodeOffer]:
        """``offer_for`` for each node (all nodes by default)."""
        names = list(nodes) if nodes is not None else list(self.deployment.nodes)
        return [self.offer_for(n) for n in names]

    def _target(self, spec: NodeSpec, channel: str) -> Any:
        for ref in spec.channels:
            if ref.channel == channel:
                return ref.target
        raise KeyError(channel)

    def _decide_fresh(self, node: str) -> dict[Verb, VerbOffer]:
        """The rule evaluated now, from the discovered capabilities, without any cache."""
        spec = self._spec(node)
        return decide(self._views(spec), spec.site, spec.classification,
                      self.deployment.recovery)

    def _recheck(self, node: str) -> tuple[NodeSpec, dict[Verb, VerbOffer]]:
        """The rule applied now to what discovery currently holds (not the offer cache).

        ``decide`` is pure, so it is memoized on its inputs: the node's channel views,
        site and classification (the memo is cleared whenever discovery runs again), and
        per node until discovery records anything new.
        """
        spec = self._spec(node)
        offers = self._rules.get(node)
        if offers is None:
            offers = self._rules[node] = self._decide(spec)
        return spec, offers

    def _check(self, node: str, verb: Verb) -> tuple[NodeSpec, VerbOffer]:
        # The rule, decided again at dispatch: not the cached offer.
        spec, offers = self._recheck(node)
        offer = offers[verb]
        if not offer.offered:
            if offer.cause == "channel":
                raise self._undiscovered(node, verb, offer)
            raise NotOffered(node, verb.value, offer.reason)
        return spec, offer

    def _undiscovered(self, node: str, verb: Verb, offer: VerbOffer) -> PowerplaneError:
        """A verb withheld because a channel could not be discovered: that channel's failure."""
        err = self.discovery_error(node)
        if err is None:
            return NotOffered(node, verb.value, offer.reason)
        if not isinstance(err, ChannelError):
            return err  # e.g. a ConfigError the device revealed (exit 2), as it was raised
        return type(err)(  # the same class: an unreachable BMC stays Unreachable
            f"{verb.value} for {node} cannot be decided: the channel could not be discovered "
            f"({err.message})",
            channel=err.channel,
            target=err.target,
        )

    # -- invocation --------------------------------------------------------------------------
    async def invoke(
        self, node: str, verb: Verb | str, reason: str, *, wait: float = 0.0,
        hazard_reason: str | None = None,
    ) -> InvokeResult:
        """Run one verb on one node under the rule and the guard. Sent at most once; never retried.

        ``wait`` > 0 reads the node back until it reaches the state the verb leads to or the
        wait ends (``readback`` stays None when ``wait`` is 0; see ``InvokeResult.reached``).
        A timeout after the request may have left raises
        :class:`~powerplane.errors.OutcomeUnknown`, never a plain failure.
        ``hazard_reason``: why the call may consume the last of the quorum margin (the
        guard refuses such a call without one).
        """
        verb = _parse_verb(verb)
        _check_reason(reason)
        wait = _check_wait(wait)
        plan = (await self.plan([node], verb, reason, hazard_reason=hazard_reason))[node]
        if isinstance(plan, PowerplaneError):
            raise plan
        return await self._dispatch(plan, reason, wait)

    async def plan(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *,
        hazard_reason: str | None = None,
    ) -> dict[str, Plan | PowerplaneError]:
        """What ``invoke``/``invoke_many`` would send for each node, sending nothing.

        Runs exactly the checks they run: the rule decided again (not the cached offer),
        then the guard for reboot, shutdown and terminate. Each node maps to its
        :class:`Plan` or to the error invoking it would raise. What these nodes use and
        is not discovered yet is discovered first (every channel of each node, so the
        rule sees them all).
        """
        verb = _parse_verb(verb)
        _check_reason(reason)
        refused, allowed, said = await self._checked(nodes, verb, reason, hazard_reason)
        out: dict[str, Plan | PowerplaneError] = dict(refused)
        for node, channel, target, offer in allowed:
            out[node] = Plan(node, verb, channel, target, offer.graceful, said, offer.recovery)
        return {n: out[n] for n in dict.fromkeys(nodes)}

    async def _checked(
        self, nodes: Sequence[str], verb: Verb, reason: str, hazard_reason: str | None = None,
    ) -> tuple[dict[str, PowerplaneError], list[tuple[str, str, Any, VerbOffer]], str]:
        """:meth:`plan`'s checks: (refused node -> error, allowed (node, channel, target,
        offer) in order, what the guard said). The rule first for every node, then the
        guard once for every node the rule allowed."""
        await self._ensure(nodes)
        refused: dict[str, PowerplaneError] = {}
        allowed: list[tuple[str, NodeSpec, VerbOffer]] = []
        for node in dict.fromkeys(nodes):
            try:
                spec, offer = self._check(node, verb)
            except PowerplaneError as exc:
                refused[node] = exc
                continue
            allowed.append((node, spec, offer))
        verdicts: Mapping[str, PowerplaneError | None] = {}
        said = "no lifecycle guard configured"
        if self.guard is not None and verb in GUARDED and allowed:
            verdicts = await self.guard([n for n, _, _ in allowed], verb, reason,
                                        hazard_reason=hazard_reason)
            said = "allowed by the lifecycle guard"
        elif self.guard is not None:
            said = f"the lifecycle guard does not restrict {verb.value}"
        out: list[tuple[str, str, Any, VerbOffer]] = []
        for node, spec, offer in allowed:
            refusal = verdicts.get(node) if verdicts else None
            if refusal is not None:
                refused[node] = refusal
                continue
            assert offer.channel is not None
            out.append((node, offer.channel, self._target(spec, offer.channel), offer))
        return refused, out, said

    async def _dispatch(self, plan: Plan, reason: str, wait: float = 0.0) -> InvokeResult:
        """Send a verb the rule and the guard have just allowed (``plan`` right before)."""
        log.info("invoke %s %s via %s: %s", plan.verb.value, plan.node, plan.channel, reason)
        acceptance = await self._call(plan.channel, plan.verb.method, plan.target)
        detail = acceptance.detail if isinstance(acceptance, Acceptance) else ""
        readback = await self._await_state(plan.node, plan.verb, wait) if wait > 0 else None
        return InvokeResult(plan.node, plan.verb, plan.channel, True, readback, detail)

    async def _await_state(self, node: str, verb: Verb, wait: float) -> PowerState:
        """Read back until the expected state or the deadline; the last read is at the deadline."""
        want = _expected(verb)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        delay = 0.2
        while True:
            # the verb was sent: a config error of another channel is that channel's
            # unknown reading here, never this call's error
            state = (await self._read_state(node, False, config_errors=False)).state
            remaining = deadline - loop.time()
            if state is want or remaining <= 0:
                return state
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)

    async def invoke_many(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *, wait: float = 0.0,
        progress: Callable[[str, InvokeResult | PowerplaneError], None] | None = None,
        hazard_reason: str | None = None,
    ) -> dict[str, InvokeResult | PowerplaneError]:
        """Run one verb on many nodes concurrently, bounded per endpoint and in total.

        One node's failure never stops the others; the result maps each node to its
        :class:`InvokeResult` or its error. The rule and the guard run first, for all the
        nodes together. Channels that offer ``invoke_batch(verb, targets)`` receive their
        nodes in one batch. ``progress`` is called as each node finishes. The work in
        flight is bounded by the limits, not the fleet (see :meth:`invoke_stream`).
        """
        verb = _parse_verb(verb)
        _check_reason(reason)
        wait = _check_wait(wait)
        # every node's slot made now, in the order given, so the result needs no reordering
        results: dict[str, Any] = dict.fromkeys(nodes)

        def done(node: str, outcome: InvokeResult | PowerplaneError) -> None:
            results[node] = outcome
            if progress is not None:
                progress(node, outcome)

        await self._invoke_each(nodes, verb, reason, wait, done, hazard_reason)
        return results

    def invoke_stream(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *, wait: float = 0.0,
        hazard_reason: str | None = None,
    ) -> AsyncIterator[tuple[str, InvokeResult | PowerplaneError]]:
        """``invoke_many`` as an async iterator: ``(node, outcome)`` as each node finishes.

        ::

            async for node, outcome in host.invoke_stream(nodes, Verb.REBOOT, reason="..."):
                print(node, outcome)

        The same checks, bounds and at-most-once guarantees as :meth:`invoke_many`; each
        node comes exactly once, in the order the nodes finish (nodes the rule or the guard
        refuse first). Bad arguments raise here, before anything runs. Leaving the loop
        early (``break``, an exception, ``aclose()``) cancels what has not finished: a
        verb not yet sent is never sent; one already sent is not awaited.
        """
        verb = _parse_verb(verb)
        _check_reason(reason)
        wait = _check_wait(wait)
        return self._stream(nodes, verb, reason, wait, hazard_reason)

    async def _stream(
        self, nodes: Sequence[str], verb: Verb, reason: str, wait: float,
        hazard_reason: str | None = None,
    ) -> AsyncIterator[tuple[str, InvokeResult | PowerplaneError]]:
        queue: asyncio.Queue[tuple[str, InvokeResult | PowerplaneError] | None] = (
            asyncio.Queue())
        runner = asyncio.create_task(
            self._invoke_each(nodes, verb, reason, wait,
                              lambda node, outcome: queue.put_nowait((node, outcome)),
                              hazard_reason))
        runner.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            await runner  # raises what the run raised (a guard's own failure)
        finally:
            if not runner.done():
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner

    async def _invoke_each(
        self, nodes: Sequence[str], verb: Verb, reason: str, wait: float,
        done: Callable[[str, InvokeResult | PowerplaneError], None],
        hazard_reason: str | None = None,
    ) -> None:
        """Plan ``nodes``, then dispatch every allowed one, calling ``done`` per node.

        Per-endpoint worker queues (:func:`~powerplane.scheduling.drain`): at most
        ``limits.per_endpoint`` calls per endpoint and ``limits.total`` in all, by that
        many workers at most; one shared deadline timer for the batch; readbacks
        (``wait`` > 0) run beside the workers so they do not hold an endpoint's slot.
        """
        with quiet_gc():
            refused, allowed, _ = await self._checked(nodes, verb, reason, hazard_reason)
            for node, error in refused.items():
                done(node, error)
            method, verb_name = verb.method, verb.value  # enum attributes cost: read once
            batches: dict[str, list[tuple[str, Any]]] = {}
            queues: dict[Any, deque[tuple[str, str, Any]]] = {}
            fns: dict[str, tuple[Callable[..., Any], bool] | None] = {}
            traits = self._traits
            for node, name, target, _ in allowed:
                trait = traits.get(name)  # the channel was created by discovery
                if trait is not None and trait.batch_invoke:
                    batches.setdefault(name, []).append((node, target))
                    continue
                if name not in fns:
                    fns[name] = self._method(name, method)
                queues.setdefault(self._endpoint(name, target), deque()).append(
                    (node, name, target))
            del allowed
            if not queues and not batches:
                return
            deadlines = SharedDeadlines(self.limits.timeout_s)
            limiters = {endpoint: self._endpoint_sem(endpoint) for endpoint in queues}
            readbacks: set[asyncio.Task[None]] = set()

            async def read_back(node: str, name: str, detail: str) -> None:
                readback = await self._await_state(node, verb, wait)
                done(node, InvokeResult(node, verb, name, True, readback, detail))

            def accepted(node: str, name: str, acceptance: Any) -> None:
                detail = acceptance.detail if isinstance(acceptance, Acceptance) else ""
                if wait > 0:
                    task = asyncio.create_task(read_back(node, name, detail))
                    readbacks.add(task)
                    task.add_done_callback(readbacks.discard)
                else:
                    done(node, InvokeResult(node, verb, name, True, None, detail))

            info = log.isEnabledFor(logging.INFO)
            slots = slots_of(queues, self.limits.per_endpoint)
            total = self._total
            assert total is not None

            async def worker() -> None:
                # drain()'s worker with _bounded's call written out: two coroutines fewer
                # per call, and so less to keep for each call in flight
                while slots:
                    endpoint = slots.popleft()
                    queue, sem = queues[endpoint], limiters[endpoint]
                    while queue:
                        node, name, target = queue.popleft()
                        if info:
                            log.info("invoke %s %s via %s: %s", verb_name, node, name, reason)
                        how = fns[name]
                        acceptance: Any = None
                        failure: PowerplaneError | None = None
                        if how is None:  # no such method: _call says so
                            try:
                                acceptance = await self._call(name, method, target)
                            except PowerplaneError as exc:
                                failure = exc
                        else:
                            fn, is_async = how
                            gate = SendGate()
                            token = _GATE.set(gate)
                            try:
                                if not try_both(sem, total):
                                    await acquire_both(sem, total)
                                try:
                                    with deadlines.bound():
                                        acceptance = await (fn(target) if is_async else
                                                            self._run(fn, target, is_async=False))
                                except asyncio.CancelledError:
                                    # a cancelled call never sends afterwards
                                    self._cut(gate, name, method, target, is_async, node)
                                    raise
                                except Exception as exc:
                                    if not is_async and isinstance(exc, TimeoutError):
                                        self._gave_up.add(name)
                                    failure = self._mapped(exc, gate, name, method, target)
                                finally:
                                    total.release()
                                    sem.release()
                            finally:
                                _GATE.reset(token)
                        if failure is None:
                            accepted(node, name, acceptance)
                        else:
                            done(node, failure)

            async def batch(name: str, members: list[tuple[str, Any]]) -> None:
                if info:
                    for node, _ in members:
                        log.info("invoke %s %s via %s (batch): %s", verb_name, node, name,
                                 reason)
                try:
                    outcomes = await self._call(
                        name, "invoke_batch", members[0][1], verb, [t for _, t in members])
                except PowerplaneError as exc:
                    for node, _ in members:
                        done(node, exc)
                    return
                for (node, _), outcome in zip(members, outcomes, strict=True):
                    if isinstance(outcome, PowerplaneError):
                        done(node, outcome)
                    else:
                        accepted(node, name, outcome)

            try:
                await asyncio.gather(
                    run_workers(min(self.limits.total, len(slots)), worker),
                    *(batch(c, m) for c, m in batches.items()),
                )
                if readbacks:
                    await asyncio.gather(*readbacks)
            finally:
                deadlines.close()
                for task in readbacks:
                    task.cancel()

    def _method(self, name: str, method: str) -> tuple[Callable[..., Any], bool] | None:
        """(channel ``name``'s ``method``, whether it is async), looked up once for a
        batch's calls; None leaves each call to ``_call`` (which says what is missing)."""
        channel = self._channels.get(name)
        fn = getattr(channel, method, None) if channel is not None else None
        if fn is None:
            return None
        is_async = self._async_methods.get((name, method))
        if is_async is None:
            is_async = self._async_methods[(name, method)] = inspect.iscoroutinefunction(fn)
        return fn, is_async

    # -- readback ----------------------------------------------------------------------------
    async def read_power_state(self, node: str, *, every_channel: bool = False) -> NodeReading:
        """Read the node back through its channels, in preference order.

        The first channel that reads ``on`` or ``off`` answers; if none can, the state
        is ``unknown`` with what each channel said. A channel that declares it cannot
        see power off is never believed when it reads off. ``every_channel`` reads every
        channel (concurrently) so ``readings`` shows each one and any disagreement.

        A :class:`~powerplane.errors.ConfigError` a channel raises (its config cannot be
        opened, e.g. a secret that holds no PEM, or the device shows the config does not
        fit it) is raised, not read: the deployment is bad input (exit 2). With
        ``every_channel`` it is raised once every channel has answered.
        """
        return await self._read_state(node, every_channel, config_errors=True)

    async def _read_state(
        self, node: str, every_channel: bool, *, config_errors: bool
    ) -> NodeReading:
        """:meth:`read_power_state`; ``config_errors`` False: a channel's config error is
        its unknown reading (error ``ConfigError``), as any other failure."""
        spec = self._spec(node)

        async def one(channel: str, target: Any) -> ChannelReading:
            try:
                reading = await self._call(channel, "read_power_state", target)
            except ConfigError as exc:
                if config_errors:
                    raise
                return ChannelReading(channel, PowerState.UNKNOWN, str(exc), type(exc).__name__)
            except PowerplaneError as exc:
                return ChannelReading(channel, PowerState.UNKNOWN, str(exc), type(exc).__name__)
            if not isinstance(reading, Reading):
                return ChannelReading(channel, PowerState.UNKNOWN,
                                      f"returned {type(reading).__name__}, not a Reading",
                                      "ProtocolError")
            key = (channel, _target_key(target))
            if reading.state is PowerState.OFF and key not in self._caps:
                # whether an off is believed depends on what the channel declares
                await self._discover_pairs({key: target}, again=False)
            caps = self.capabilities(channel, target)
            if (
                reading.state is PowerState.OFF
                and isinstance(caps, CapabilitySet)
                and not caps.sees_power_off
            ):
                return ChannelReading(channel, PowerState.UNKNOWN,
                                      "reported off but declares it cannot see power off")
            return ChannelReading(channel, reading.state, reading.detail)

        readings: list[ChannelReading] = []
        if every_channel:
            # every channel answers before a config error is raised (no read left running)
            answers = await asyncio.gather(*(one(r.channel, r.target) for r in spec.channels),
                                           return_exceptions=True)
            for answer in answers:
                if isinstance(answer, BaseException):
                    raise answer
                readings.append(answer)
        else:
            for ref in spec.channels:
                readings.append(await one(ref.channel, ref.target))
                if readings[-1].state is not PowerState.UNKNOWN:
                    break
        for r in readings:
            if r.state is not PowerState.UNKNOWN:
                detail = r.detail
                if every_channel and len({x.state for x in readings
                                          if x.state is not PowerState.UNKNOWN}) > 1:
                    others = ", ".join(f"{x.channel} reads {x.state.value}" for x in readings
                                       if x.state not in (PowerState.UNKNOWN, r.state))
                    detail = "; ".join(p for p in (detail, f"channels disagree: {others}") if p)
                return NodeReading(node, r.state, r.channel, detail, tuple(readings))
        notes = [f"{r.channel}: {r.detail or 'unknown'}" for r in readings]
        if not spec.channels:
            notes.append("the node has no channel configured")
        first = spec.channels[0].channel if spec.channels else None
        return NodeReading(node, PowerState.UNKNOWN, first, "; ".join(notes), tuple(readings))

    async def read_many(
        self, nodes: Sequence[str], *, every_channel: bool = True,
        progress: Callable[[str, NodeReading], None] | None = None,
    ) -> dict[str, NodeReading]:
        """``read_power_state`` for many nodes concurrently (bounded like every call).

        A config error a channel raises is raised once every node has been read (the
        first in the order given): the deployment is bad input.
        """
        out: dict[str, NodeReading] = {}
        failed: dict[str, ConfigError] = {}

        async def one(node: str) -> None:
            try:
                out[node] = await self.read_power_state(node, every_channel=every_channel)
            except ConfigError as exc:
                failed[node] = exc
                return
            if progress is not None:
                progress(node, out[node])

        order = list(dict.fromkeys(nodes))
        await asyncio.gather(*(one(n) for n in order))
        for node in order:
            if node in failed:
                raise failed[node]
        return {n: out[n] for n in order}

    async def boot_marker(self, node: str) -> tuple[str, str] | None:
        """``(channel, marker)`` from the first channel of ``node`` that publishes one.

        A marker changes on every boot of the machine; ``None`` when no channel offers
        one or none answered (a failed read is never taken for a marker).
        """
        for ref in self._spec(node).channels:
            channel = self._channel_for(ref.channel)
            if not isinstance(channel, HasBootMarker):
                continue
            try:
                value = await self._call(ref.channel, "boot_marker", ref.target)
            except PowerplaneError as exc:
                log.info("boot marker of %s via %s: %s", node, ref.channel, exc)
                continue
            if isinstance(value, str) and value:
                return ref.channel, value
        return None

    def confirm_power_off(
        self,
        node: str,
        accepted_at: dt.datetime,
        window: float = 300.0,
        cadence: float = 2.0,
    ) -> PowerOffWatch:
        """Start reading ``node`` back after an accepted shutdown; returns at once.

        The watch's ``status`` is False while reading, True once the node reads off,
        Unknown when the window closes or no channel of the node can see power off.
        """
        spec = self._spec(node)
        can_see = False
        for ref in spec.channels:
            caps = self.capabilities(ref.channel, ref.target)
            if not isinstance(caps, CapabilitySet) or caps.sees_power_off:
                can_see = True
        return PowerOffWatch(
            lambda: self.read_power_state(node),
            accepted_at,
            window,
            cadence,
            can_see_off=can_see,
        )

    # -- plumbing ----------------------------------------------------------------------------
    def _endpoint(self, name: str, target: Any) -> Any:
        """The key calls of channel ``name`` for ``target`` are bounded by: the channel's
        name, with the device it names (``endpoint(target)``) where it names one."""
        traits = self._traits.get(name)
        if traits is None or traits.endpoint is None:
            return name
        try:
            return (name, traits.endpoint(target))
        except Exception:
            return name

    async def _run(self, fn: Callable[..., Any], *args: Any, is_async: bool | None = None) -> Any:
        if is_async is None:
            is_async = inspect.iscoroutinefunction(fn)
        if is_async:
            return await fn(*args)
        # a daemon thread of the process's pool, in a copy of this context (so it sees this
        # call's SendGate); cancelled, the call is abandoned to its thread at once
        result = await in_worker(fn, *args)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _call(
        self, name: str, method: str, target: Any, *args: Any,
        deadlines: SharedDeadlines | None = None,
    ) -> Any:
        """One bounded, timed call of ``method`` on channel ``name`` (created on first use;
        ``deadlines``: a batch's shared timer, else a timer of its own)."""
        channel = self._channel_for(name)
        if channel is None:
            raise self._unopened(name)
        fn = getattr(channel, method, None)
        if fn is None:
            raise ProtocolError(f"the channel has no method {method}()", channel=name)
        is_async = self._async_methods.get((name, method))
        if is_async is None:
            is_async = self._async_methods[(name, method)] = inspect.iscoroutinefunction(fn)
        return await self._bounded(name, method, fn, is_async, target, args,
                                   self._endpoint_sem(self._endpoint(name, target)), deadlines)

    def _endpoint_sem(self, endpoint: Any) -> Limiter:
        """The limiter that bounds concurrent calls to ``endpoint`` (limits.per_endpoint)."""
        sem = self._ep_sems.get(endpoint)
        if sem is None:
            sem = self._ep_sems[endpoint] = Limiter(self.limits.per_endpoint)
        return sem

    async def _bounded(
        self, name: str, method: str, fn: Callable[..., Any], is_async: bool, target: Any,
        args: tuple[Any, ...], sem: Limiter, deadlines: SharedDeadlines | None = None,
    ) -> Any:
        """The call itself: bounded by ``sem`` and ``limits.total``, timed by
        ``limits.timeout_s`` (``deadlines``: a batch's shared timer, else one of its own),
        through a fresh :class:`SendGate`, every escaping error mapped."""
        assert self._total is not None, "use 'async with PowerHost(...)' or await start()"
        timeout = self.limits.timeout_s
        call_args = args if args else (target,)
        gate = SendGate()
        token = _GATE.set(gate)
        total = self._total
        try:
            # free units are taken by a plain call: no awaitable unless the call must wait
            if not try_both(sem, total):
                await acquire_both(sem, total)
            try:
                try:
                    if deadlines is None:
                        async with asyncio.timeout(timeout):
                            return await self._run(fn, *call_args, is_async=is_async)
                    with deadlines.bound():
                        if is_async:
                            return await fn(*call_args)
                        return await self._run(fn, *call_args, is_async=False)
                except asyncio.CancelledError:
                    # a cancelled call never sends afterwards
                    self._cut(gate, name, method, target, is_async, None)
                    raise
                except Exception as exc:
                    if not is_async and isinstance(exc, TimeoutError):
                        self._gave_up.add(name)
                    error = self._mapped(exc, gate, name, method, target)
                    if error is exc:
                        raise
                    raise error from error.__cause__  # None: as `from None`
            finally:
                total.release()
                sem.release()
        finally:
            _GATE.reset(token)

    def _mapped(
        self, exc: Exception, gate: SendGate, name: str, method: str, target: Any
    ) -> PowerplaneError:
        """The error a call that raised ``exc`` ends with (its gate closed where that
        decides it): a timeout after the request may have left is
        :class:`~powerplane.errors.OutcomeUnknown`, one before it a
        :class:`~powerplane.errors.ChannelTimeout` saying nothing was sent; a plugin's
        own error as it is; anything else a :class:`~powerplane.errors.ProtocolError`."""
        changes_state = method in VERB_METHODS
        error: PowerplaneError
        if isinstance(exc, ChannelTimeout):
            # the plugin's own timeout: once its request may have left, unknown
            if changes_state and (gate.close() or not self._gated(name)):
                error = OutcomeUnknown(exc.message, channel=name, target=target)
                error.__cause__ = exc
                return error
            return exc
        if isinstance(exc, PowerplaneError):
            return exc
        if isinstance(exc, TimeoutError):
            sent = gate.close()
            what = f"no answer within {self.limits.timeout_s:g} s (limits.timeout_s)"
            if changes_state and (sent or not self._gated(name)):
                error = OutcomeUnknown(what, channel=name, target=target)
            else:
                error = ChannelTimeout(what + ("; nothing was sent" if changes_state else ""),
                                       channel=name, target=target)
            error.__suppress_context__ = True  # as ``raise ... from None``
            return error
        error = ProtocolError(
            f"the plugin let an unmapped {type(exc).__module__}.{type(exc).__name__} "
            f"escape from {method}()",
            channel=name,
            target=target,
        )
        error.__cause__ = exc
        return error

    def _cut(self, gate: SendGate, name: str, method: str, target: Any, is_async: bool,
             node: str | None) -> None:
        """A call cancelled before it answered: close its gate (nothing leaves after this)
        and, for a verb, record what the gate knew (:func:`~powerplane.channel.cut_calls`)."""
        sent = gate.close()
        if not is_async:
            self._gave_up.add(name)
        if method not in VERB_METHODS:
            return
        nodes = (node,) if node is not None else tuple(
            n for n, spec in self.deployment.nodes.items()
            if any(r.channel == name and _target_key(r.target) == _target_key(target)
                   for r in spec.channels))
        note_cut(CutCall(name, method, target, nodes,
                         True if sent else (False if self._gated(name) else None)))

    def _gated(self, name: str) -> bool:
        """Whether channel ``name``'s type passes every verb request through the gate."""
        configured = self.deployment.channels.get(name)
        return bool(configured is not None and configured.type.gated_sends)


def _parse_verb(verb: Verb | str) -> Verb:
    return Verb.parse(verb) if isinstance(verb, str) else verb


def _check_reason(reason: str) -> None:
    if not reason or not reason.strip():
        raise ValueError("a reason is required for every power verb")


MAX_WAIT_S = 86_400.0


def _check_wait(wait: float) -> float:
    """A readback wait: finite, 0 (do not read) to a day."""
    value = float(wait)
    if math.isnan(value) or not 0 <= value <= MAX_WAIT_S:
        raise ValueError(f"wait must be a number of seconds from 0 to {MAX_WAIT_S:g}, "
                         f"not {wait!r}")
    return value
