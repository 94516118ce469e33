"""The level-triggered, idempotent reconciler.

``reconcile(name)`` reads the maintenance and the world through the ports and advances
at most what it can prove, persisting each step with the version it read (a write that
loses a race is dropped and the object read again). It may be called any number of
times, by several runners, and after a crash at any point.

At most once: a power verb's dispatch (verb, channel, attempt id, time) is persisted
*before* it is sent. A reconcile that finds a dispatch with no recorded outcome never
sends again: it reads the machine back and records the outcome as indeterminate.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Callable
from enum import Enum

from powerplane.capabilities import Verb
from powerplane.errors import PowerplaneError
from powerplane.lifecycle import guard
from powerplane.lifecycle.crash import crashpoint
from powerplane.lifecycle.evacuation import EvacuationStatus, evacuation_status
from powerplane.lifecycle.model import (
    Condition,
    Dispatch,
    DispatchOutcome,
    Intent,
    NodeMaintenance,
    Phase,
    utcnow,
)
from powerplane.lifecycle.phases import transition
from powerplane.lifecycle.ports import Ports
from powerplane.lifecycle.settings import LifecycleConfig
from powerplane.lifecycle.storage import apply_writes
from powerplane.lifecycle.store import Conflict, Store, StoreError
from powerplane.readback import PowerOffConfirmed, PowerOffWatch

__all__ = ["Reconciler", "Result"]

log = logging.getLogger("powerplane.lifecycle")

P = Phase

_LIVE_RUNNERS: set[str] = set()
"""Runner ids of this process that have not been closed."""

IN_FLIGHT_GRACE_S = 5.0
"""Beyond the host's call timeout, how long a dispatch of another host's runner may stay
without outcome before it is settled by readback."""


def runner_alive(runner: str) -> bool | None:
    """Whether the runner that recorded a dispatch still lives (None: cannot tell)."""
    try:
        host, pid_text, _ = runner.split("/", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if pid == os.getpid():
        return runner in _LIVE_RUNNERS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Result(str, Enum):
    """What one reconcile ended on."""

    ADVANCED = "advanced"
    """It made a step (and may make another at once)."""
    WAITING = "waiting"
    """It waits on the world (pods leaving, a node coming back, a readback running)."""
    PARKED = "parked"
    """It waits on a person (return, abandon, a confirmation) or a safety hold."""
    DONE = "done"
    """It is in a terminal phase."""


def set_condition(
    m: NodeMaintenance, kind: str, status: str, reason: str = "", message: str = ""
) -> None:
    """Set a condition; its transition time moves only when something changed."""
    old = m.status.conditions.get(kind)
    if old is not None and (old.status, old.reason, old.message) == (status, reason, message):
        return
    m.status.conditions[kind] = Condition(
        type=kind, status=status, reason=reason, message=message, last_transition=utcnow()
    )


class Reconciler:
    """Advances maintenances through their phases against the ports."""

    def __init__(
        self,
        store: Store,
        ports: Ports,
        config: LifecycleConfig,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.store = store
        self.ports = ports
        self.config = config
        self.clock = clock
        self.watches: dict[str, PowerOffWatch] = {}
        """Running power-off readbacks, by maintenance name."""
        self._outcomes: dict[str, Dispatch] = {}
        """Outcomes this runner learnt, by attempt id (re-applied if a write of one lost a race)."""
        self.runner_id = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        """This runner, as recorded on its dispatches."""
        _LIVE_RUNNERS.add(self.runner_id)

    def close(self) -> None:
        """Stop every readback; dispatches this runner left without outcome become settleable."""
        for name in list(self.watches):
            self._drop_watch(name)
        _LIVE_RUNNERS.discard(self.runner_id)

    # -- entry -------------------------------------------------------------------------------
    async def reconcile(self, name: str, max_steps: int = 32) -> Result:
        """Advance ``name`` as far as the world allows now."""
        result = Result.WAITING
        for _ in range(max_steps):
            m = self.store.get(name)
            if m.phase.terminal:
                self._drop_watch(name)
                return Result.DONE
            before = m.model_dump_json()
            try:
                result = await self._step(m)
                if m.model_dump_json() != before:
                    self._save(m)
            except Conflict:
                continue  # another runner moved it: read again
            except StoreError:
                raise  # the store itself failed: nothing can be recorded, stop here
            except PowerplaneError as exc:  # a port failed: say so, try again next pass
                log.warning("%s: %s", name, exc)
                self._record_error(name, exc)
                return Result.WAITING
            if m.phase.terminal:
                self._drop_watch(name)
                return Result.DONE
            if result is not Result.ADVANCED:
                return result
        return result

    def _record_error(self, name: str, exc: PowerplaneError) -> None:
        try:
            fresh = self.store.get(name)
            cond = fresh.condition("PortError")
            if fresh.status.last_error == str(exc) and cond is not None and cond.status == "True":
                return  # already recorded: no write per retry
            fresh.status.last_error = str(exc)
            set_condition(fresh, "PortError", "True", type(exc).__name__, str(exc))
            self.store.update(fresh)
        except Conflict:
            pass

    def _save(self, m: NodeMaintenance) -> None:
        self.store.update(m)
        crashpoint(f"phase:{m.phase.value}")

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
        port_error = m.condition("PortError")
        if port_error is not None and port_error.status == "True":
            set_condition(m, "PortError", "False", "Recovered", port_error.message)
        self._observe_watch(m)
        if m.spec.abandon is not None and m.phase is not P.RETURNING:
            a = m.spec.abandon
            set_condition(m, "Abandoned", "True", "Abandoned", f"by {a.actor}: {a.reason}")
            transition(m, P.RETURNING, f"abandoned by {a.actor}: {a.reason}")
            return Result.ADVANCED
        handler = {
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
        others = [(node, phase) for name, node, phase in self.store.active_phases()
                  if name != m.name]
        return await guard.check(
            self.ports, self.config, m.node, others, count_requested=False
        )

    async def _hold_if_unsafe(self, m: NodeMaintenance) -> bool:
        """Hold (with the numbers) when a safety rule fails after the node was cordoned."""
        verdict = await self._safety(m)
        if verdict.allowed:
            if m.condition("SafetyHold") is not None:
                set_condition(m, "SafetyHold", "False", "Cleared", verdict.reason)
            return False
        set_condition(m, "SafetyHold", "True", "Virtual" if verdict.virtual else "Quorum",
                      verdict.reason)
        m.status.refusal = verdict.numbers
        m.status.refusal_reason = verdict.reason
        return True

    def _returnable(self, m: NodeMaintenance) -> bool:
        return m.spec.return_request is not None

    async def _requested(self, m: NodeMaintenance) -> Result:
        verdict = await self._safety(m)
        if not verdict.allowed:
            m.status.refusal = verdict.numbers
            m.status.refusal_reason = verdict.reason
            transition(m, P.REFUSED, verdict.reason)
            return Result.DONE
        m.status.hazard = m.status.hazard or verdict.hazard
        m.status.quorum = verdict.numbers
        set_condition(m, "QuorumGuard", "True", "Hazard" if verdict.hazard else "Kept",
                      verdict.reason)
        if self.ports.cluster.applicable:
            await self.ports.cluster.cordon(m.node)
            m.status.cordoned = True
            set_condition(m, "Cordoned", "True", "Cordoned", f"{m.node} is unschedulable")
        else:
            set_condition(m, "Cordoned", "Unknown", "NotApplicable",
                          "no cluster: nothing to cordon")
        transition(m, P.CORDONED, "cordoned")
        return Result.ADVANCED

    async def _cordoned(self, m: NodeMaintenance) -> Result:
        if m.spec.intent is Intent.CORDON or self._paused(m):
            if self._returnable(m):
                transition(m, P.RETURNING, "return to service requested")
                return Result.ADVANCED
            return Result.PARKED
        if await self._hold_if_unsafe(m):
            return Result.PARKED
        if m.spec.intent.powers:
            result = await self._evacuate(m)
            if result is not None:
                return result
        m.status.drain_started_at = self.clock()
        transition(m, P.DRAINING, "draining")
        return Result.ADVANCED

    def _paused(self, m: NodeMaintenance) -> bool:
        cond = m.condition("EvacuationPaused")
        return cond is not None and cond.status == "True"

    async def _evacuate(self, m: NodeMaintenance) -> Result | None:
        """None when evacuation is done (or not needed); else what to report."""
        storage = self.ports.storage
        cond = m.condition("Evacuated")
        if cond is not None and cond.status == "True":
            return None
        if storage.hook is None:
            await storage.read(m.node)  # logs "nothing to evacuate" once per node
            set_condition(m, "Evacuated", "True", "NoStorage",
                          "no storage system: nothing to evacuate")
            return None
        if m.status.evacuation_started_at is None:
            if await storage.read(m.node) is None:
                set_condition(m, "Evacuated", "True", "NoStorageObject",
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
                set_condition(m, "EvacuationPaused", "True", "BeginFailed", msg)
                m.status.last_error = msg
                return Result.PARKED
            set_condition(m, "Evacuated", "False", "Evacuating", "eviction requested")
            return Result.ADVANCED
        remaining = await storage.replicas_remaining(m.node)
        elapsed = self._elapsed(m.status.evacuation_started_at)
        status = evacuation_status(remaining, elapsed, self.config.evacuation_timeout_s)
        if status is EvacuationStatus.DONE:
            set_condition(m, "Evacuated", "True", "Evacuated", "no replica lives only here")
            return None
        if status is EvacuationStatus.PAUSED:
            await self._end_evacuation(m)
            msg = (f"{remaining} replica(s) still only on {m.node} after "
                   f"{self.config.evacuation_timeout_s:g} s; evacuation ended, not draining")
            set_condition(m, "EvacuationPaused", "True", "Timeout", msg)
            set_condition(m, "Evacuated", "False", "Paused", msg)
            return Result.PARKED
        set_condition(m, "Evacuated", "False", "Evacuating",
                      f"{remaining} replica(s) still only on {m.node}")
        return Result.WAITING

    async def _draining(self, m: NodeMaintenance) -> Result:
        if await self._hold_if_unsafe(m):
            return Result.PARKED
        if m.status.drain_started_at is None:
            m.status.drain_started_at = self.clock()
        progress = await self.ports.cluster.drain(m.node)
        if not progress.applicable:
            set_condition(m, "Drained", "Unknown", "NotApplicable", progress.describe())
            transition(m, P.DRAINED, "drain not applicable")
            return Result.ADVANCED
        if progress.done:
            set_condition(m, "Drained", "True", "Drained", progress.describe())
            transition(m, P.DRAINED, "no pods left")
            return Result.ADVANCED
        if self._elapsed(m.status.drain_started_at) >= self.config.drain_deadline_s:
            m.status.last_error = (
                f"drain deadline of {self.config.drain_deadline_s:g} s passed; "
                + progress.describe()
            )
            set_condition(m, "Drained", "False", "DeadlineExceeded", progress.describe())
            await self._fail(m, m.status.last_error)
            return Result.DONE
        reason = "BlockedByPDB" if progress.blocked else "Evicting"
        set_condition(m, "Drained", "False", reason, progress.describe())
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

    # -- power -------------------------------------------------------------------------------
    def _in_flight(self, d: Dispatch) -> bool:
        """Whether another live runner may still be sending ``d`` (so wait, do not settle)."""
        if d.runner == self.runner_id:
            return False
        alive = runner_alive(d.runner)
        if alive is False:
            return False
        limit = self.ports.host.limits.timeout_s + IN_FLIGHT_GRACE_S
        return self._elapsed(d.recorded_at) < limit

    async def _settle_indeterminate(self, m: NodeMaintenance, d: Dispatch) -> None:
        """A dispatch recorded but never confirmed: read back, never resend.

        If this runner sent it and only the write of its outcome was lost (another runner
        wrote in between), the outcome it learnt is recorded instead.
        """
        known = self._outcomes.get(d.attempt_id)
        if known is not None:
            d.outcome, d.outcome_at, d.detail = known.outcome, known.outcome_at, known.detail
            if d.outcome is DispatchOutcome.FAILED:
                m.status.last_error = f"{d.verb} failed: {d.detail}"
            return
        try:
            reading = await self.ports.host.read_power_state(m.node)
            seen = reading.state.value + (f" ({reading.detail})" if reading.detail else "")
        except PowerplaneError as exc:
            seen = f"read failed: {exc}"
        d.outcome = DispatchOutcome.INDETERMINATE
        d.outcome_at = self.clock()
        d.detail = f"not resent; the machine reads {seen}"
        set_condition(
            m, "DispatchIndeterminate", "True", "Restarted",
            f"{d.verb} was recorded but its outcome was lost (the runner stopped); "
            f"it was not sent again; the machine reads {seen}",
        )

    async def _send(self, m: NodeMaintenance, verb: Verb) -> Dispatch | None:
        """Record the dispatch, persist it, then send it once. None when not offered."""
        offer = self.ports.host.offer_for(m.node)[verb]
        if not offer.offered:
            set_condition(m, "PowerOffered", "False", "Withheld", f"{verb}: {offer.reason}")
            return None
        set_condition(m, "PowerOffered", "True", "Offered", f"{verb} via {offer.channel}")
        d = Dispatch(
            verb=verb.value,
            channel=offer.channel,
            attempt_id=uuid.uuid4().hex,
            recorded_at=self.clock(),
            runner=self.runner_id,
        )
        m.status.dispatches.append(d)
        self._save(m)  # persisted before sending: at most once
        crashpoint(f"dispatch-recorded:{verb.value}")
        try:
            with guard.own_dispatch(m.name):
                result = await self.ports.host.invoke(m.node, verb, reason=m.spec.reason)
        except (PowerplaneError, ValueError) as exc:  # refused by the rule, the channel, input
            d.outcome = DispatchOutcome.FAILED
            d.outcome_at = self.clock()
            d.detail = str(exc)
            m.status.last_error = f"{verb} failed: {exc}"
            self._outcomes[d.attempt_id] = d.model_copy()
            return d
        crashpoint(f"dispatch-sent:{verb.value}")
        d.outcome = DispatchOutcome.ACCEPTED
        d.outcome_at = self.clock()
        d.detail = result.detail or f"accepted by {result.channel}"
        self._outcomes[d.attempt_id] = d.model_copy()
        return d

    async def _drained(self, m: NodeMaintenance) -> Result:
        if m.spec.intent is Intent.DRAIN:
            if self._returnable(m):
                transition(m, P.RETURNING, "return to service requested")
                return Result.ADVANCED
            return Result.PARKED
        verb = Verb.REBOOT if m.spec.intent is Intent.REBOOT else Verb.SHUTDOWN
        d = m.dispatch_for(verb.value)
        if d is None:
            if await self._hold_if_unsafe(m):
                return Result.PARKED
            d = await self._send(m, verb)
            if d is None:
                return Result.PARKED
        elif d.outcome is None:
            if self._in_flight(d):
                return Result.WAITING  # another live runner is sending it
            await self._settle_indeterminate(m, d)
        if d.outcome is DispatchOutcome.FAILED:
            await self._fail(m, m.status.last_error or f"{verb} failed: {d.detail}")
            return Result.DONE
        when = d.outcome_at if d.outcome is DispatchOutcome.ACCEPTED else d.recorded_at
        if verb is Verb.REBOOT:
            m.status.power_wait_started_at = when
            set_condition(m, "NodeReady", "False", "Rebooting", "waiting for the node")
            transition(m, P.REBOOTING, f"reboot {d.outcome}")
        else:
            m.status.powered_off_at = when
            set_condition(m, "PowerOffConfirmed", "False", "ReadingBack", "reading back")
            transition(m, P.POWERED_OFF, f"shutdown {d.outcome}")
        return Result.ADVANCED

    async def _rebooting(self, m: NodeMaintenance) -> Result:
        if await self.ports.cluster.is_ready(m.node):
            set_condition(m, "NodeReady", "True", "Ready", "the node is ready again")
            transition(m, P.RETURNING, "node ready after reboot")
            return Result.ADVANCED
        if self._elapsed(m.status.power_wait_started_at) >= self.config.ready_timeout_s:
            m.status.last_error = (
                f"{m.node} was not ready {self.config.ready_timeout_s:g} s after the reboot"
            )
            await self._fail(m, m.status.last_error)
            return Result.DONE
        return Result.WAITING

    def _observe_watch(self, m: NodeMaintenance) -> None:
        """Carry a power-off readback's status into the ``PowerOffConfirmed`` condition."""
        cond = m.condition("PowerOffConfirmed")
        if cond is None or cond.status != PowerOffConfirmed.FALSE.value:
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
            set_condition(m, "PowerOffConfirmed", watch.status.value, reason, watch.detail)
            self.watches.pop(m.name, None)

    async def _powered_off(self, m: NodeMaintenance) -> Result:
        if self._returnable(m):
            transition(m, P.RETURNING, "return to service requested")
            return Result.ADVANCED
        return Result.WAITING if m.name in self.watches else Result.PARKED

    async def _returning(self, m: NodeMaintenance) -> Result:
        for d in m.status.dispatches:
            if d.outcome is None:
                if self._in_flight(d):
                    return Result.WAITING
                await self._settle_indeterminate(m, d)
        if any(t.to is P.POWERED_OFF for t in m.status.history):
            pd = m.dispatch_for(Verb.POWER_ON.value)
            confirmed = m.spec.return_request is not None and (
                m.spec.return_request.machine_confirmed
            )
            if pd is None and not confirmed:
                pd = await self._send(m, Verb.POWER_ON)
                if pd is None:
                    set_condition(
                        m, "AwaitingPowerOn", "True", "PowerOnNotOffered",
                        "power-on is not offered for this node; once a person has powered it "
                        f"on, confirm with: powerplane maintenance return {m.node} --machine-on",
                    )
                    return Result.PARKED
                if pd.outcome is DispatchOutcome.FAILED:
                    await self._fail(m, m.status.last_error)
                    return Result.DONE
                m.status.power_wait_started_at = pd.outcome_at
                set_condition(m, "AwaitingPowerOn", "False", "PoweredOn", pd.detail)
                return Result.ADVANCED
            if confirmed and pd is None:
                set_condition(m, "AwaitingPowerOn", "False", "ConfirmedByPerson",
                              "a person confirmed the machine is back on")
        powered = any(
            d.outcome in (DispatchOutcome.ACCEPTED, DispatchOutcome.INDETERMINATE)
            for d in m.status.dispatches
        )
        if powered or any(t.to is P.POWERED_OFF for t in m.status.history):
            ready = await self.ports.cluster.is_ready(m.node)
            confirmed = m.spec.return_request is not None and (
                m.spec.return_request.machine_confirmed
            )
            if not ready and not (ready is None and confirmed):
                if m.status.power_wait_started_at is None:
                    m.status.power_wait_started_at = self.clock()
                elif (
                    self._elapsed(m.status.power_wait_started_at) >= self.config.ready_timeout_s
                ):
                    m.status.last_error = (
                        f"{m.node} was not ready {self.config.ready_timeout_s:g} s after "
                        "power came back"
                    )
                    await self._fail(m, m.status.last_error)
                    return Result.DONE
                set_condition(m, "NodeReady", "False", "Waiting", "waiting for the node")
                return Result.WAITING
            set_condition(m, "NodeReady", "True", "Ready", "the node is ready")
        await self.ports.cluster.uncordon(m.node)
        if self.ports.cluster.applicable:
            set_condition(m, "Cordoned", "False", "Uncordoned", f"{m.node} is schedulable")
        await self._end_evacuation(m)
        cond = m.condition("PowerOffConfirmed")
        if cond is not None and cond.status == PowerOffConfirmed.FALSE.value:
            set_condition(m, "PowerOffConfirmed", PowerOffConfirmed.UNKNOWN.value, "Returned",
                          "returned to service before the readback observed off")
        transition(m, P.COMPLETE, "back in service")
        return Result.DONE
