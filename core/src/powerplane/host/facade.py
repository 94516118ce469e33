"""``Host``: the asyncio-native engine that discovers, offers, invokes and reads back.

An application never builds one itself: :class:`powerplane.PowerHost` (the runtime's,
:mod:`powerplane.runtime`) is a ``Host`` composed with its deployment's authority and,
where the deployment has a ``lifecycle:`` section, the lifecycle's guard. The engine
refuses to exist without that guard: a ``Host`` of a deployment with a ``lifecycle:``
section and no guard raises ``ValueError`` (no way to leave the guard off by forgetting it).

The façade: each method checks its arguments and hands the work to the part of the
package that does it (:mod:`~powerplane.host.discovery`, :mod:`~powerplane.host.invoking`,
:mod:`~powerplane.host.reading`, all calling channels through the one bounded call of
:mod:`~powerplane.host.calls`). Every channel call is bounded per endpoint
(``limits.per_endpoint``) and in total (``limits.total``), and times out after
``limits.timeout_s``. A verb is sent at most once per request: the host never retries a
verb. Any exception a plugin lets escape unmapped becomes a
:class:`~powerplane.errors.ProtocolError` naming its type.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from powerplane.authority.identity import Identity
from powerplane.authority.service import Authority
from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import Channel
from powerplane.config import Deployment, deployment_problems
from powerplane.errors import ConfigError, PowerplaneError
from powerplane.host.calls import Calls
from powerplane.host.channels import Channels
from powerplane.host.discovery import Discovery, spec_of
from powerplane.host.invoking import (
    InvokeGuard,
    Invoker,
    InvokeResult,
    Plan,
    check_reason,
    check_wait,
    parse_verb,
)
from powerplane.host.reading import NodeReading, Reader
from powerplane.nodes import NodeSpec
from powerplane.plugins import Registry
from powerplane.readback import PowerOffWatch
from powerplane.recovery import NodeOffer, VerbOffer

__all__ = ["Host", "has_lifecycle"]

log = logging.getLogger("powerplane.host")


def has_lifecycle(deployment: Deployment) -> bool:
    """Whether ``deployment`` has a ``lifecycle:`` section (even an empty one)."""
    return bool(deployment.lifecycle) or "lifecycle" in (deployment.raw or {})


class Host:
    """Discovers channels' capabilities, offers verbs under the rule, invokes them.

    ``guard``: asked before every reboot, shutdown and terminate; required (not None) for a
    deployment with a ``lifecycle:`` section. ``authority``: who may act and where acts
    are recorded. ``nodes``: start for these nodes only (see :meth:`start`); None, every
    node. ``registry``: the plugins whose deployment checks :meth:`start` runs (default:
    the process-wide registry).
    """

    def __init__(
        self,
        deployment: Deployment,
        *,
        guard: InvokeGuard | None,
        authority: Authority,
        nodes: Iterable[str] | None = None,
        registry: Registry | None = None,
    ) -> None:
        if guard is None and has_lifecycle(deployment):
            raise ValueError(
                f"{deployment.source} has a lifecycle: section, and a host of it needs the "
                "lifecycle's guard: build it with powerplane.PowerHost (or "
                "powerplane.runtime.open_deployment), which attaches it")
        self._registry = registry
        self._authority = authority
        self.limits = deployment.limits
        self._channels = Channels(deployment)
        self._calls = Calls(deployment, self._channels)
        self._discovery = Discovery(deployment, self._calls)
        self._reader = Reader(deployment, self._discovery)
        self._invoker = Invoker(deployment, self._discovery, self._reader, guard, authority)
        self._deployment = deployment
        self._scope = None if nodes is None else tuple(nodes)
        """What ``async with`` starts for: None every node, else only these (see start)."""
        self._started = False

    @property
    def deployment(self) -> Deployment:
        """The deployment this host serves; a new one assigned is what every later call
        looks nodes and channels up in (the limits, the guard and the authority stay those
        the host was built with: one whose ``lifecycle:`` or ``policy:`` section differs is
        refused with ``ValueError``)."""
        return self._deployment

    @deployment.setter
    def deployment(self, deployment: Deployment) -> None:
        old = self._deployment
        if (has_lifecycle(deployment) != has_lifecycle(old)
                or dict(deployment.lifecycle) != dict(old.lifecycle)
                or deployment.policy != old.policy or deployment.audit != old.audit):
            raise ValueError("a host keeps the lifecycle, policy and audit sections it was "
                             "built with: build a new host for a deployment that changes them")
        self._deployment = deployment
        for part in (self._channels, self._calls, self._discovery, self._reader,
                     self._invoker):
            part.deployment = deployment
        self._discovery.rules.recovery = deployment.recovery

    @property
    def authority(self) -> Authority:
        """The policy every act is decided by and the audit every act is recorded in."""
        return self._authority

    @property
    def guard(self) -> InvokeGuard | None:
        """Asked before every reboot, shutdown and terminate (the lifecycle's guard; None
        for a deployment without a ``lifecycle:`` section). Fixed at construction."""
        return self._invoker.guard

    # -- life --------------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
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

        Before any channel is created, every registered deployment check runs
        (:func:`~powerplane.config.deployment_problems`: the ``metal3`` guard refuses a
        direct channel to a BMC a BareMetalHost manages): a problem raises
        :class:`~powerplane.errors.ConfigError` (exit 2) and nothing is created or sent. A
        check that cannot ask now (its API server unreachable) is a warning on the
        ``powerplane.host`` logger, naming the check's error, and the start goes on.
        """
        if not self._started:
            await self._checked()
            self._calls.start()
            self._started = True
            if nodes is None:
                self._channels.create_all()
                await self.refresh()
                return
        if nodes is not None:
            await self.discover(nodes)

    async def _checked(self) -> None:
        """The registered deployment checks, run as :meth:`start` says."""
        try:
            problems = await deployment_problems(self._deployment, self._registry)
        except ConfigError:
            raise
        except PowerplaneError as exc:
            log.warning("warning: the deployment checks could not run (%s); starting without "
                        "them: %s not checked", exc, self._deployment.source)
            return
        if problems:
            raise ConfigError(problems, source=self._deployment.source)

    async def close(self) -> None:
        """Close every channel (each plugin logs out its sessions), concurrently.

        Each close is bounded: by ``limits.timeout_s``, or by
        :data:`~powerplane.host.channels.CLOSE_GRACE_S` for a channel with a call the host
        gave up on and when the host closes because its task was cancelled (an interrupt):
        the rest is left to the channel's worker thread. The counts of repeated denials
        still folding are written first (:meth:`Authority.flush_denials
        <powerplane.authority.service.Authority.flush_denials>`: never lost).
        """
        self._authority.flush_denials()
        await self._channels.close(self.limits.timeout_s, self._calls.gave_up)
        self._calls.gave_up.clear()
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
        await self._discovery.discover(nodes, again=True)

    async def discover(self, nodes: Iterable[str] | None = None) -> None:
        """Discover what ``nodes`` use (every node: None) and is not discovered yet.

        Concurrent; each channel is created on first use, and a (channel, target) being
        discovered by another call is awaited, never asked twice. Raises ``UnknownNode``
        for a name the deployment does not have.
        """
        await self._discovery.discover(nodes, again=False)

    def discovery_error(self, node: str) -> PowerplaneError | None:
        """The first discovery error among ``node``'s channels, in preference order."""
        return self._discovery.error(node)

    def capabilities(self, channel: str, target: Any) -> CapabilitySet | str:
        """What discovery found for ``(channel, target)``: a set, or why there is none."""
        return self._discovery.capabilities(channel, target)

    def channel(self, name: str) -> Channel:
        """The live channel object named ``name``, created on first use (KeyError: none)."""
        channel = self._channels.get(name)
        if channel is None:
            raise KeyError(name)
        return channel

    @property
    def nodes(self) -> Mapping[str, NodeSpec]:
        return self.deployment.nodes

    # -- the rule ----------------------------------------------------------------------------
    def offer_for(self, node: str) -> NodeOffer:
        """Per verb: offered (channel, graceful, recovery) or withheld (reason). Pure."""
        return self._discovery.offer(node)

    def offers(self, nodes: Iterable[str] | None = None) -> list[NodeOffer]:
        """``offer_for`` for each node (all nodes by default)."""
        names = list(nodes) if nodes is not None else list(self.deployment.nodes)
        return [self.offer_for(n) for n in names]

    def _decide_fresh(self, node: str) -> dict[Verb, VerbOffer]:
        """The rule evaluated now, from the discovered capabilities, without any cache."""
        return self._discovery.rules.decide_fresh(spec_of(self.deployment, node))

    # -- invocation --------------------------------------------------------------------------
    async def invoke(
        self, node: str, verb: Verb | str, reason: str, *, wait: float = 0.0,
        hazard_reason: str | None = None, identity: Identity | None = None,
        audited: bool = False,
    ) -> InvokeResult:
        """Run one verb on one node under the policy, the rule and the guard. Sent at most
        once; never retried.

        The policy decides the verb's action (``servers:reboot``) for ``identity`` (default:
        the host authority's, this process's OS user; an embedder that authenticated its
        caller itself passes that identity): a denial raises
        :class:`~powerplane.errors.PolicyDenied` (exit 3) and is recorded. The accepted
        act's audit record is made durable before the verb is sent
        (:class:`~powerplane.errors.AuditNotRecorded`: nothing sent). ``audited``: the
        act's record is already durable (the lifecycle executing a request it recorded
        when it accepted it): the policy is still asked, no second record is written.

        ``wait`` > 0 reads the node back until it reaches the state the verb leads to or the
        wait ends (``readback`` stays None when ``wait`` is 0; see ``InvokeResult.reached``).
        A timeout after the request may have left raises
        :class:`~powerplane.errors.OutcomeUnknown`, never a plain failure.
        ``hazard_reason``: why the call may consume the last of the quorum margin (the
        guard refuses such a call without one).
        """
        verb = parse_verb(verb)
        check_reason(reason)
        wait = check_wait(wait)
        refused, allowed, said, decisions = await self._invoker.checked(
            [node], verb, reason, hazard_reason, identity)
        if node in refused:
            raise refused[node]
        _, channel, target, offer = allowed[0]
        plan = Plan(node, verb, channel, target, offer.graceful, said, offer.recovery)
        return await self._invoker.dispatch(plan, None if audited else decisions[node],
                                            reason, wait, identity)

    async def plan(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *,
        hazard_reason: str | None = None, identity: Identity | None = None,
    ) -> dict[str, Plan | PowerplaneError]:
        """What ``invoke``/``invoke_many`` would send for each node, sending nothing.

        Runs exactly the checks they run: the policy for ``identity`` (a denial is
        recorded), the rule decided again (not the cached offer), then the guard for
        reboot, shutdown and terminate. Each node maps to its
        :class:`Plan` or to the error invoking it would raise. What these nodes use and
        is not discovered yet is discovered first (every channel of each node, so the
        rule sees them all).
        """
        verb = parse_verb(verb)
        check_reason(reason)
        return await self._invoker.plan(nodes, verb, reason, hazard_reason, identity)

    async def invoke_many(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *, wait: float = 0.0,
        progress: Callable[[str, InvokeResult | PowerplaneError], None] | None = None,
        hazard_reason: str | None = None, identity: Identity | None = None,
    ) -> dict[str, InvokeResult | PowerplaneError]:
        """Run one verb on many nodes concurrently, bounded per endpoint and in total.

        One node's failure never stops the others; the result maps each node to its
        :class:`InvokeResult` or its error. The policy (for ``identity``, as
        :meth:`invoke`), the rule and the guard run first, for all the nodes together;
        every accepted act's record is made durable before the first verb is sent.
        Channels that offer ``invoke_batch(verb, targets)`` receive their nodes in one
        batch. ``progress`` is called as each node finishes. The work in
        flight is bounded by the limits, not the fleet (see :meth:`invoke_stream`).
        """
        verb = parse_verb(verb)
        check_reason(reason)
        wait = check_wait(wait)
        # every node's slot made now, in the order given, so the result needs no reordering
        results: dict[str, Any] = dict.fromkeys(nodes)

        def done(node: str, outcome: InvokeResult | PowerplaneError) -> None:
            results[node] = outcome
            if progress is not None:
                progress(node, outcome)

        await self._invoker.each(nodes, verb, reason, wait, done, hazard_reason, identity)
        return results

    def invoke_stream(
        self, nodes: Sequence[str], verb: Verb | str, reason: str, *, wait: float = 0.0,
        hazard_reason: str | None = None, identity: Identity | None = None,
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
        verb = parse_verb(verb)
        check_reason(reason)
        wait = check_wait(wait)
        return self._invoker.stream(nodes, verb, reason, wait, hazard_reason, identity)

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
        return await self._reader.read(node, every_channel, config_errors=True)

    async def read_many(
        self, nodes: Sequence[str], *, every_channel: bool = True,
        progress: Callable[[str, NodeReading], None] | None = None,
    ) -> dict[str, NodeReading]:
        """``read_power_state`` for many nodes concurrently (bounded like every call).

        A config error a channel raises is raised once every node has been read (the
        first in the order given): the deployment is bad input.
        """
        return await self._reader.read_many(nodes, every_channel, progress)

    async def boot_marker(self, node: str) -> tuple[str, str] | None:
        """``(channel, marker)`` from the first channel of ``node`` that publishes one.

        A marker changes on every boot of the machine; ``None`` when no channel offers
        one or none answered (a failed read is never taken for a marker).
        """
        return await self._reader.boot_marker(node)

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
        return self._reader.confirm_power_off(
            node, lambda: self.read_power_state(node), accepted_at, window, cadence)
