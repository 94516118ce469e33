"""Record, send and settle a maintenance's power verb: the one unit that sends one.

At most once, proven. A dispatch is recorded (verb, channel, attempt id, the evidence
taken before sending: the boot marker, and for a verb that changes power the power
reading, with their sources) and persisted *before* it is sent. A boot marker comes from
the cluster's node boot id where the cluster has one, else from the first channel that
publishes one (``PowerHost.boot_marker``).

A dispatch left without an answer (the runner died, its write was lost, or the host said
``OutcomeUnknown`` because the request may have left) is settled by evidence, never
resent blindly:

* reboot: the boot marker changed -> applied. Unchanged while the node stays reachable and
  ready through the settle window -> not applied -> sent again, once, as attempt 2. No
  marker from any source -> indeterminate.
* shutdown, terminate: a channel that sees power off reads ``off`` -> applied; reads ``on``
  through the whole window -> not applied -> sent again once. A blind channel ->
  indeterminate.
* power-on: reads ``on`` -> applied; reads ``off`` through the window -> not applied ->
  sent again once; nothing readable -> indeterminate.

An indeterminate dispatch waits for a person (``maintenance resolve``): ``applied`` moves
on, ``not applied`` sends once more. Nothing here upgrades a refusal: a verb the rule or
the guard refuses fails and is never sent again.
A ``TemporaryPortError`` out of the send (raised before anything left: e.g. a channel's
``{k8s:}`` secret the API server could not give now) is no answer of the device: the
dispatch record is removed again and the error goes to the reconciler, which tries the
verb next pass.

The settle window (``lifecycle.settle_window_s``) defaults to the host's
``limits.timeout_s`` plus :data:`SETTLE_GRACE_S`: a request that may have left has had its
whole call time to act before its absence of effect is believed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from enum import Enum

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.errors import OutcomeUnknown, PowerplaneError
from powerplane.lifecycle import guard
from powerplane.lifecycle.crash import crashpoint
from powerplane.lifecycle.ledger import DispatchLedger, LedgerConflict, unsent
from powerplane.lifecycle.model import (
    ConditionStatus,
    ConditionType,
    Dispatch,
    DispatchOutcome,
    Evidence,
    NodeMaintenance,
    Resolution,
    set_condition,
)
from powerplane.lifecycle.ports import Ports, TemporaryPortError, call_store
from powerplane.settings.lifecycle import LifecycleConfig

__all__ = [
    "IN_FLIGHT_GRACE_S",
    "SETTLE_GRACE_S",
    "Dispatcher",
    "Drive",
    "runner_alive",
    "set_condition",
]

log = logging.getLogger("powerplane.lifecycle")

C = ConditionType
S = ConditionStatus
O = DispatchOutcome  # noqa: E741

_LIVE_RUNNERS: set[str] = set()
"""Runner ids of this process that have not been closed."""

IN_FLIGHT_GRACE_S = 5.0
"""Beyond the host's call timeout, how long a dispatch of another host's runner may stay
without outcome before it is settled by evidence."""

SETTLE_GRACE_S = 5.0
"""Added to ``limits.timeout_s`` for the default settle window."""


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
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that has exited but is not yet reaped answers ``kill(pid, 0)``; it runs
    nothing, so its dispatches are a dead runner's (Linux: state ``Z`` or ``X`` in
    ``/proc/PID/stat``; elsewhere: cannot tell, so alive)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The command name is in parentheses and may hold spaces or parentheses itself.
    state = stat[stat.rfind(b")") + 2:][:1]
    return state in (b"Z", b"X")


def _after_unknown(d: Dispatch, settled: str) -> str:
    """The detail of a dispatch settled by evidence: what was known of it first (the host's
    "outcome unknown", or that no answer was recorded), then the evidence."""
    if d.outcome is O.UNKNOWN and d.detail:
        return f"outcome unknown ({d.detail}); settled by evidence: {settled}"
    return settled


class Drive(str, Enum):
    """Where driving a verb stands after one pass."""

    APPLIED = "applied"
    """The channel accepted it, or evidence or a person showed it took effect: go on."""
    FAILED = "failed"
    """Refused (by the rule, the guard, the channel or input): never sent again."""
    WAITING = "waiting"
    """Another runner may still be sending it, or the settle window is open."""
    PARKED = "parked"
    """Not offered, or indeterminate: waits for a person."""
    NOT_APPLIED = "not-applied"
    """Never sent, or shown not applied, and not to be sent (``send=False``)."""


class Dispatcher:
    """Records, sends and settles power verbs for maintenances (the only sender)."""

    def __init__(
        self,
        ports: Ports,
        config: LifecycleConfig,
        clock: Callable[[], dt.datetime],
        save: Callable[[NodeMaintenance], Awaitable[None]],
        ledger: DispatchLedger | None = None,
    ) -> None:
        self.ports = ports
        self.config = config
        self.clock = clock
        self._save = save
        self.ledger = ledger
        """The store's dispatch ledger (:mod:`.ledger`); None: the store keeps none."""
        self._shown_here: set[str] = set()
        """Attempts this runner's own settle window showed not applied (by attempt id)."""
        self._outcomes: dict[str, Dispatch] = {}
        """Answers this runner received, by attempt id (re-applied if a write of one lost
        a race with another runner)."""
        self.runner_id = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        """This runner, as recorded on its dispatches."""
        _LIVE_RUNNERS.add(self.runner_id)

    def close(self) -> None:
        """Release this runner: dispatches it left without an answer become settleable."""
        _LIVE_RUNNERS.discard(self.runner_id)

    @property
    def settle_window_s(self) -> float:
        """How long evidence of non-application must hold before a second attempt."""
        if self.config.settle_window_s is not None:
            return self.config.settle_window_s
        return self.ports.host.limits.timeout_s + SETTLE_GRACE_S

    def _elapsed(self, since: dt.datetime | None) -> float:
        if since is None:
            return 0.0
        return (self.clock() - since).total_seconds()

    # -- evidence ----------------------------------------------------------------------------
    def _sees_power(self, node: str, channel: str | None) -> bool:
        for ref in self.ports.host.nodes[node].channels:
            if channel is None or ref.channel == channel:
                caps = self.ports.host.capabilities(ref.channel, ref.target)
                return isinstance(caps, CapabilitySet) and caps.sees_power_off
        return False

    async def evidence(
        self, node: str, channel: str | None, *, power: bool = True
    ) -> Evidence:
        """What can be observed of ``node`` now: boot marker, power reading, sources.

        The marker and the reading are read concurrently (one round trip); ``power=False``
        reads only the marker.
        """
        notes: list[str] = []

        async def read_marker() -> tuple[str | None, str | None]:
            # the cluster's node boot id first (a kubelet's own report, no channel request),
            # then the first channel that publishes a boot marker
            try:
                boot_id = await self.ports.cluster.boot_id(node)
            except PowerplaneError as exc:
                boot_id = None
                notes.append(f"boot id read failed: {exc}")
            if boot_id is not None:
                return boot_id, "cluster"
            try:
                found = await self.ports.host.boot_marker(node)
            except PowerplaneError as exc:
                notes.append(f"boot marker read failed: {exc}")
                return None, None
            return (found[1], found[0]) if found is not None else (None, None)

        async def read_power() -> tuple[str | None, str | None]:
            if not power:
                return None, None
            try:
                reading = await self.ports.host.read_power_state(node)
            except PowerplaneError as exc:
                notes.append(f"power read failed: {exc}")
                return None, None
            return reading.state.value, reading.channel

        if power:
            (marker, source), (state, power_source) = await asyncio.gather(
                read_marker(), read_power())
        else:  # one read: no task to schedule
            (marker, source), (state, power_source) = await read_marker(), (None, None)
        return Evidence(
            boot_marker=marker, boot_marker_source=source, power=state,
            power_source=power_source, sees_power=self._sees_power(node, channel),
            taken_at=self.clock(), note="; ".join(notes),
        )

    # -- record and send ---------------------------------------------------------------------
    async def _send(self, m: NodeMaintenance, verb: Verb, attempt: int) -> Dispatch | None:
        """Record the dispatch with its evidence, persist it, then send it once.

        None when the verb is not offered (nothing is recorded).
        """
        offer = self.ports.host.offer_for(m.node)[verb]
        if not offer.offered:
            set_condition(m, C.POWER_OFFERED, S.FALSE, "Withheld", f"{verb}: {offer.reason}")
            return None
        set_condition(m, C.POWER_OFFERED, S.TRUE, "Offered", f"{verb} via {offer.channel}")
        # the power reading is evidence where the verb changes power and the channel can
        # see the change; a reboot reads on before and after, so its evidence is the marker
        sees = self._sees_power(m.node, offer.channel)
        before = await self.evidence(
            m.node, offer.channel,
            power=verb is Verb.POWER_ON or (verb is not Verb.REBOOT and sees))
        d = Dispatch(
            verb=verb.value,
            channel=offer.channel,
            attempt_id=uuid.uuid4().hex,
            recorded_at=self.clock(),
            runner=self.runner_id,
            attempt=attempt,
            before=before,
        )
        m.status.dispatches.append(d)
        await self._save(m)  # persisted before sending: at most once
        crashpoint(f"dispatch-recorded:{verb.value}")
        try:
            if self.ledger is not None:  # the record no status can lose, before it leaves
                try:
                    await call_store(self.ledger, self.ledger.record_dispatch, m, d)
                except LedgerConflict as exc:
                    d.outcome, d.outcome_at = O.INDETERMINATE, self.clock()
                    d.detail = f"not sent: {exc}"
                    self._outcomes[d.attempt_id] = d.model_copy()
                    set_condition(m, C.DISPATCH_INDETERMINATE, S.TRUE, "LedgerConflict",
                                  str(exc))
                    set_condition(m, C.AWAITING_RESOLUTION, S.TRUE, "LedgerConflict",
                                  f"{exc}. A person decides: powerplane maintenance resolve "
                                  f"{m.node} --applied | --not-applied --reason TEXT "
                                  f"--confirm-node {m.node}")
                    return d
                crashpoint(f"dispatch-ledgered:{verb.value}")
            with guard.own_dispatch(m.name):
                # the requester's right asked again by the host (authoritative); the act's
                # record was made durable when the request was accepted
                result = await self.ports.host.invoke(
                    m.node, verb, reason=m.spec.reason, identity=m.spec.requester,
                    audited=True)
        except TemporaryPortError as exc:  # before anything left, and it may pass (a secret
            # its store could not give now, the ledger out of reach): never sent, so shown
            # not applied by this runner (in the ledger too, where it can be written: a
            # recorded dispatch is never removed); the reconciler records the error and a
            # later pass sends the next attempt
            d.outcome, d.outcome_at, d.settled_by = O.NOT_APPLIED, self.clock(), "runner"
            d.detail = f"not sent: {exc}"
            self._shown_here.add(d.attempt_id)
            self._outcomes[d.attempt_id] = d.model_copy()
            if self.ledger is not None:
                try:
                    await call_store(self.ledger, self.ledger.record_not_applied, m, d)
                except PowerplaneError as again:
                    log.warning("%s: %s not recorded in the ledger as not sent (%s): a "
                                "person decides before it is sent again", m.name, d.verb,
                                again)
            await self._save(m)
            raise
        except OutcomeUnknown as exc:  # it may have left: settle by evidence, never Failed
            d.outcome = O.UNKNOWN
            d.outcome_at = self.clock()
            d.detail = f"no answer: {exc}"
            self._outcomes[d.attempt_id] = d.model_copy()
            return d
        except (PowerplaneError, ValueError) as exc:  # refused by the rule, the channel, input
            d.outcome = O.FAILED
            d.outcome_at = self.clock()
            d.detail = str(exc)
            m.status.last_error = f"{verb} failed: {exc}"
            self._outcomes[d.attempt_id] = d.model_copy()
            return d
        crashpoint(f"dispatch-sent:{verb.value}")
        d.outcome = O.ACCEPTED
        d.outcome_at = self.clock()
        d.detail = result.detail or f"accepted by {result.channel}"
        d.settled_by = "channel"
        self._outcomes[d.attempt_id] = d.model_copy()
        return d

    def _in_flight(self, d: Dispatch) -> bool:
        """Whether another live runner may still be sending ``d`` (so wait, do not settle)."""
        if d.runner == self.runner_id:
            return False
        alive = runner_alive(d.runner)
        if alive is False:
            return False
        limit = self.ports.host.limits.timeout_s + IN_FLIGHT_GRACE_S
        return self._elapsed(d.recorded_at) < limit

    # -- drive -------------------------------------------------------------------------------
    async def drive(
        self, m: NodeMaintenance, verb: Verb, *, send: bool = True,
        may_send: Callable[[NodeMaintenance], Awaitable[bool]] | None = None,
    ) -> tuple[Drive, Dispatch | None]:
        """Send ``verb`` (first time), or settle and, on evidence, resend it once.

        ``send=False`` only settles what was recorded (an abandoned maintenance): a verb
        shown not applied is then :attr:`Drive.NOT_APPLIED`, never sent again.
        ``may_send`` is asked before every send (the safety rules); False parks.
        """
        d = m.dispatch_for(verb.value)
        if d is None:
            if not send:
                return Drive.NOT_APPLIED, None
            if may_send is not None and not await may_send(m):
                return Drive.PARKED, None
            d = await self._send(m, verb, attempt=1)
            if d is None:
                return Drive.PARKED, None
        for _ in range(4):
            if d.outcome is None:
                known = self._outcomes.get(d.attempt_id)
                if known is not None:  # this runner has the answer; only its write was lost
                    d.outcome, d.outcome_at, d.detail = (
                        known.outcome, known.outcome_at, known.detail)
                    d.settled_by = known.settled_by
                    if d.outcome is O.FAILED:
                        m.status.last_error = f"{verb} failed: {d.detail}"
                    continue
                if self._in_flight(d):
                    return Drive.WAITING, d
                d.outcome = O.UNKNOWN
                d.outcome_at = self.clock()
                d.detail = "no answer was recorded (the runner stopped)"
            if d.outcome in (O.ACCEPTED, O.APPLIED):
                return Drive.APPLIED, d
            if d.outcome is O.FAILED:
                return Drive.FAILED, d
            if d.outcome is O.UNKNOWN:
                if not await self._settle(m, d):
                    return Drive.WAITING, d
                continue
            if d.outcome is O.INDETERMINATE:
                res = self._resolution(m, d)
                if res is None:
                    return Drive.PARKED, d
                who = f"person:{res.actor}"
                d.settled_by = who
                d.outcome_at = self.clock()
                if res.applied:
                    d.outcome = O.APPLIED
                    d.detail = f"{res.actor} resolved it as applied: {res.reason}"
                else:
                    d.outcome = O.NOT_APPLIED
                    d.detail = f"{res.actor} resolved it as not applied: {res.reason}"
                self._clear_indeterminate(m, d.detail)
                continue
            if d.outcome is O.NOT_APPLIED:
                if not send:
                    return Drive.NOT_APPLIED, d
                if not await self._shown_not_applied(m, d):
                    return Drive.PARKED, d
                if may_send is not None and not await may_send(m):
                    return Drive.PARKED, d
                nxt = await self._send(m, verb, attempt=d.attempt + 1)
                if nxt is None:
                    return Drive.PARKED, d
                d = nxt
                continue
        return Drive.WAITING, d

    async def _shown_not_applied(self, m: NodeMaintenance, d: Dispatch) -> bool:
        """Whether ``d``'s "not applied" comes from something a status cannot fake, before
        the next attempt is sent (:mod:`.ledger`): a person's resolution, this runner's own
        settle window (then recorded in the ledger), or the ledger. Else ``d`` becomes
        indeterminate (False: parked for a person)."""
        ledger = self.ledger
        if ledger is None:
            return True
        if d.settled_by.startswith("person:"):
            res = self._resolution(m, d)
            if res is not None and not res.applied:
                return True
        elif d.settled_by in ("evidence", "runner"):
            if d.attempt_id in self._shown_here:
                await call_store(ledger, ledger.record_not_applied, m, d)
                return True
            entries = await call_store(ledger, ledger.ledger, m)
            if (d.verb, d.attempt) in unsent(entries):
                return True
        seen = await self.evidence(m.node, d.channel)
        self._indeterminate(m, d, "the status says it did not take effect, but no evidence "
                            "this executor recorded, no ledger record and no person's "
                            "resolution says so", seen)
        return False

    def _resolution(self, m: NodeMaintenance, d: Dispatch) -> Resolution | None:
        for res in m.spec.resolutions:
            if res.attempt_id == d.attempt_id:
                return res
        return None

    def _clear_indeterminate(self, m: NodeMaintenance, why: str) -> None:
        if m.is_true(C.AWAITING_RESOLUTION):
            set_condition(m, C.AWAITING_RESOLUTION, S.FALSE, "Resolved", why)
        if m.is_true(C.DISPATCH_INDETERMINATE):
            set_condition(m, C.DISPATCH_INDETERMINATE, S.FALSE, "Resolved", why)
        if m.is_true(C.STATUS_REGRESSED) and not any(
                x.outcome is O.INDETERMINATE for x in m.status.dispatches):
            set_condition(m, C.STATUS_REGRESSED, S.FALSE, "Resolved", why)

    def _may_resend_on_evidence(self, m: NodeMaintenance, d: Dispatch) -> bool:
        """Evidence resends a verb once; any further send needs a person."""
        return not any(
            x.verb == d.verb and x.outcome is O.NOT_APPLIED and x.settled_by == "evidence"
            for x in m.status.dispatches if x is not d
        )

    def _indeterminate(self, m: NodeMaintenance, d: Dispatch, unknown: str,
                       seen: Evidence) -> None:
        d.detail = _after_unknown(d, f"{unknown}; observed: {seen.describe()}")
        d.outcome = O.INDETERMINATE
        d.outcome_at = self.clock()
        d.settled_by = ""
        msg = (f"{d.verb} (attempt {d.attempt}) was recorded but whether it took effect "
               f"is unknown: {unknown}; observed: {seen.describe()}")
        set_condition(m, C.DISPATCH_INDETERMINATE, S.TRUE, "NoEvidence", msg)
        set_condition(
            m, C.AWAITING_RESOLUTION, S.TRUE, "NoEvidence",
            f"{msg}. A person decides: powerplane maintenance resolve {m.node} "
            f"--applied | --not-applied --reason TEXT --confirm-node {m.node}",
        )

    def _applied(self, d: Dispatch, why: str) -> None:
        d.detail = _after_unknown(d, why)
        d.outcome = O.APPLIED
        d.outcome_at = self.clock()
        d.settled_by = "evidence"

    def _not_applied(self, m: NodeMaintenance, d: Dispatch, why: str, seen: Evidence) -> None:
        if not self._may_resend_on_evidence(m, d):
            self._indeterminate(
                m, d, f"{why}, but it was already sent again once on evidence", seen)
            return
        d.detail = _after_unknown(d, f"{why}; sending it again once")
        d.outcome = O.NOT_APPLIED
        d.outcome_at = self.clock()
        d.settled_by = "evidence"
        self._shown_here.add(d.attempt_id)

    async def _settle(self, m: NodeMaintenance, d: Dispatch) -> bool:
        """Read evidence for an unanswered dispatch; True once its outcome is decided."""
        seen = await self.evidence(m.node, d.channel)
        before = d.before or Evidence(sees_power=seen.sees_power)
        window = self.settle_window_s
        stuck = self._elapsed(d.outcome_at) >= self.config.ready_timeout_s + window

        def held() -> bool:
            """Non-application holds now: has it held through the whole window?"""
            if d.settle_started_at is None:
                d.settle_started_at = self.clock()
            return self._elapsed(d.settle_started_at) >= window
        verb = Verb(d.verb)
        if verb is Verb.REBOOT:
            if before.boot_marker is None:
                self._indeterminate(m, d, "no boot marker from any source to show a reboot",
                                    seen)
                return True
            if seen.boot_marker_source == before.boot_marker_source and (
                seen.boot_marker is not None and seen.boot_marker != before.boot_marker
            ):
                self._applied(d, f"boot marker changed {before.boot_marker} -> "
                                 f"{seen.boot_marker} (from {seen.boot_marker_source})")
                return True
            ready = await self.ports.cluster.is_ready(m.node)
            unchanged = seen.boot_marker == before.boot_marker
            if not (unchanged and ready is True):
                d.settle_started_at = None  # not provably up and unchanged: the window restarts
                if stuck:
                    self._indeterminate(m, d, "the node did not come back ready with a "
                                        "readable boot marker", seen)
                    return True
                return False
            if held():
                self._not_applied(
                    m, d, f"boot marker still {seen.boot_marker} and the node stayed ready "
                          f"through {window:g} s", seen)
                return True
            return False
        target_state = "on" if verb is Verb.POWER_ON else "off"
        old_state = "off" if verb is Verb.POWER_ON else "on"
        if target_state == "off" and not before.sees_power:
            self._indeterminate(m, d, "the channel cannot see power off", seen)
            return True
        if seen.power == target_state:
            self._applied(d, f"the machine reads {target_state} (via {seen.power_source})")
            return True
        if seen.power == old_state and (old_state == "on" or seen.sees_power):
            if held():
                self._not_applied(
                    m, d, f"the machine read {old_state} through {window:g} s", seen)
                return True
            return False
        d.settle_started_at = None  # unreadable or in transition: the window restarts
        if stuck:
            self._indeterminate(m, d, f"the machine never read {target_state} or "
                                f"{old_state}", seen)
            return True
        return False
