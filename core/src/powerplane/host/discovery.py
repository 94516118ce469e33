"""Discovery and batching: what each (channel, target) can do, found once, concurrently.

:class:`Discovery` holds every discovered capability set (or the error that prevented
one) per (channel, target), asks for what is missing -- or everything again, on refresh --
and records each outcome, invalidating the :class:`~powerplane.host.cache.RuleCache`.
Per endpoint, a channel with ``capabilities_batch``
(:class:`~powerplane.channel.BatchDiscovery`) is asked once for all of its targets there;
any other once per target. Every ask is one :meth:`~powerplane.host.calls.Calls.call`, run
by :func:`~powerplane.scheduling.drain`'s bounded workers under one shared deadline timer;
a (channel, target) being discovered by another caller is awaited, never asked twice.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from powerplane.capabilities import CapabilitySet
from powerplane.config import Deployment
from powerplane.errors import ChannelError, PowerplaneError, ProtocolError, UnknownNode
from powerplane.host.cache import RuleCache
from powerplane.host.calls import Calls, target_key
from powerplane.nodes import NodeSpec
from powerplane.recovery import ChannelView, NodeOffer
from powerplane.scheduling import SharedDeadlines, drain

__all__ = ["DISCOVERY_WORKERS", "Discovery", "spec_of"]

DISCOVERY_WORKERS = 2048
"""At most this many discovery calls at once, within ``limits.total`` (each call in flight
holds its stack until it answers: 20,000 at once for a 50,000-node start held 60 MiB)."""

Key = tuple[str, Any]
"""(channel name, target key)."""


def spec_of(deployment: Deployment, node: str) -> NodeSpec:
    """``node``'s spec; ``UnknownNode`` for a name the deployment does not have."""
    spec = deployment.nodes.get(node)
    if spec is None:
        raise UnknownNode(node, list(deployment.nodes))
    return spec


class Discovery:
    """The capabilities of one host's (channel, target) pairs (see the module docstring)."""

    def __init__(self, deployment: Deployment, calls: Calls) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self.calls = calls
        self.channels = calls.channels
        self.caps: dict[Key, CapabilitySet | str] = {}
        self.errors: dict[Key, PowerplaneError] = {}
        self.complete = False
        """Whether every (channel, target) of the deployment has been discovered once."""
        self.rules = RuleCache(deployment.recovery, self.views)
        self._discovering: dict[Key, asyncio.Future[None]] = {}

    # -- what is known -----------------------------------------------------------------------
    def capabilities(self, channel: str, target: Any) -> CapabilitySet | str:
        """What discovery found for ``(channel, target)``: a set, or why there is none."""
        return self.caps.get((channel, target_key(target)), "not discovered")

    def views(self, spec: NodeSpec) -> list[ChannelView]:
        """The rule's input: per channel of the node, its set or why there is none."""
        caps = self.caps
        return [(ref.channel, caps.get((ref.channel, target_key(ref.target)), "not discovered"))
                for ref in spec.channels]

    def error(self, node: str) -> PowerplaneError | None:
        """The first discovery error among ``node``'s channels, in preference order."""
        for ref in spec_of(self.deployment, node).channels:
            key = (ref.channel, target_key(ref.target))
            err = self.errors.get(key)
            if err is not None:
                return err
            if key not in self.caps:
                return ChannelError("not discovered", channel=ref.channel, target=ref.target)
        return None

    def offer(self, node: str) -> NodeOffer:
        """``node``'s offer: the rule's verdicts and what each channel's discovery said."""
        return self.rules.offer(node, lambda: self._node_offer(node,
                                                                spec_of(self.deployment, node)))

    def _node_offer(self, name: str, spec: NodeSpec) -> NodeOffer:
        channels: list[tuple[str, str | None, str]] = []
        for ref in spec.channels:
            err = self.errors.get((ref.channel, target_key(ref.target)))
            if err is None and (ref.channel, target_key(ref.target)) not in self.caps:
                channels.append((ref.channel, "ChannelError", "not discovered"))
            elif err is None:
                channels.append((ref.channel, None, ""))
            else:
                channels.append((ref.channel, type(err).__name__, str(err)))
        return NodeOffer(name, spec.site, self.rules.decide(spec), tuple(channels))

    # -- asking ------------------------------------------------------------------------------
    async def discover(self, nodes: Iterable[str] | None, *, again: bool) -> None:
        """Discover what ``nodes`` use (every node: None); ``again``: what is discovered
        already too (a refresh)."""
        await self.discover_pairs(self.pairs(nodes), again=again)
        if nodes is None:
            self.complete = True

    def pairs(self, nodes: Iterable[str] | None) -> dict[Key, Any]:
        """(channel, target key) -> target of every channel reference of ``nodes``."""
        specs = (self.deployment.nodes.values() if nodes is None
                 else [spec_of(self.deployment, n) for n in dict.fromkeys(nodes)])
        pairs: dict[Key, Any] = {}
        for spec in specs:
            for ref in spec.channels:
                pairs.setdefault((ref.channel, target_key(ref.target)), ref.target)
        return pairs

    async def ensure(self, nodes: Iterable[str]) -> None:
        """Discover, on first use, what the known nodes among ``nodes`` use."""
        if self.complete:
            return
        known = self.deployment.nodes
        wanted = [n for n in dict.fromkeys(nodes) if n in known]
        if any((ref.channel, target_key(ref.target)) not in self.caps
               for n in wanted for ref in known[n].channels):
            await self.discover(wanted, again=False)

    async def discover_pairs(self, pairs: Mapping[Key, Any], *, again: bool) -> None:
        """Discover ``pairs`` concurrently (``again``: those already discovered too)."""
        mine: dict[Key, Any] = {}
        running: set[asyncio.Future[None]] = set()
        discovering = self._discovering
        for key, target in pairs.items():
            busy = discovering.get(key)
            if busy is not None:
                running.add(busy)
            elif again or key not in self.caps:
                mine[key] = target
        if mine:
            # one future for the whole call, under each of its keys (a future per key was
            # a tenth of a 100,000-node start)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            discovering.update(dict.fromkeys(mine, done))
            try:
                await self._discover_all(mine)
            finally:
                for key in mine:
                    if discovering.get(key) is done:
                        del discovering[key]
                done.set_result(None)
        if running:
            # shielded: a caller cancelled while waiting does not cancel the discovery
            await asyncio.gather(*(asyncio.shield(f) for f in running))

    async def _discover_all(self, mine: Mapping[Key, Any]) -> None:
        """Discover ``mine``: per endpoint, one batch call where the channel has
        ``capabilities_batch`` and two or more targets there, else one call per target;
        run by :func:`~powerplane.scheduling.drain`'s bounded workers under one shared
        deadline timer."""
        groups: dict[tuple[str, Any], list[tuple[Key, Any]]] = {}
        errors = self.errors
        channels = self.channels
        opened: dict[str, bool] = {}  # per channel name, looked up once for the call
        for key, target in mine.items():
            name = key[0]
            if errors:
                errors.pop(key, None)
            ok = opened.get(name)
            if ok is None:
                ok = opened[name] = channels.get(name) is not None
            if not ok:
                self._record(key, channels.unopened(name))
                continue
            groups.setdefault((name, channels.endpoint(name, target)), []).append((key, target))
        queues: dict[Any, deque[list[tuple[Key, Any]]]] = {}
        for (name, endpoint), items in groups.items():
            queue = queues.setdefault(endpoint, deque())
            if len(items) > 1 and channels.traits[name].batch_discovery:
                queue.append(items)
            else:
                queue.extend([item] for item in items)
        if not queues:
            return
        deadlines = SharedDeadlines(self.limits.timeout_s)

        async def work(endpoint: Any, job: list[tuple[Key, Any]]) -> None:
            if len(job) == 1:
                await self._discover_one(*job[0], deadlines, endpoint)
            else:
                await self._discover_batch(job, deadlines, endpoint)

        try:
            await drain(queues, self.limits.per_endpoint,
                        min(self.limits.total, DISCOVERY_WORKERS), work)
        finally:
            deadlines.close()

    def _record(self, key: Key, outcome: CapabilitySet | PowerplaneError) -> None:
        """What discovery found for ``key``: its set, or the error (and its words)."""
        self.rules.invalidate()
        if isinstance(outcome, CapabilitySet):
            self.caps[key] = outcome
            self.errors.pop(key, None)
        else:
            self.caps[key] = str(outcome)
            self.errors[key] = outcome

    async def _discover_one(
        self, key: Key, target: Any, deadlines: SharedDeadlines, endpoint: Any
    ) -> None:
        name = key[0]
        try:
            caps = await self.calls.call(name, "capabilities", target, deadlines=deadlines,
                                         endpoint=endpoint)
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
        self, job: Sequence[tuple[Key, Any]], deadlines: SharedDeadlines, endpoint: Any
    ) -> None:
        """One ``capabilities_batch`` call for every target of ``job`` (one channel and
        endpoint); each target gets its own outcome, or the call's error."""
        name = job[0][0][0]
        targets = [target for _, target in job]
        try:
            outcomes = await self.calls.call(name, "capabilities_batch", targets[0], targets,
                                             deadlines=deadlines, endpoint=endpoint)
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
        caps, errors = self.caps, self.errors
        self.rules.invalidate()  # as _record does, once for the batch
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
