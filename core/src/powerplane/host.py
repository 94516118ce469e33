"""``PowerHost``: the asyncio-native host that discovers, offers, invokes and reads back.

::

    async with PowerHost.from_config("powerplane.yaml") as host:   # discovers capabilities
        offer = host.offer_for("node-1")
        result = await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")

Every channel call is bounded per endpoint (``limits.per_endpoint``) and in total
(``limits.total``), and times out after ``limits.timeout_s``. A verb is sent at most
once per request: the host never retries a verb. Any exception a plugin lets escape
unmapped becomes a :class:`~powerplane.errors.ProtocolError` naming its type.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import Acceptance, Channel, PowerState, Reading
from powerplane.config import ConfiguredChannel, Deployment, NodeSpec, load_config
from powerplane.errors import (
    ChannelError,
    ChannelTimeout,
    NotOffered,
    PowerplaneError,
    ProtocolError,
    UnknownNode,
)
from powerplane.plugins import Registry
from powerplane.readback import PowerOffWatch
from powerplane.recovery import ChannelView, NodeOffer, VerbOffer, decide

__all__ = ["InvokeResult", "NodeReading", "PowerHost"]

log = logging.getLogger("powerplane.host")


@dataclass(frozen=True)
class InvokeResult:
    """The outcome of one verb on one node."""

    node: str
    verb: Verb
    channel: str
    accepted: bool
    readback: PowerState | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane invoke -o json``."""
        return {
            "node": self.node,
            "verb": self.verb.value,
            "channel": self.channel,
            "accepted": self.accepted,
            "readback": self.readback.value if self.readback is not None else None,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class NodeReading:
    """A node's power state as read back through its channels."""

    node: str
    state: PowerState
    channel: str | None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane state -o json``."""
        return {
            "node": self.node,
            "state": self.state.value,
            "channel": self.channel,
            "detail": self.detail,
        }


def _target_key(target: Any) -> Any:
    try:
        hash(target)
        return target
    except TypeError:
        return json.dumps(target, sort_keys=True, default=str)


class PowerHost:
    """Discovers every channel's capabilities, offers verbs under the rule, invokes them."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self._channels: dict[str, Channel] = {}
        self._broken: dict[str, str] = {}
        self._caps: dict[tuple[str, Any], CapabilitySet | str] = {}
        self._offers: dict[str, NodeOffer] = {}
        self._memo: dict[Any, dict[Verb, VerbOffer]] = {}
        self._ep_sems: dict[Any, asyncio.Semaphore] = {}
        self._total: asyncio.Semaphore | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._async_methods: dict[tuple[str, str], bool] = {}
        self._started = False

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, registry: Registry | None = None
    ) -> PowerHost:
        """A host for the deployment file at ``path`` (as ``find_config`` finds it)."""
        return cls(load_config(path, registry=registry))

    async def __aenter__(self) -> PowerHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Create every channel and discover capabilities (what ``async with`` does)."""
        if self._started:
            return
        self._total = asyncio.Semaphore(self.limits.total)
        self._executor = ThreadPoolExecutor(
            max_workers=min(self.limits.total, 64), thread_name_prefix="powerplane"
        )
        for name, configured in self.deployment.channels.items():
            self._create(name, configured)
        self._started = True
        await self.refresh()

    def _create(self, name: str, configured: ConfiguredChannel) -> None:
        try:
            self._channels[name] = configured.type.factory(name, configured.config)
        except PowerplaneError as exc:
            self._broken[name] = str(exc)
        except Exception as exc:  # a plugin bug must not take the host down
            self._broken[name] = f"channel could not be created: {type(exc).__name__}"
            log.warning("channel %s: factory raised %s", name, type(exc).__name__)

    async def close(self) -> None:
        """Close every channel (each plugin logs out its sessions)."""
        for name, channel in list(self._channels.items()):
            try:
                await self._run(channel.close)
            except Exception as exc:
                log.warning("channel %s: close failed: %s", name, type(exc).__name__)
        self._channels.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._started = False

    # -- discovery ---------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Discover every (channel, target) capability set again, concurrently."""
        pairs: dict[tuple[str, Any], Any] = {}
        for node in self.deployment.nodes.values():
            for ref in node.channels:
                pairs.setdefault((ref.channel, _target_key(ref.target)), ref.target)

        async def one(key: tuple[str, Any], target: Any) -> None:
            name = key[0]
            if name in self._broken:
                self._caps[key] = self._broken[name]
                return
            try:
                caps = await self._call(name, "capabilities", target)
                if not isinstance(caps, CapabilitySet):
                    raise ProtocolError(
                        f"capabilities() returned {type(caps).__name__}, not a CapabilitySet",
                        channel=name,
                    )
                self._caps[key] = caps
            except PowerplaneError as exc:
                self._caps[key] = str(exc)

        await asyncio.gather(*(one(k, t) for k, t in pairs.items()))
        self._memo.clear()
        self._offers = {
            name: NodeOffer(name, spec.site, self._decide(spec))
            for name, spec in self.deployment.nodes.items()
        }

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
        """The live channel object named ``name`` (for conformance and tests)."""
        return self._channels[name]

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
            spec = self._spec(node)
            offer = NodeOffer(node, spec.site, self._decide(spec))
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
        site and classification; the memo is cleared whenever discovery runs again.
        """
        spec = self._spec(node)
        return spec, self._decide(spec)

    def _check(self, node: str, verb: Verb) -> tuple[NodeSpec, VerbOffer]:
        # The rule, decided again at dispatch: not the cached offer.
        spec, offers = self._recheck(node)
        offer = offers[verb]
        if not offer.offered:
            raise NotOffered(node, verb.value, offer.reason)
        return spec, offer

    # -- invocation --------------------------------------------------------------------------
    async def invoke(
        self, node: str, verb: Verb | str, reason: str, *, wait: float = 0.0
    ) -> InvokeResult:
        """Run one verb on one node under the rule. Sent at most once; never retried.

        ``wait`` > 0 reads the node back for up to that many seconds until it reaches
        the state the verb leads to (``readback`` stays None when ``wait`` is 0).
        """
        verb = Verb.parse(verb) if isinstance(verb, str) else verb
        if not reason or not reason.strip():
            raise ValueError("a reason is required for every power verb")
        spec, offer = self._check(node, verb)
        return await self._dispatch(node, spec, offer, reason, wait)

    async def _dispatch(
        self, node: str, spec: NodeSpec, offer: VerbOffer, reason: str, wait: float = 0.0
    ) -> InvokeResult:
        """Send a verb the rule has just allowed (callers run ``_check`` right before)."""
        verb = offer.verb
        assert offer.offered and offer.channel is not None
        target = self._target(spec, offer.channel)
        log.info("invoke %s %s via %s: %s", verb.value, node, offer.channel, reason)
        acceptance = await self._call(offer.channel, verb.method, target)
        detail = acceptance.detail if isinstance(acceptance, Acceptance) else ""
        readback = await self._await_state(node, verb, wait) if wait > 0 else None
        return InvokeResult(node, verb, offer.channel, True, readback, detail)

    async def _await_state(self, node: str, verb: Verb, wait: float) -> PowerState:
        want = {Verb.SHUTDOWN: PowerState.OFF, Verb.TERMINATE: PowerState.OFF}.get(
            verb, PowerState.ON
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        delay = 0.2
        state = PowerState.UNKNOWN
        while True:
            state = (await self.read_power_state(node)).state
            if state is want or loop.time() + delay > deadline:
                return state
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def invoke_many(
        self, nodes: Sequence[str], verb: Verb | str, reason: str
    ) -> dict[str, InvokeResult | PowerplaneError]:
        """Run one verb on many nodes concurrently, bounded per endpoint and in total.

        One node's failure never stops the others; the result maps each node to its
        :class:`InvokeResult` or its error. Channels that offer ``invoke_batch(verb,
        targets)`` receive their nodes in one batch.
        """
        verb = Verb.parse(verb) if isinstance(verb, str) else verb
        if not reason or not reason.strip():
            raise ValueError("a reason is required for every power verb")
        results: dict[str, InvokeResult | PowerplaneError] = {}
        batches: dict[str, list[tuple[str, Any]]] = {}
        singles: list[tuple[str, NodeSpec, VerbOffer]] = []
        for node in dict.fromkeys(nodes):
            try:
                spec, offer = self._check(node, verb)
            except PowerplaneError as exc:
                results[node] = exc
                continue
            assert offer.channel is not None
            ch = self._channels.get(offer.channel)
            if ch is not None and hasattr(ch, "invoke_batch"):
                batches.setdefault(offer.channel, []).append(
                    (node, self._target(spec, offer.channel))
                )
            else:
                singles.append((node, spec, offer))

        async def single(node: str, spec: NodeSpec, offer: VerbOffer) -> None:
            try:
                results[node] = await self._dispatch(node, spec, offer, reason)
            except PowerplaneError as exc:
                results[node] = exc

        async def batch(channel: str, members: list[tuple[str, Any]]) -> None:
            for node, _ in members:
                log.info("invoke %s %s via %s (batch): %s", verb.value, node, channel, reason)
            try:
                outcomes = await self._call(
                    channel, "invoke_batch", members[0][1], verb, [t for _, t in members]
                )
            except PowerplaneError as exc:
                for node, _ in members:
                    results[node] = exc
                return
            for (node, _), outcome in zip(members, outcomes, strict=True):
                if isinstance(outcome, PowerplaneError):
                    results[node] = outcome
                else:
                    detail = outcome.detail if isinstance(outcome, Acceptance) else ""
                    results[node] = InvokeResult(node, verb, channel, True, None, detail)

        await asyncio.gather(
            *(single(*s) for s in singles), *(batch(c, m) for c, m in batches.items())
        )
        return {n: results[n] for n in dict.fromkeys(nodes)}

    # -- readback ----------------------------------------------------------------------------
    async def read_power_state(self, node: str) -> NodeReading:
        """Read the node back through its channels, in preference order.

        The first channel that reads ``on`` or ``off`` answers; if none can, the state
        is ``unknown`` with what each channel said. A channel that declares it cannot
        see power off is never believed when it reads off.
        """
        spec = self._spec(node)
        notes: list[str] = []
        for ref in spec.channels:
            try:
                reading = await self._call(ref.channel, "read_power_state", ref.target)
            except PowerplaneError as exc:
                notes.append(f"{ref.channel}: {exc}")
                continue
            if not isinstance(reading, Reading):
                notes.append(f"{ref.channel}: returned {type(reading).__name__}, not a Reading")
                continue
            caps = self.capabilities(ref.channel, ref.target)
            if (
                reading.state is PowerState.OFF
                and isinstance(caps, CapabilitySet)
                and not caps.sees_power_off
            ):
                notes.append(f"{ref.channel}: reported off but declares it cannot see power off")
                continue
            if reading.state is not PowerState.UNKNOWN:
                return NodeReading(node, reading.state, ref.channel, reading.detail)
            notes.append(f"{ref.channel}: {reading.detail or 'unknown'}")
        if not spec.channels:
            notes.append("the node has no channel configured")
        first = spec.channels[0].channel if spec.channels else None
        return NodeReading(node, PowerState.UNKNOWN, first, "; ".join(notes))

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
    def _endpoint(self, name: str, channel: Channel, target: Any) -> Any:
        fn = getattr(channel, "endpoint", None)
        if fn is None:
            return name
        try:
            return (name, fn(target))
        except Exception:
            return name

    async def _run(self, fn: Callable[..., Any], *args: Any, is_async: bool | None = None) -> Any:
        if is_async is None:
            is_async = inspect.iscoroutinefunction(fn)
        if is_async:
            return await fn(*args)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, fn, *args)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _call(self, name: str, method: str, target: Any, *args: Any) -> Any:
        """One bounded, timed call of ``method`` on channel ``name``."""
        channel = self._channels.get(name)
        if channel is None:
            raise ChannelError(self._broken.get(name, "no such channel"), channel=name)
        fn = getattr(channel, method, None)
        if fn is None:
            raise ProtocolError(f"the channel has no method {method}()", channel=name)
        is_async = self._async_methods.get((name, method))
        if is_async is None:
            is_async = self._async_methods[(name, method)] = inspect.iscoroutinefunction(fn)
        endpoint = self._endpoint(name, channel, target)
        sem = self._ep_sems.get(endpoint)
        if sem is None:
            sem = self._ep_sems[endpoint] = asyncio.Semaphore(self.limits.per_endpoint)
        assert self._total is not None, "use 'async with PowerHost(...)' or await start()"
        timeout = self.limits.timeout_s
        call_args = args if args else (target,)
        async with sem, self._total:
            try:
                async with asyncio.timeout(timeout):
                    return await self._run(fn, *call_args, is_async=is_async)
            except PowerplaneError:
                raise
            except TimeoutError:
                raise ChannelTimeout(
                    f"no answer within {timeout:g} s (limits.timeout_s)",
                    channel=name,
                    target=target,
                ) from None
            except Exception as exc:
                raise ProtocolError(
                    f"the plugin let an unmapped {type(exc).__module__}.{type(exc).__name__} "
                    f"escape from {method}()",
                    channel=name,
                    target=target,
                ) from exc
