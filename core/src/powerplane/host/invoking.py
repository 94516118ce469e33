"""Invoking verbs: the rule checked again at dispatch, the guard, one node or a fleet.

:class:`Invoker` plans a request (the rule decided again from what discovery holds, never
the cached offer; then the lifecycle's :class:`InvokeGuard` once for every node the rule
allowed), and dispatches what was allowed: one node, or a fleet by per-endpoint worker
queues (:func:`~powerplane.scheduling.slots_of`, :func:`~powerplane.scheduling.run_workers`)
with one shared deadline timer and ``invoke_batch`` for channels that have it. Every verb
leaves through the one call path, :meth:`~powerplane.host.calls.Calls.each`: sent at most once,
never retried. :class:`InvokeResult` and :class:`Plan` are what it returns.

Already in that state: a device may refuse an idempotent verb because the machine is
already where the verb leads (iDRAC answers a power-on of a machine that is on with HTTP
409; an IPMI BMC with completion code 0xD5, "not supported in present state"). A power-on
or shutdown refused by the device (:class:`~powerplane.errors.RefusedByDevice`) is read
back once through the same channel (:data:`IDEMPOTENT`): when the readback says the state
the verb leads to, the verb is reported done, with a detail that says the device was
already there and quotes its refusal, and the readback in the result; otherwise (another
state, unknown, or the read failed) the refusal stands. Never done without that readback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

from powerplane.authority.actions import action_for_verb
from powerplane.authority.identity import Identity
from powerplane.authority.policy import Decision
from powerplane.authority.service import Authority
from powerplane.capabilities import Verb
from powerplane.channel import Acceptance, PowerState
from powerplane.config import Deployment
from powerplane.errors import (
    AuditNotRecorded,
    ChannelError,
    NotOffered,
    PowerplaneError,
    RefusedByDevice,
)
from powerplane.host.calls import Job, Method
from powerplane.host.discovery import Discovery, spec_of
from powerplane.host.reading import Reader, expected
from powerplane.nodes import NodeSpec
from powerplane.recovery import VerbOffer
from powerplane.scheduling import SharedDeadlines, run_workers, slots_of

__all__ = ["GUARDED", "IDEMPOTENT", "MAX_WAIT_S", "Checked", "InvokeGuard", "InvokeResult",
           "Invoker", "Plan", "check_reason", "check_wait", "parse_verb"]

log = logging.getLogger("powerplane.host")

GUARDED = frozenset({Verb.REBOOT, Verb.SHUTDOWN, Verb.TERMINATE})
"""The verbs an :class:`InvokeGuard` is asked about (they take a node out of service)."""

IDEMPOTENT = frozenset({Verb.POWER_ON, Verb.SHUTDOWN})
"""The verbs a device may refuse because the machine is already there (read back then)."""

MAX_WAIT_S = 86_400.0
"""The longest readback wait (a day)."""


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
        return expected(self.verb)

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


def parse_verb(verb: Verb | str) -> Verb:
    """``verb`` as a :class:`Verb` (a string parsed)."""
    return Verb.parse(verb) if isinstance(verb, str) else verb


def check_reason(reason: str) -> None:
    """Refuse an empty reason."""
    if not reason or not reason.strip():
        raise ValueError("a reason is required for every power verb")


def check_wait(wait: float) -> float:
    """A readback wait: finite, 0 (do not read) to a day."""
    value = float(wait)
    if math.isnan(value) or not 0 <= value <= MAX_WAIT_S:
        raise ValueError(f"wait must be a number of seconds from 0 to {MAX_WAIT_S:g}, "
                         f"not {wait!r}")
    return value


Done = Callable[[str, "InvokeResult | PowerplaneError"], None]


@dataclass(slots=True)
class Checked:
    """What :meth:`Invoker.columns` found: the refused nodes (node -> error), the policy's
    decision per allowed node, what the guard said, and the allowed nodes in order, as
    columns: node, channel, target, the rule's offer."""

    refused: dict[str, PowerplaneError]
    decisions: dict[str, Decision]
    said: str = "no lifecycle guard configured"
    nodes: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    targets: list[Any] = field(default_factory=list)
    offers: list[VerbOffer] = field(default_factory=list)


class _Specs(Sequence[tuple[str, NodeSpec]]):
    """``(node, spec)`` of known nodes for the policy, each pair made as it is read (a
    fleet's pairs are not kept through the call)."""

    __slots__ = ("_known", "_names")

    def __init__(self, names: list[str], known: Mapping[str, NodeSpec]) -> None:
        self._names = names
        self._known = known

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, index: int) -> tuple[str, NodeSpec]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, NodeSpec]]: ...

    def __getitem__(
        self, index: int | slice
    ) -> tuple[str, NodeSpec] | list[tuple[str, NodeSpec]]:
        known = self._known
        if isinstance(index, slice):
            return [(n, known[n]) for n in self._names[index]]
        name = self._names[index]
        return name, known[name]

    def __iter__(self) -> Iterator[tuple[str, NodeSpec]]:
        known = self._known
        for name in self._names:
            yield name, known[name]


class Invoker:
    """The verbs of one host (see the module docstring)."""

    def __init__(self, deployment: Deployment, discovery: Discovery, reader: Reader,
                 guard: InvokeGuard | None, authority: Authority) -> None:
        self.deployment = deployment
        self.authority = authority
        self.limits = deployment.limits
        self.discovery = discovery
        self.calls = discovery.calls
        self.reader = reader
        self.guard = guard

    # -- the rule at dispatch ----------------------------------------------------------------
    def check(self, node: str, verb: Verb) -> tuple[NodeSpec, VerbOffer]:
        """The rule, decided again at dispatch from what discovery holds now (the cache's
        per-node verdicts, never the offer object): the offer, or the refusal raised."""
        spec = spec_of(self.deployment, node)
        offer = self.discovery.rules.verdicts(node, spec)[verb]
        if not offer.offered:
            if offer.cause == "channel":
                raise self._undiscovered(node, verb, offer)
            raise NotOffered(node, verb.value, offer.reason)
        return spec, offer

    def _undiscovered(self, node: str, verb: Verb, offer: VerbOffer) -> PowerplaneError:
        """A verb withheld because a channel could not be discovered: that channel's failure."""
        err = self.discovery.error(node)
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

    async def plan(
        self, nodes: Sequence[str], verb: Verb, reason: str, hazard_reason: str | None,
        identity: Identity | None = None,
    ) -> dict[str, Plan | PowerplaneError]:
        """``PowerHost.plan`` (``verb`` and ``reason`` checked)."""
        refused, allowed, said, _ = await self.checked(nodes, verb, reason, hazard_reason,
                                                       identity)
        out: dict[str, Plan | PowerplaneError] = dict(refused)
        for node, channel, target, offer in allowed:
            out[node] = Plan(node, verb, channel, target, offer.graceful, said, offer.recovery)
        return {n: out[n] for n in dict.fromkeys(nodes)}

    async def checked(
        self, nodes: Sequence[str], verb: Verb, reason: str, hazard_reason: str | None = None,
        identity: Identity | None = None,
    ) -> tuple[dict[str, PowerplaneError], list[tuple[str, str, Any, VerbOffer]], str,
               dict[str, Decision]]:
        """:meth:`plan`'s checks: (refused node -> error, allowed (node, channel, target,
        offer) in order, what the guard said, the policy's decision per allowed node).
        The policy first (who may take the verb's action on each node: a denial is
        recorded and never upgraded), then the rule for every node the policy allowed,
        then the guard once for every node the rule allowed."""
        found = await self.columns(nodes, verb, reason, hazard_reason, identity)
        allowed = list(zip(found.nodes, found.channels, found.targets, found.offers,
                           strict=True))
        return found.refused, allowed, found.said, found.decisions

    async def columns(
        self, nodes: Sequence[str], verb: Verb, reason: str, hazard_reason: str | None = None,
        identity: Identity | None = None,
    ) -> Checked:
        """:meth:`checked`, the allowed nodes as columns (a fleet call makes no object per
        node to hold what it already has: each object it keeps through the call is one
        more for the collector to walk)."""
        refused: dict[str, PowerplaneError] = {}
        decisions: dict[str, Decision] = {}
        known = self.deployment.nodes
        asked = _Specs([n for n in dict.fromkeys(nodes) if n in known], known)
        if asked:
            decided = await self.authority.authorize(action_for_verb(verb), asked, identity,
                                                     reason=reason)
            for node, decision in decided.items():
                if isinstance(decision, PowerplaneError):
                    refused[node] = decision
                else:
                    decisions[node] = decision
        await self.discovery.ensure([n for n in nodes if n not in refused])
        check = self.check
        found = Checked(refused, decisions)
        names, channels, targets, offers = (found.nodes, found.channels, found.targets,
                                            found.offers)
        for node in dict.fromkeys(nodes):
            if node in refused:
                continue
            try:
                spec, offer = check(node, verb)
            except PowerplaneError as exc:
                refused[node] = exc
                continue
            channel = offer.channel
            assert channel is not None
            names.append(node)
            channels.append(channel)
            targets.append(_target(spec, channel))
            offers.append(offer)
        guard = self.guard
        if guard is not None and verb in GUARDED and names:
            verdicts = await guard(list(names), verb, reason, hazard_reason=hazard_reason)
            found.said = "allowed by the lifecycle guard"
            if verdicts:
                keep = []
                for i, node in enumerate(names):
                    refusal = verdicts.get(node)
                    if refusal is not None:
                        refused[node] = refusal
                    else:
                        keep.append(i)
                if len(keep) < len(names):
                    found.nodes = [names[i] for i in keep]
                    found.channels = [channels[i] for i in keep]
                    found.targets = [targets[i] for i in keep]
                    found.offers = [offers[i] for i in keep]
        elif guard is not None:
            found.said = f"the lifecycle guard does not restrict {verb.value}"
        return found

    def audit(self, nodes: Sequence[str], decisions: Sequence[Decision], reason: str,
              identity: Identity | None) -> None:
        """Make the records of the acts about to be performed on ``nodes`` (each allowed by
        its decision) durable, all in one batch (raises
        :class:`~powerplane.errors.AuditNotRecorded`: then none is performed)."""
        if not nodes:
            return
        who = identity or self.authority.identity
        authority = self.authority
        authority.record(authority.records_of(who, decisions[0].action, nodes, decisions,
                                              reason))

    # -- dispatch ----------------------------------------------------------------------------
    async def dispatch(self, plan: Plan, decision: Decision | None, reason: str,
                       wait: float = 0.0, identity: Identity | None = None) -> InvokeResult:
        """Send a verb the policy (``decision``), the rule and the guard have just allowed:
        its audit record first, durable, or nothing is sent (``decision`` None: the act's
        record is already durable)."""
        if decision is not None:
            self.audit((plan.node,), (decision,), reason, identity)
        log.info("invoke %s %s via %s: %s", plan.verb.value, plan.node, plan.channel, reason)
        try:
            acceptance = await self.calls.call(plan.channel, plan.verb.method, plan.target)
        except RefusedByDevice as exc:
            there = await self.already_there(plan.node, plan.verb, plan.channel, plan.target,
                                             exc)
            if there is None:
                raise
            return there
        detail = acceptance.detail if isinstance(acceptance, Acceptance) else ""
        readback = (await self.reader.await_state(plan.node, plan.verb, wait)
                    if wait > 0 else None)
        return InvokeResult(plan.node, plan.verb, plan.channel, True, readback, detail)

    async def already_there(self, node: str, verb: Verb, channel: str, target: Any,
                            refusal: PowerplaneError) -> InvokeResult | None:
        """``verb`` refused by the device: done if it is idempotent and one readback through
        ``channel`` says the machine is already where it leads (see the module docstring);
        None: the refusal stands."""
        if verb not in IDEMPOTENT or not isinstance(refusal, RefusedByDevice):
            return None
        try:
            reading = await self.calls.call(channel, "read_power_state", target, node=node)
        except PowerplaneError:
            return None
        state = getattr(reading, "state", None)
        if state is not expected(verb):
            return None
        words = refusal.message
        log.info("invoke %s %s via %s: refused by the device, already %s", verb.value, node,
                 channel, state.value)
        return InvokeResult(node, verb, channel, True, state,
                            f"already {state.value}: the device refused {verb.value} "
                            f"({words}) and a readback confirmed {state.value}")

    async def stream(
        self, nodes: Sequence[str], verb: Verb, reason: str, wait: float,
        hazard_reason: str | None = None, identity: Identity | None = None,
    ) -> AsyncIterator[tuple[str, InvokeResult | PowerplaneError]]:
        """``PowerHost.invoke_stream``'s iterator (arguments checked)."""
        queue: asyncio.Queue[tuple[str, InvokeResult | PowerplaneError] | None] = (
            asyncio.Queue())
        runner = asyncio.create_task(
            self.each(nodes, verb, reason, wait,
                      lambda node, outcome: queue.put_nowait((node, outcome)),
                      hazard_reason, identity))
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

    async def each(
        self, nodes: Sequence[str], verb: Verb, reason: str, wait: float, done: Done,
        hazard_reason: str | None = None, identity: Identity | None = None,
    ) -> None:
        """Plan ``nodes``, then dispatch every allowed one, calling ``done`` per node.

        Per-endpoint worker queues: at most ``limits.per_endpoint`` calls per endpoint and
        ``limits.total`` in all, by that many workers at most; one shared deadline timer for
        the batch; each worker is one :meth:`~powerplane.host.calls.Calls.each`, the one
        call path, over the endpoint slots and queues (each channel's method looked up once);
        readbacks (``wait`` > 0) run beside the workers so they do not hold an endpoint's
        slot.
        """
        found = await self.columns(nodes, verb, reason, hazard_reason, identity)
        for node, error in found.refused.items():
            done(node, error)
        acting, decisions = found.nodes, found.decisions
        try:  # every act's record durable before the first is sent, or none is sent
            self.audit(acting, [decisions[node] for node in acting], reason, identity)
        except AuditNotRecorded as exc:
            for node in acting:
                done(node, exc)
            return
        method, verb_name = verb.method, verb.value  # enum attributes cost: read once
        calls = self.calls
        channels = calls.channels
        batches: dict[str, list[tuple[str, Any]]] = {}
        queues: dict[Any, deque[Job]] = {}
        fns: dict[str, Method | None] = {}
        traits = channels.traits
        targets = (dict(zip(acting, found.targets, strict=True)) if verb in IDEMPOTENT
                   else {})
        for node, name, target in zip(acting, found.channels, found.targets, strict=True):
            trait = traits.get(name)  # the channel was created by discovery
            if trait is not None and trait.batch_invoke:
                batches.setdefault(name, []).append((node, target))
                continue
            if name not in fns:
                try:
                    fns[name] = calls.method(name, method)
                except PowerplaneError:
                    fns[name] = None  # each call says why
            queues.setdefault(channels.endpoint(name, target), deque()).append(
                (node, name, target, ()))
        del found, acting, decisions
        if not queues and not batches:
            return
        deadlines = SharedDeadlines(self.limits.timeout_s)
        readbacks: set[asyncio.Task[None]] = set()

        async def read_back(node: str, name: str, detail: str) -> None:
            readback = await self.reader.await_state(node, verb, wait)
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

        def logged(job: Job) -> None:
            log.info("invoke %s %s via %s: %s", verb_name, job[0], job[1], reason)

        def failed(node: str, name: str, error: PowerplaneError) -> None:
            if verb in IDEMPOTENT and isinstance(error, RefusedByDevice):
                task = asyncio.create_task(settle(node, name, error))
                readbacks.add(task)
                task.add_done_callback(readbacks.discard)
                return
            done(node, error)

        async def settle(node: str, name: str, error: PowerplaneError) -> None:
            target = targets[node]
            there = await self.already_there(node, verb, name, target, error)
            done(node, there if there is not None else error)

        def worker() -> Awaitable[None]:
            return calls.each(slots, queues, method, deadlines, accepted, failed, fns,
                              logged if info else None)

        async def batch(name: str, members: list[tuple[str, Any]]) -> None:
            if info:
                for node, _ in members:
                    log.info("invoke %s %s via %s (batch): %s", verb_name, node, name, reason)
            try:
                outcomes = await calls.call(name, "invoke_batch", members[0][1], verb,
                                            [t for _, t in members])
            except PowerplaneError as exc:
                for node, _ in members:
                    done(node, exc)
                return
            for (node, _), outcome in zip(members, outcomes, strict=True):
                if isinstance(outcome, PowerplaneError):
                    failed(node, name, outcome)
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


def _target(spec: NodeSpec, channel: str) -> Any:
    for ref in spec.channels:
        if ref.channel == channel:
            return ref.target
    raise KeyError(channel)
