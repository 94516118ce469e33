"""The level-triggered, idempotent reconciler.

``reconcile(name)`` reads the maintenance and the world through the ports and advances
at most what it can prove, persisting each step with the version it read (a write that
loses a race is dropped and the object read again). It may be called any number of
times, by several runners, and after a crash at any point.

Every power verb goes through :class:`~powerplane.lifecycle.dispatch.Dispatcher` (record
with evidence, persist, send once, settle an unanswered one by evidence or by a person).
A cluster or storage port that raises :class:`~powerplane.lifecycle.ports.PermanentPortError`
fails the maintenance with its message; any other port error is tried again next pass.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from enum import Enum
from typing import Any

from powerplane.authority.actions import action_for_intent
from powerplane.authority.audit import AuditRecord
from powerplane.capabilities import Verb
from powerplane.errors import PolicyDenied, PowerplaneError
from powerplane.lifecycle import admission, guard
from powerplane.lifecycle.crash import crashpoint
from powerplane.lifecycle.dispatch import Dispatcher, Drive, runner_alive
from powerplane.lifecycle.evacuation import EvacuationStatus, evacuation_status
from powerplane.lifecycle.ledger import ledger_of, park, regressions
from powerplane.lifecycle.model import (
    ConditionStatus,
    ConditionType,
    DispatchOutcome,
    Intent,
    NodeMaintenance,
    Phase,
    set_condition,
    utcnow,
)
from powerplane.lifecycle.phases import transition
from powerplane.lifecycle.ports import MaintenanceStore, PermanentPortError, Ports, call_store
from powerplane.lifecycle.storage import apply_writes
from powerplane.lifecycle.store import NotFound, StoreConflict, StoreError
from powerplane.readback import PowerOffConfirmed, PowerOffWatch
from powerplane.settings.lifecycle import LifecycleConfig

__all__ = ["Reconciler", "Result", "runner_alive"]

log = logging.getLogger("powerplane.lifecycle")

P = Phase
C = ConditionType
S = ConditionStatus

class Result(str, Enum):
    """What one reconcile ended on."""

    ADVANCED = "advanced"
    """It made a step (and may make another at once)."""
    WAITING = "waiting"
    """It waits on the world (pods leaving, a node coming back, a readback running)."""
    PARKED = "parked"
    """It waits on a person (return, abandon, a confirmation) or a safety hold."""
    DONE = "done"
    """It is in a terminal phase (or gone: its object was removed)."""


def _snapshot(m: NodeMaintenance) -> dict[str, Any]:
    """The status as plain values (fresh dicts and lists, nothing shared with ``m``), to
    tell whether a step changed it, at a third of the cost of its JSON.

    Two snapshots are equal exactly when the status's JSON (what the store writes) is, for
    the values a step sets: enums, strings, ints, bools, None and aware times from the
    clock. (Python equality would also call equal a time moved to the same instant in
    another offset, or an int set to the equal float; no step does either, and the test
    of every flow compares both at every step.)"""
    return m.status.model_dump()


class Reconciler:
    """Advances maintenances through their phases against the ports."""

    def __init__(
        self,
        store: MaintenanceStore,
        ports: Ports,
        config: LifecycleConfig,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.watches: dict[str, PowerOffWatch] = {}
        """Running power-off readbacks, by maintenance name."""
        self.ledger = ledger_of(store)
        """The store's dispatch ledger (:mod:`.ledger`), held against every status read."""
        self.dispatcher = Dispatcher(ports, config, clock, self._save, self.ledger)
        """The only sender of power verbs."""
        self._unsaved_cordon: dict[str, str] = {}
        """Maintenances (name -> node) whose admission cordoned the node in a pass whose
        write was then lost (a 409: the object changed, or went): until a write of it
        past ``Pending`` lands, the cordon is this runner's to undo if the request turns
        out abandoned or gone before it was admitted (see :meth:`_undo_cordon`)."""

    @property
    def ports(self) -> Ports:
        return self.dispatcher.ports

    @ports.setter
    def ports(self, ports: Ports) -> None:
        self.dispatcher.ports = ports

    @property
    def runner_id(self) -> str:
        """This runner, as recorded on its dispatches."""
        return self.dispatcher.runner_id

    def close(self) -> None:
        """Stop every readback; dispatches this runner left without outcome become settleable."""
        for name in list(self.watches):
            self._drop_watch(name)
        self.dispatcher.close()

    # -- entry -------------------------------------------------------------------------------
    async def reconcile(self, name: str, max_steps: int = 32) -> Result:
        """Advance ``name`` as far as the world allows now."""
        result = Result.WAITING
        m: NodeMaintenance | None = None
        before: dict[str, Any] = {}
        for _ in range(max_steps):
            # Read at the start and after a conflict; after this runner's own write, ``m`` is
            # the store's current version (a write names the version it read, so anyone's
            # change in between makes the next write, and a dispatch's record, a conflict).
            if m is None:
                try:
                    m = await call_store(self.store, self.store.get, name)
                except NotFound:  # gone: nothing left to do (a lost admission's cordon
                    await self._undo_cordon(name)  # undone, nothing else on its record)
                    self._drop_watch(name)
                    return Result.DONE
                before = _snapshot(m)
                if self.ledger is not None and not m.phase.terminal:
                    try:
                        if await self._regressed(m):
                            return Result.PARKED
                    except StoreConflict:
                        m = None
                        continue
            if m.phase.terminal:
                self._drop_watch(name)
                return Result.DONE
            # A step writes the status only (the spec is a person's, the name, creation
            # time and version the store's), so the status alone tells whether it changed
            # anything; after a write it is what was written (the store changes only the
            # version), so the next step compares against it without taking it again.
            try:
                was = m.phase
                result = await self._step(m)
                if was in (P.PENDING, P.REQUESTED) and m.status.cordoned:
                    self._unsaved_cordon[name] = m.node  # until its write lands
                after = _snapshot(m)
                # One status write per phase: a phase the pass only passes through is
                # written with the next write. An admission is written with the cordon
                # that follows at once (its lock and request record are already
                # durable), as a request made Requested by its store would take;
                # ``Draining`` with ``Drained`` where the pods are gone at once (else
                # with the drain's progress); ``Drained`` of a power intent with its
                # dispatch's record (the write before the verb is sent); ``Rebooting``
                # with the reboot's observation where the node is back at once (else with
                # the wait for it: its dispatch's outcome is kept in this runner until
                # then, and a crash before leaves a recorded dispatch with no outcome,
                # which is settled by evidence, never sent again); ``Returning`` after an
                # observed reboot with what ends it (``Complete``, or the wait for the
                # node). A pass that stops there instead (parked, waiting, a
                # port's error) writes it then; a crash in between redoes the step (a
                # cordon, a drain or an uncordon again: nothing is sent twice). Each
                # phase skipped is past ``Requested`` as the one written before it, so
                # another maintenance's guard counts this node taken all the same.
                admitted = was is P.PENDING and m.phase is P.REQUESTED
                draining = was is P.CORDONED and m.phase is P.DRAINING
                dispatching = (was is not P.DRAINED and m.phase is P.DRAINED
                               and m.spec.intent.powers)
                sent = was is P.DRAINED and m.phase is P.REBOOTING
                rebooted = was is P.REBOOTING and m.phase is P.RETURNING
                if after != before and not (
                        (admitted or draining or dispatching or sent or rebooted)
                        and result is Result.ADVANCED):
                    await self._save(m)
                    before = after
            except StoreConflict:
                m = None
                continue  # another runner moved it: read again
            except StoreError:
                raise  # the store itself failed: nothing can be recorded, stop here
            except PermanentPortError as exc:  # it will not pass: fail with its message
                log.warning("%s: %s", name, exc)
                return await self._fail_permanently(name, exc)
            except PowerplaneError as exc:  # a port failed: say so, try again next pass
                log.warning("%s: %s", name, exc)
                await self._record_error(name, exc)
                return Result.WAITING
            if m.phase.terminal:
                self._drop_watch(name)
                return Result.DONE
            if result is not Result.ADVANCED:
                return result
        return result

    async def _record_error(self, name: str, exc: PowerplaneError) -> None:
        try:
            fresh = await call_store(self.store, self.store.get, name)
            if fresh.status.last_error == str(exc) and fresh.is_true(C.PORT_ERROR):
                return  # already recorded: no write per retry
            fresh.status.last_error = str(exc)
            set_condition(fresh, C.PORT_ERROR, S.TRUE, type(exc).__name__, str(exc))
            await call_store(self.store, self.store.update, fresh)
        except StoreConflict:
            pass

    async def _fail_permanently(self, name: str, exc: PermanentPortError) -> Result:
        """A port error that will not pass fails the maintenance with its message."""
        for _ in range(5):
            fresh = await call_store(self.store, self.store.get, name)
            if fresh.phase.terminal:
                return Result.DONE
            set_condition(fresh, C.PORT_ERROR, S.TRUE, type(exc).__name__, str(exc))
            await self._fail(fresh, str(exc))  # ends an evacuation it began (best effort)
            try:
                await call_store(self.store, self.store.update, fresh)
            except StoreConflict:
                continue
            self._drop_watch(name)
            return Result.DONE
        return Result.WAITING

    async def _regressed(self, m: NodeMaintenance) -> bool:
        """Hold ``m``'s status against the ledger (:mod:`.ledger`): a regression parks it for
        a person (written, and audited once, with what differed). True: parked now."""
        assert self.ledger is not None
        entries = await call_store(self.store, self.ledger.ledger, m)
        problems = regressions(m, entries)
        if not problems:
            return False
        if not park(m, entries, problems, self.clock()):
            return True  # parked already, and audited then: nothing more to write
        log.warning("%s: the status contradicts the dispatch ledger: %s", m.name,
                    "; ".join(problems))
        # the executor, as its platform authenticated it where the store knows (the API
        # server's user of the kubernetes store), else as its authority names it
        vouch = getattr(self.store, "authenticated_identity", None)
        who = (await call_store(self.store, vouch) if callable(vouch)
               else self.ports.host.authority.identity)
        record = AuditRecord(
            actor=who.user, groups=who.groups, via=who.via,
            action=action_for_intent(m.spec.intent), reason=m.spec.reason, node=m.node,
            maintenance=m.name, outcome="regression",
            rule="the status contradicted the dispatch ledger: parked for a person, "
                 "nothing sent",
            detail="; ".join(problems), at=self.clock())
        await call_store(self.store, self.store.update, m, record)
        return True

    async def _save(self, m: NodeMaintenance) -> None:
        await call_store(self.store, self.store.update, m)
        if m.phase is not P.PENDING:
            self._unsaved_cordon.pop(m.name, None)  # written past Pending: the record's now
        crashpoint(f"phase:{m.phase.value}")

    async def _undo_cordon(self, name: str) -> None:
        """Uncordon the node an admission of ``name`` cordoned in a pass whose write was
        lost, now that the request reads as never admitted and abandoned (or is gone): the
        cordon is on no record but this runner's, so nothing else would undo it. (A runner
        that stopped in between left the node's lock naming the request: a person sees it.)"""
        node = self._unsaved_cordon.pop(name, None)
        if node is not None and self.ports.cluster.applicable:
            log.warning("%s: its admission cordoned %s and was never written (the request "
                        "was abandoned or deleted meanwhile): uncordoning it", name, node)
            await self.ports.cluster.uncordon(node)

    def _drop_watch(self, name: str) -> None:
        watch = self.watches.pop(name, None)
        if watch is not None and not watch.done():
            watch.cancel()

    def _elapsed(self, since: dt.datetime | None) -> float:
        if since is None:
            return 0.0
        return (self.clock() - since).total_seconds()

    # -- one step ----------------------------------------------------------------------------
    async def _step(self, m: NodeMaintenance) -> Result:
        port_error = m.condition(C.PORT_ERROR)
        if port_error is not None and port_error.status is S.TRUE:
            set_condition(m, C.PORT_ERROR, S.FALSE, "Recovered", port_error.message)
        self._observe_watch(m)
        if m.spec.abandon is not None and m.phase is P.PENDING:  # nothing was recorded
            await self._undo_cordon(m.name)  # (a lost admission's cordon: undone)
            a = m.spec.abandon
            m.status.refusal_reason = f"abandoned by {a.actor} before it was admitted"
            transition(m, P.REFUSED, f"abandoned by {a.actor}: {a.reason}")
            return Result.ADVANCED
        if m.spec.abandon is not None and m.phase is not P.RETURNING:
            a = m.spec.abandon
            set_condition(m, C.ABANDONED, S.TRUE, "Abandoned", f"by {a.actor}: {a.reason}")
            transition(m, P.RETURNING, f"abandoned by {a.actor}: {a.reason}")
            return Result.ADVANCED
        if m.spec.abandon is not None and not m.is_true(C.ABANDONED):
            # abandoned while it was returning already: nothing changes but the record of it
            a = m.spec.abandon
            set_condition(m, C.ABANDONED, S.TRUE, "Abandoned",
                          f"by {a.actor}: {a.reason} (it was returning already)")
        handler = {
            P.PENDING: self._pending,
            P.REQUESTED: self._requested,
            P.CORDONED: self._cordoned,
            P.DRAINING: self._draining,
            P.DRAINED: self._drained,
            P.REBOOTING: self._rebooting,
            P.POWERED_OFF: self._powered_off,
            P.RETURNING: self._returning,
        }[m.phase]
        return await handler(m)

    async def _safety(self, m: NodeMaintenance) -> guard.SafetyVerdict:
        others = [(node, phase) for name, node, phase
                  in await call_store(self.store, self.store.active_phases) if name != m.name]
        return await guard.check(
            self.ports, self.config, m.node, others, count_requested=False
        )

    async def _hold_if_unsafe(self, m: NodeMaintenance) -> bool:
        """Hold (with the numbers) when a safety rule fails after the node was cordoned."""
        verdict = await self._safety(m)
        if verdict.allowed:
            if m.condition(C.SAFETY_HOLD) is not None:
                set_condition(m, C.SAFETY_HOLD, S.FALSE, "Cleared", verdict.reason)
            return False
        set_condition(m, C.SAFETY_HOLD, S.TRUE, "Virtual" if verdict.virtual else "Quorum",
                      verdict.reason)
        m.status.refusal = verdict.numbers
        m.status.refusal_reason = verdict.reason
        return True

    def _returnable(self, m: NodeMaintenance) -> bool:
        return m.spec.return_request is not None

    async def _authorized(self, m: NodeMaintenance) -> PolicyDenied | None:
        """The policy asked again, where the act is executed (authoritative): the
        requester's right to the maintenance's action now, or the denial."""
        spec = self.ports.host.nodes.get(m.node)
        found = (await self.ports.host.authority.authorize(
            action_for_intent(m.spec.intent), [(m.node, spec)], m.spec.requester,
            reason=m.spec.reason))[m.node]
        if isinstance(found, PolicyDenied):
            return found
        return None

    async def _hold_if_denied(self, m: NodeMaintenance) -> bool:
        """Hold (with the rule) when the requester lost the right after the node was
        cordoned: nothing more is done until a person with the right abandons or returns
        it, or the right comes back."""
        denial = await self._authorized(m)
        if denial is None:
            cond = m.condition(C.AUTHORIZED)
            if cond is not None and cond.status is not S.TRUE:
                set_condition(m, C.AUTHORIZED, S.TRUE, "Allowed", "the policy allows it again")
            return False
        set_condition(m, C.AUTHORIZED, S.FALSE, "Denied", str(denial))
        m.status.refusal_reason = str(denial)
        return True

    async def _pending(self, m: NodeMaintenance) -> Result:
        """Admit or refuse a request recorded by any client (:mod:`.admission`)."""
        await admission.admit(m, self.ports, self.config, self.store)
        return Result.ADVANCED

    async def _requested(self, m: NodeMaintenance) -> Result:
        denial = await self._authorized(m)
        if denial is not None:
            m.status.refusal_reason = str(denial)
            set_condition(m, C.AUTHORIZED, S.FALSE, "Denied", str(denial))
            transition(m, P.REFUSED, str(denial))
            return Result.DONE
        verdict = await self._safety(m)
        if not verdict.allowed:
            m.status.refusal = verdict.numbers
            m.status.refusal_reason = verdict.reason
            transition(m, P.REFUSED, verdict.reason)
            return Result.DONE
        m.status.hazard = m.status.hazard or verdict.hazard
        m.status.quorum = verdict.numbers
        set_condition(m, C.QUORUM_GUARD, S.TRUE, "Hazard" if verdict.hazard else "Kept",
                      verdict.reason)
        if self.ports.cluster.applicable:
            await self.ports.cluster.cordon(m.node)
            m.status.cordoned = True
            set_condition(m, C.CORDONED, S.TRUE, "Cordoned", f"{m.node} is unschedulable")
        else:
            set_condition(m, C.CORDONED, S.UNKNOWN, "NotApplicable",
                          "no cluster: nothing to cordon")
        transition(m, P.CORDONED, "cordoned")
        return Result.ADVANCED

    async def _cordoned(self, m: NodeMaintenance) -> Result:
        if m.spec.intent is Intent.CORDON or self._paused(m):
            if self._returnable(m):
                transition(m, P.RETURNING, "return to service requested")
                return Result.ADVANCED
            return Result.PARKED
        if await self._hold_if_unsafe(m) or await self._hold_if_denied(m):
            return Result.PARKED
        if m.spec.intent.powers:
            result = await self._evacuate(m)
            if result is not None:
                return result
        m.status.drain_started_at = self.clock()
        transition(m, P.DRAINING, "draining")
        return Result.ADVANCED

    def _paused(self, m: NodeMaintenance) -> bool:
        cond = m.condition(C.EVACUATION_PAUSED)
        return cond is not None and cond.status is S.TRUE

    async def _evacuate(self, m: NodeMaintenance) -> Result | None:
        """None when evacuation is done (or not needed); else what to report."""
        storage = self.ports.storage
        cond = m.condition(C.EVACUATED)
        if cond is not None and cond.status is S.TRUE:
            return None
        if storage.hook is None:
            await storage.read(m.node)  # logs "nothing to evacuate" once per node
            set_condition(m, C.EVACUATED, S.TRUE, "NoStorage",
                          "no storage system: nothing to evacuate")
            return None
        if m.status.evacuation_started_at is None:
            if await storage.read(m.node) is None:
                set_condition(m, C.EVACUATED, S.TRUE, "NoStorageObject",
                              "the node has no storage object: nothing to evacuate")
                return None
            m.status.evacuation_started_at = self.clock()
            try:
                await apply_writes(storage, m.node, storage.hook.begin())
            except PowerplaneError as exc:
                try:
                    await self._end_evacuation(m)
                except PowerplaneError:
                    log.warning("%s: ending the evacuation after a failed begin failed", m.name)
                msg = f"beginning the evacuation failed: {exc}; evacuation ended, not draining"
                set_condition(m, C.EVACUATION_PAUSED, S.TRUE, "BeginFailed", msg)
                m.status.last_error = msg
                return Result.PARKED
            set_condition(m, C.EVACUATED, S.FALSE, "Evacuating", "eviction requested")
            return Result.ADVANCED
        remaining = await storage.replicas_remaining(m.node)
        elapsed = self._elapsed(m.status.evacuation_started_at)
        status = evacuation_status(remaining, elapsed, self.config.evacuation_timeout_s)
        if status is EvacuationStatus.DONE:
            set_condition(m, C.EVACUATED, S.TRUE, "Evacuated", "no replica lives only here")
            return None
        if status is EvacuationStatus.PAUSED:
            await self._end_evacuation(m)
            msg = (f"{remaining} replica(s) still only on {m.node} after "
                   f"{self.config.evacuation_timeout_s:g} s; evacuation ended, not draining")
            set_condition(m, C.EVACUATION_PAUSED, S.TRUE, "Timeout", msg)
            set_condition(m, C.EVACUATED, S.FALSE, "Paused", msg)
            return Result.PARKED
        set_condition(m, C.EVACUATED, S.FALSE, "Evacuating",
                      f"{remaining} replica(s) still only on {m.node}")
        return Result.WAITING

    async def _draining(self, m: NodeMaintenance) -> Result:
        if await self._hold_if_unsafe(m):
            return Result.PARKED
        if m.status.drain_started_at is None:
            m.status.drain_started_at = self.clock()
        progress = await self.ports.cluster.drain(m.node)
        if not progress.applicable:
            set_condition(m, C.DRAINED, S.UNKNOWN, "NotApplicable", progress.describe())
            transition(m, P.DRAINED, "drain not applicable")
            return Result.ADVANCED
        if progress.done:
            set_condition(m, C.DRAINED, S.TRUE, "Drained", progress.describe())
            transition(m, P.DRAINED, "no pods left")
            return Result.ADVANCED
        if self._elapsed(m.status.drain_started_at) >= self.config.drain_deadline_s:
            m.status.last_error = (
                f"drain deadline of {self.config.drain_deadline_s:g} s passed; "
                + progress.describe()
            )
            set_condition(m, C.DRAINED, S.FALSE, "DeadlineExceeded", progress.describe())
            await self._fail(m, m.status.last_error)
            return Result.DONE
        reason = "BlockedByPDB" if progress.blocked else "Evicting"
        set_condition(m, C.DRAINED, S.FALSE, reason, progress.describe())
        return Result.WAITING

    async def _end_evacuation(self, m: NodeMaintenance) -> None:
        """End an evacuation this maintenance began (cancel eviction first, then schedule)."""
        storage = self.ports.storage
        if (
            storage.hook is not None
            and m.status.evacuation_started_at is not None
            and not m.status.evacuation_ended
        ):
            await apply_writes(storage, m.node, storage.hook.end())
            m.status.evacuation_ended = True

    async def _fail(self, m: NodeMaintenance, why: str) -> None:
        """Fail: every path that began an evacuation ends it (best effort), then Failed."""
        try:
            await self._end_evacuation(m)
        except PowerplaneError as exc:
            why = f"{why}; ending the evacuation also failed: {exc}"
        m.status.last_error = why
        transition(m, P.FAILED, why)

    async def _safe_to_send(self, m: NodeMaintenance) -> bool:
        return not (await self._hold_if_unsafe(m) or await self._hold_if_denied(m))

    async def _drained(self, m: NodeMaintenance) -> Result:
        if m.spec.intent is Intent.DRAIN:
            if self._returnable(m):
                transition(m, P.RETURNING, "return to service requested")
                return Result.ADVANCED
            return Result.PARKED
        verb = Verb.REBOOT if m.spec.intent is Intent.REBOOT else Verb.SHUTDOWN
        state, d = await self.dispatcher.drive(m, verb, may_send=self._safe_to_send)
        if state is Drive.WAITING:
            return Result.WAITING
        if state in (Drive.PARKED, Drive.NOT_APPLIED) or d is None:
            return Result.PARKED
        if state is Drive.FAILED:
            await self._fail(m, m.status.last_error or f"{verb} failed: {d.detail}")
            return Result.DONE
        when = d.outcome_at if d.outcome is DispatchOutcome.ACCEPTED else d.recorded_at
        if verb is Verb.REBOOT:
            m.status.power_wait_started_at = when
            set_condition(m, C.NODE_READY, S.FALSE, "Rebooting", "waiting for the node")
            transition(m, P.REBOOTING, f"reboot {d.outcome}")
        else:
            m.status.powered_off_at = when
            set_condition(m, C.POWER_OFF_CONFIRMED, S.FALSE, "ReadingBack", "reading back")
            transition(m, P.POWERED_OFF, f"shutdown {d.outcome}")
        return Result.ADVANCED

    async def _rebooting(self, m: NodeMaintenance) -> Result:
        """Ready alone is not a reboot: the boot marker must change where one exists."""
        if await self.ports.cluster.is_ready(m.node):
            d = m.dispatch_for(Verb.REBOOT.value)
            before = d.before if d is not None else None
            if before is None or before.boot_marker is None:
                set_condition(m, C.REBOOT_OBSERVED, S.UNKNOWN, "NoBootMarker",
                              "ready; no boot marker to show a reboot happened")
                set_condition(m, C.NODE_READY, S.TRUE, "Ready", "the node is ready again")
                transition(m, P.RETURNING, "node ready; no boot marker to show a reboot")
                return Result.ADVANCED
            assert d is not None
            seen = await self.dispatcher.evidence(m.node, d.channel, power=False)
            if (seen.boot_marker is not None and seen.boot_marker != before.boot_marker
                    and seen.boot_marker_source == before.boot_marker_source):
                set_condition(
                    m, C.REBOOT_OBSERVED, S.TRUE, "BootMarkerChanged",
                    f"boot marker {before.boot_marker} -> {seen.boot_marker} "
                    f"(from {seen.boot_marker_source})",
                )
                set_condition(m, C.NODE_READY, S.TRUE, "Ready", "the node is ready again")
                transition(m, P.RETURNING, "node ready after reboot (boot marker changed)")
                return Result.ADVANCED
            set_condition(
                m, C.REBOOT_OBSERVED, S.FALSE, "BootMarkerUnchanged",
                f"ready, but the boot marker still reads {seen.boot_marker or 'nothing'} "
                f"(was {before.boot_marker} from {before.boot_marker_source})",
            )
        if self._elapsed(m.status.power_wait_started_at) >= self.config.ready_timeout_s:
            observed = m.condition(C.REBOOT_OBSERVED)
            why = (f"{m.node} was not ready {self.config.ready_timeout_s:g} s after the reboot"
                   if observed is None else
                   f"no reboot of {m.node} observed {self.config.ready_timeout_s:g} s after "
                   f"the reboot was accepted: {observed.message}")
            m.status.last_error = why
            await self._fail(m, why)
            return Result.DONE
        return Result.WAITING

    def _observe_watch(self, m: NodeMaintenance) -> None:
        """Carry a power-off readback's status into the ``PowerOffConfirmed`` condition."""
        cond = m.condition(C.POWER_OFF_CONFIRMED)
        if cond is None or cond.status is not S.FALSE:
            self._drop_watch(m.name)
            return
        watch = self.watches.get(m.name)
        if watch is None:
            assert m.status.powered_off_at is not None
            watch = self.ports.host.confirm_power_off(
                m.node,
                m.status.powered_off_at,
                self.config.readback_window_s,
                self.config.readback_cadence_s,
            )
            self.watches[m.name] = watch
        if watch.status is not PowerOffConfirmed.FALSE:
            reason = "ObservedOff" if watch.status is PowerOffConfirmed.TRUE else "NotObserved"
            set_condition(m, C.POWER_OFF_CONFIRMED, S(watch.status.value), reason,
                          watch.detail)
            if watch.status is PowerOffConfirmed.UNKNOWN and watch.detail.endswith(
                "last reading on"
            ):
                set_condition(m, C.MACHINE_READS_ON, S.TRUE, "ReadsOn",
                              f"the machine still reads on ({watch.detail})")
            self.watches.pop(m.name, None)

    async def _powered_off(self, m: NodeMaintenance) -> Result:
        if self._returnable(m):
            transition(m, P.RETURNING, "return to service requested")
            return Result.ADVANCED
        return Result.WAITING if m.name in self.watches else Result.PARKED

    # -- returning, in its steps -------------------------------------------------------------
    async def _returning(self, m: NodeMaintenance) -> Result:
        for step in (self._settle_main_verb, self._power_on, self._wait_ready):
            result = await step(m)
            if result is not None:
                return result
        return await self._complete(m)

    async def _settle_main_verb(self, m: NodeMaintenance) -> Result | None:
        """An abandoned maintenance's unanswered verb is settled (never sent again)."""
        for verb in (Verb.REBOOT, Verb.SHUTDOWN):
            d = m.dispatch_for(verb.value)
            if d is None or (d.outcome is not None and d.outcome.settled):
                continue
            state, _ = await self.dispatcher.drive(m, verb, send=False)
            if state is Drive.WAITING:
                return Result.WAITING
            if state is Drive.PARKED:
                return Result.PARKED
        return None

    def _machine_confirmed(self, m: NodeMaintenance) -> bool:
        return m.spec.return_request is not None and m.spec.return_request.machine_confirmed

    async def _power_on(self, m: NodeMaintenance) -> Result | None:
        """After a power-off: power the machine on (or take a person's word that it is)."""
        if not any(t.to is P.POWERED_OFF for t in m.status.history):
            return None
        pd = m.dispatch_for(Verb.POWER_ON.value)
        if pd is None and self._machine_confirmed(m):
            set_condition(m, C.AWAITING_POWER_ON, S.FALSE, "ConfirmedByPerson",
                          "a person confirmed the machine is back on")
            return None
        if pd is not None and pd.outcome in (DispatchOutcome.ACCEPTED, DispatchOutcome.APPLIED):
            return None
        state, pd = await self.dispatcher.drive(m, Verb.POWER_ON)
        if pd is None:
            set_condition(
                m, C.AWAITING_POWER_ON, S.TRUE, "PowerOnNotOffered",
                "power-on is not offered for this node; once a person has powered it "
                f"on, confirm with: powerplane maintenance return {m.node} --machine-on",
            )
            return Result.PARKED
        if state is Drive.WAITING:
            return Result.WAITING
        if state in (Drive.PARKED, Drive.NOT_APPLIED):
            return Result.PARKED
        if state is Drive.FAILED:
            await self._fail(m, m.status.last_error or f"power-on failed: {pd.detail}")
            return Result.DONE
        when = pd.outcome_at if pd.outcome is DispatchOutcome.ACCEPTED else pd.recorded_at
        m.status.power_wait_started_at = when
        set_condition(m, C.AWAITING_POWER_ON, S.FALSE, "PoweredOn", pd.detail)
        return Result.ADVANCED

    def _powered(self, m: NodeMaintenance) -> bool:
        """Whether a power verb took effect (or may have), so the node must be waited on."""
        took: tuple[DispatchOutcome | None, ...] = (
            DispatchOutcome.ACCEPTED, DispatchOutcome.APPLIED)
        return any(d.outcome in took for d in m.status.dispatches) or any(
            t.to is P.POWERED_OFF for t in m.status.history)

    async def _wait_ready(self, m: NodeMaintenance) -> Result | None:
        if not self._powered(m):
            return None
        ready = await self.ports.cluster.is_ready(m.node)
        if not ready and not (ready is None and self._machine_confirmed(m)):
            if m.status.power_wait_started_at is None:
                m.status.power_wait_started_at = self.clock()
            elif self._elapsed(m.status.power_wait_started_at) >= self.config.ready_timeout_s:
                m.status.last_error = (
                    f"{m.node} was not ready {self.config.ready_timeout_s:g} s after "
                    "power came back"
                )
                await self._fail(m, m.status.last_error)
                return Result.DONE
            set_condition(m, C.NODE_READY, S.FALSE, "Waiting", "waiting for the node")
            return Result.WAITING
        set_condition(m, C.NODE_READY, S.TRUE, "Ready", "the node is ready")
        return None

    async def _complete(self, m: NodeMaintenance) -> Result:
        await self.ports.cluster.uncordon(m.node)
        if self.ports.cluster.applicable:
            set_condition(m, C.CORDONED, S.FALSE, "Uncordoned", f"{m.node} is schedulable")
        await self._end_evacuation(m)
        cond = m.condition(C.POWER_OFF_CONFIRMED)
        if cond is not None and cond.status is S.FALSE:
            set_condition(m, C.POWER_OFF_CONFIRMED, S.UNKNOWN, "Returned",
                          "returned to service before the readback observed off")
        transition(m, P.COMPLETE, "back in service")
        return Result.DONE
