"""``Lifecycle``: requests with ceremony, the reconcile loop, and reads, over one store.

::

    async with PowerHost(deployment) as host:     # powerplane.PowerHost: the runtime's
        lc = Lifecycle.for_host(host)
        m = await lc.request("node-1", "reboot", Ceremony(reason=..., confirm_node=..., ...))
        await lc.run(until_idle=True)

Every request is first decided by the host's authority (the policy, for the requester's
authenticated identity: the ceremony's ``identity``, else this process's OS user), before
its ceremony is looked at; a denial is recorded and raised
(:class:`~powerplane.errors.PolicyDenied`). Each accepted request appends an audit record
with that identity (what a person asked for) in the same transaction that records it; the
status records what the machine then did. The lifecycle's host records its direct acts
in the same store: the runtime composed its authority with the store's trail
(:mod:`powerplane.runtime`), and :meth:`Lifecycle.for_host` holds that same store open.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from powerplane.authority.actions import action_for_intent
from powerplane.authority.identity import Identity
from powerplane.authority.policy import Decision
from powerplane.errors import (
    PolicyDenied,
    PowerplaneError,
    UnknownNode,
)
from powerplane.host import Host
from powerplane.lifecycle import admission, guard
from powerplane.lifecycle.audit import Action, AuditRecord
from powerplane.lifecycle.ceremony import (
    Ceremony,
    CeremonyRequired,
    MaintenanceRefused,
    Step,
    describe,
    missing,
    reason_problem,
    step_problem,
)
from powerplane.lifecycle.model import (
    AbandonRequest,
    ConditionType,
    DispatchOutcome,
    Intent,
    MaintenanceSpec,
    NodeMaintenance,
    Phase,
    Preflight,
    QuorumNumbers,
    Resolution,
    ReturnRequest,
    utcnow,
)
from powerplane.lifecycle.phases import park_phase
from powerplane.lifecycle.ports import (
    MaintenanceStore,
    Ports,
    SharedStore,
    build_ports,
    call_store,
)
from powerplane.lifecycle.reconciler import Reconciler, Result
from powerplane.lifecycle.store import (
    ConcurrentChange,
    NotFound,
    StoreConflict,
)
from powerplane.settings.lifecycle import LifecycleConfig

__all__ = ["Lifecycle", "NotResolvable", "NotReturnable"]


class NotReturnable(NotFound):
    """Return to service applies to a parked maintenance; others are abandoned."""


class NotResolvable(NotFound):
    """Resolve applies to a maintenance awaiting a person's word on a dispatch."""


class Lifecycle:
    """The maintenance lifecycle of one deployment."""

    def __init__(
        self,
        host: Host,
        config: LifecycleConfig,
        store: MaintenanceStore,
        ports: Ports | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.host = host
        self.config = config
        self.store = store
        self.ports = ports if ports is not None else build_ports(host, config)
        self.clock = clock
        self.reconciler = Reconciler(store, self.ports, config, clock)
        self._shared: SharedStore | None = None
        """The runtime's shared store this lifecycle holds (:meth:`for_host`), if any."""

    @classmethod
    def for_host(
        cls,
        host: Host,
        clock: Callable[[], dt.datetime] = utcnow,
        *,
        create_store: bool = True,
    ) -> Lifecycle:
        """The lifecycle of the host's deployment (its ``lifecycle:`` section), over the
        store its guard and its audit trail share (held open until :meth:`close`).

        ``host`` is the runtime's (:class:`powerplane.PowerHost`): a host of a deployment
        with a ``lifecycle:`` section always carries the lifecycle's guard, which knows
        the store. With ``create_store=False`` a store that does not exist yet is not
        created: the lifecycle reads an empty store (for a dry run).
        """
        from powerplane.lifecycle.direct import LifecycleGuard

        guard = host.guard
        if not isinstance(guard, LifecycleGuard):
            from powerplane.errors import ConfigError, ConfigProblem

            raise ConfigError([ConfigProblem(
                "lifecycle", "this deployment has no lifecycle: section (for example: "
                "lifecycle: {store: ./powerplane.db, cluster: {type: simulated}})")],
                source=host.deployment.source)
        store = guard.stores.hold(create=create_store)
        lc = cls(host, guard.config, store, clock=clock)
        lc._shared = guard.stores
        return lc

    def close(self) -> None:
        """Stop readbacks, release this runner, close the store."""
        self.reconciler.close()
        if self._shared is not None:
            self._shared.release(self.store)
        else:
            self.store.close()

    # -- requests ----------------------------------------------------------------------------
    async def preflight(
        self, node: str, intent: Intent | str
    ) -> tuple[Preflight, guard.SafetyVerdict]:
        """What a request would do: pods, budgets, quorum numbers, hazard, the power offer."""
        intent = Intent(intent)
        if node not in self.host.nodes:
            raise UnknownNode(node, list(self.host.nodes))
        return await admission.preflight(self.ports, self.config, self.store, node, intent)

    def _who(self, ceremony: Ceremony) -> Identity:
        """The requester: the ceremony's identity (an embedder that authenticated its
        caller), else the one the store's platform authenticated (the API server's user
        of the ``kubernetes`` store), else this process's OS user; with the ceremony's
        ``on_behalf_of`` text beside it."""
        who = ceremony.identity
        if who is None:
            vouch = getattr(self.store, "authenticated_identity", None)
            who = vouch() if callable(vouch) else self.host.authority.identity
        assert isinstance(who, Identity)
        text = (ceremony.on_behalf_of or "").strip()
        return dataclasses.replace(who, on_behalf_of=text) if text else who

    async def _authorize(self, node: str, action: Action, ceremony: Ceremony) -> Decision:
        """The policy's decision for the requester (before the ceremony is looked at: no
        one types a node name for an act they may not take); a denial is recorded and
        raised."""
        if node not in self.host.nodes:
            raise UnknownNode(node, list(self.host.nodes))
        return await self.host.authority.require(
            action, node, self.host.nodes[node], self._who(ceremony), reason=ceremony.reason)

    async def _decide(
        self, node: str, intent: Intent, ceremony: Ceremony,
    ) -> tuple[Preflight | None, guard.SafetyVerdict | None, PowerplaneError | None,
               Decision | None]:
        """The pre-flight, the verdict, the error a request would be rejected with, and the
        policy's decision."""
        if node not in self.host.nodes:
            raise UnknownNode(node, list(self.host.nodes))
        try:
            decision = await self._authorize(node, action_for_intent(intent), ceremony)
        except PolicyDenied as exc:
            return None, None, exc, None
        pre, verdict, error = await self._guarded(node, intent)
        return pre, verdict, error, decision

    async def _guarded(
        self, node: str, intent: Intent
    ) -> tuple[Preflight | None, guard.SafetyVerdict | None, PowerplaneError | None]:
        found = await admission.derive(self.ports, self.config, self.store, node, intent)
        return found.preflight, found.verdict, found.error

    async def admit(
        self, node: str, intent: Intent | str, ceremony: Ceremony | None = None,
    ) -> tuple[Preflight, guard.SafetyVerdict, Decision]:
        """The pre-flight, verdict and policy decision of a request the rules admit; else
        raises why not.

        What :meth:`request` checks before the ceremony: the policy for the requester
        (3, recorded), an active maintenance (exit 2), the guard (3), the power offer (3
        withheld by the rule, 1 undiscoverable channel, 2 a channel whose config is bad).
        """
        pre, verdict, error, decision = await self._decide(
            node, Intent(intent), ceremony or Ceremony(reason=""))
        if error is not None:
            raise error
        assert pre is not None and verdict is not None and decision is not None
        return pre, verdict, decision

    async def dry_run(
        self, node: str, intent: Intent | str, ceremony: Ceremony
    ) -> tuple[dict[str, Any], int]:
        """What :meth:`request` would do and need, recording nothing.

        Returns the document (``maintenance request --dry-run -o json``) and the exit
        code: 0 when the request would be accepted once its ceremony is complete, else
        the code of the error it would be rejected with (3 refused, 2 already active,
        1 when the channel that would carry the verb could not be discovered, 2 when its
        config is bad).
        Unknown nodes raise as for a request.
        """
        intent = Intent(intent)
        pre, verdict, error, _ = await self._decide(node, intent, ceremony)
        action = action_for_intent(intent)
        hazard = verdict.hazard if verdict is not None else False
        steps = describe(node, action, hazard, ceremony, self.config.reason_policy)
        doc: dict[str, Any] = {
            "dryRun": True,
            "node": node,
            "intent": intent.value,
            "action": action.value,
            "accepted": error is None,
            "refusal": None,
            "verdict": verdict.reason if verdict is not None else None,
            "hazard": hazard,
            "preflight": pre.model_dump(mode="json", by_alias=True) if pre else None,
            "ceremony": steps,
            "ceremonyComplete": all(step["supplied"] for step in steps),
            "recorded": False,
        }
        if error is not None:
            refusal: dict[str, Any] = {"error": type(error).__name__, "message": str(error),
                                       "exitCode": error.exit_code}
            numbers = getattr(error, "numbers", None)
            if isinstance(numbers, QuorumNumbers):
                refusal["quorum"] = numbers.model_dump()
            doc["refusal"] = refusal
        return doc, (0 if error is None else error.exit_code)

    async def request(
        self, node: str, intent: Intent | str, ceremony: Ceremony
    ) -> NodeMaintenance:
        """Accept a maintenance request (or raise why not); appends its audit record."""
        intent = Intent(intent)
        pre, verdict, decision = await self.admit(node, intent, ceremony)
        action = action_for_intent(intent)
        problems = missing(node, action, verdict.hazard, ceremony, self.config.reason_policy)
        if problems:
            raise CeremonyRequired(problems)
        who = self._who(ceremony)
        stamp = self.clock().strftime("%Y%m%d%H%M%S")
        m = NodeMaintenance(
            name=f"{node}-{intent.value}-{stamp}-{uuid.uuid4().hex[:6]}",
            spec=MaintenanceSpec(
                node=node,
                intent=intent,
                reason=ceremony.reason.strip(),
                requested_by=who.user,
                requester_groups=list(who.groups),
                requested_via=who.via,
                on_behalf_of=who.on_behalf_of,
                preflight=pre,
                ack_preflight=ceremony.ack_preflight,
                confirm_node=ceremony.confirm_node,
                hazard_reason=ceremony.hazard_reason,
            ),
        )
        m.status.hazard = verdict.hazard
        if getattr(self.store, "deferred_admission", False):
            # a store any client may create objects in: the executor admits every request
            # (lock, policy, guard, ceremony), this one as any other
            m.status.phase = Phase.PENDING
        detail = ""
        if verdict.hazard:
            detail = f"hazard acknowledged: {(ceremony.hazard_reason or '').strip()}"
        record = self._record(who, decision, node, m.spec.reason, m.name, detail)
        return self.store.create(m, record)

    def _record(self, who: Identity, decision: Decision, node: str, reason: str,
                maintenance: str, detail: str = "", action: Action | None = None,
                ) -> AuditRecord:
        rec = self.host.authority.record_of(who, decision, node, reason,
                                            maintenance=maintenance, detail=detail,
                                            action=action)
        return dataclasses.replace(rec, at=self.clock())

    def _active(self, node: str) -> NodeMaintenance:
        m = self.store.active_for(node)
        if m is None:
            raise NotFound(f"node {node} has no active maintenance")
        return m

    async def return_to_service(
        self, node: str, ceremony: Ceremony, machine_on: bool = False
    ) -> NodeMaintenance:
        """Ask for a parked maintenance to return the node (``servers:uncordon``; a
        machine left off is powered on under ``servers:power-on``, also asked)."""
        decision = await self._authorize(node, Action.UNCORDON, ceremony)
        problems = missing(node, Action.UNCORDON, False, ceremony, self.config.reason_policy)
        if problems:
            raise CeremonyRequired(problems)
        who = self._who(ceremony)
        power_on: Decision | None = None
        for _ in range(5):
            m = self._active(node)
            parked = (
                m.phase is park_phase(m.spec.intent)
                or m.phase is Phase.RETURNING  # e.g. adding a person's power-on confirmation
                or m.is_true(ConditionType.EVACUATION_PAUSED)
            )
            if not parked:
                raise NotReturnable(
                    f"maintenance {m.name} is in phase {m.phase}; return applies to a "
                    f"maintenance parked at {park_phase(m.spec.intent) or 'no phase'}; "
                    "use abandon to stop it"
                )
            if m.phase is Phase.POWERED_OFF and not machine_on and power_on is None:
                power_on = await self._authorize(node, Action.POWER_ON, ceremony)
            m.spec.return_request = ReturnRequest(
                actor=who.user, reason=ceremony.reason.strip(),
                machine_confirmed=machine_on, at=self.clock(),
            )
            records = [self._record(who, decision, node, ceremony.reason.strip(), m.name,
                                    "machine confirmed on by a person" if machine_on else "")]
            if m.phase is Phase.POWERED_OFF and not machine_on and power_on is not None:
                records.append(self._record(who, power_on, node, ceremony.reason.strip(),
                                            m.name))
            try:
                self.store.update(m, records[0])
            except StoreConflict:
                continue
            for extra in records[1:]:
                self.store.append_audit(extra)
            return m
        raise ConcurrentChange(f"maintenance of {node} kept changing; try again")

    async def abandon(self, node: str, ceremony: Ceremony) -> NodeMaintenance:
        """Abandon the node's active maintenance; it returns through ``Returning``."""
        decision = await self._authorize(node, Action.ABANDON, ceremony)
        problems = missing(node, Action.ABANDON, False, ceremony, self.config.reason_policy)
        if problems:
            raise CeremonyRequired(problems)
        who = self._who(ceremony)
        for _ in range(5):
            m = self._active(node)
            if m.spec.abandon is None:
                m.spec.abandon = AbandonRequest(
                    actor=who.user, reason=ceremony.reason.strip(), at=self.clock()
                )
            record = self._record(who, decision, node, ceremony.reason.strip(), m.name)
            try:
                return self.store.update(m, record)
            except StoreConflict:
                continue
        raise ConcurrentChange(f"maintenance of {node} kept changing; try again")

    async def resolve(self, node: str, ceremony: Ceremony, applied: bool) -> NodeMaintenance:
        """A person settles the dispatch evidence could not tell (``servers:maintenance-resolve``).

        ``applied``: the verb took effect; the maintenance moves on, recording who said so.
        Not applied: the reconciler sends the verb once more (through the dispatcher, under
        the guard). The ceremony is a reason and the typed node name. A resolution never
        upgrades a refusal: a maintenance held by a safety rule is refused (exit 3).
        """
        decision = await self._authorize(node, Action.RESOLVE, ceremony)
        problems = [p for p in (
            reason_problem(ceremony.reason, self.config.reason_policy),
            step_problem(Step.TYPED_NODE, node, Action.RESOLVE, ceremony,
                         self.config.reason_policy),
        ) if p]
        if problems:
            raise CeremonyRequired(problems)
        who = self._who(ceremony)
        for _ in range(5):
            m = self._active(node)
            pending = [d for d in m.status.dispatches
                       if d.outcome is DispatchOutcome.INDETERMINATE]
            if not pending:
                raise NotResolvable(
                    f"maintenance {m.name} has no dispatch awaiting resolution "
                    f"(phase {m.phase})"
                )
            if m.is_true(ConditionType.SAFETY_HOLD):
                hold = m.condition(ConditionType.SAFETY_HOLD)
                raise MaintenanceRefused(node, hold.message if hold else "safety hold",
                                         m.status.refusal)
            d = pending[-1]
            if any(r.attempt_id == d.attempt_id for r in m.spec.resolutions):
                raise NotResolvable(f"{d.verb} of {m.name} is already resolved; "
                                    "`powerplane maintenance run` carries it out")
            m.spec.resolutions.append(Resolution(
                actor=who.user, reason=ceremony.reason.strip(), applied=applied,
                attempt_id=d.attempt_id, at=self.clock(),
            ))
            record = self._record(
                who, decision, node, ceremony.reason.strip(), m.name,
                f"{d.verb} attempt {d.attempt} applied" if applied else
                f"{d.verb} attempt {d.attempt} not applied: sent once more")
            try:
                return self.store.update(m, record)
            except StoreConflict:
                continue
        raise ConcurrentChange(f"maintenance of {node} kept changing; try again")

    # -- reconcile ---------------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        return await self.reconciler.reconcile(name)

    async def run_pass(self) -> dict[str, Result]:
        """Reconcile every active maintenance once, ``concurrency`` at a time.

        What the nodes under maintenance use and is not discovered yet is discovered
        first, together (one ``capabilities_batch`` per channel and endpoint where the
        channel has one), from the pass's one read of the store: a host started for no
        node (``PowerHost(..., nodes=())``) discovers those nodes only, never the fleet.
        """
        active = self.store.active()
        refuse = getattr(self.store, "refuse_unreadable", None)
        if callable(refuse):  # an object no one could act on is refused, never ignored
            refuse()
        release = getattr(self.store, "release_deleted", None)
        if callable(release):  # a deleted maintenance that had ended: let it go, audited
            await call_store(self.store, release)
        known = self.host.nodes
        await self.host.discover([m.node for m in active if m.node in known])
        sem = asyncio.Semaphore(self.config.concurrency)
        results: dict[str, Result] = {}

        async def one(name: str) -> None:
            async with sem:
                results[name] = await self.reconciler.reconcile(name)

        await asyncio.gather(*(one(m.name) for m in active))
        return results

    async def run(self, until_idle: bool = True, max_passes: int | None = None) -> int:
        """Reconcile until nothing can advance (``until_idle``) or forever; returns passes."""
        passes = 0
        while True:
            results = await self.run_pass()
            passes += 1
            if max_passes is not None and passes >= max_passes:
                return passes
            if until_idle and all(r in (Result.PARKED, Result.DONE) for r in results.values()):
                return passes
            if any(r is Result.ADVANCED for r in results.values()):
                continue
            await asyncio.sleep(self.config.tick_s)
