"""The power plan: every power change the verb checks need, made once per machine, in the
order that needs the fewest, on each machine at the same time as on the others and as the
checks that change nothing.

The checks that judge a power change (``{VERB}_READBACK``, ``{VERB}_REPEATED``,
``{VERB}_CONCURRENT``, ``POWER_ON_IDEMPOTENT``, ``SHUTDOWN_IDEMPOTENT``,
``READBACK_NOT_STALE``) do not send verbs themselves: when the first check of a suite
class runs, the plan is built from the checks pytest selected (and the gate lets run),
and one worker thread per machine makes its steps while pytest runs the checks that need
no power change (reads, discovery, the negatives). Each judging check waits for the steps
that are its evidence and judges them as it always has.

For a machine that starts on, with every verb advertised and ``repeat`` 3::

    power-on while on (POWER_ON_IDEMPOTENT)
    reboot x3       (REBOOT_READBACK, REBOOT_REPEATED rounds 2 and 3)
    shutdown        (SHUTDOWN_READBACK; READBACK_NOT_STALE's evidence)
    shutdown while off (SHUTDOWN_IDEMPOTENT)
    power-on        (POWER_ON_READBACK)
    shutdown, power-on, shutdown, power-on  (rounds 2 and 3 of both)

9 power changes (3 of each verb, the fewest ``repeat`` 3 allows) and the two idempotent
verbs; it ends as it began. Every step reads the machine first and is made only from the
state it is tested from (a round from its verb's start state, an idempotent verb from the
state it should leave alone); when the machine does not read it, the suite brings it
there the session's way (:meth:`~powerplane_conformance.session.ConformanceSession.ensure`),
or the step is not made and its check is NOT TESTED with why. A round of a verb that
failed stops that verb's later rounds, and a state a verb did not reach is not asked of
it again. With several machines on one channel, a ``{VERB}_CONCURRENT`` step is a round
on every machine of the channel at once (one ``invoke_batch``, or each machine's verb
method at once): the workers meet at a barrier, the verbs leave together, each reads its
machine back. Made through the verb method, it is one of the verb's rounds (a repeat
round made alongside the others); made through ``invoke_batch``, it is a round of its own.
Calls to one endpoint are bounded by ``limits.per_endpoint``, as the host bounds them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from powerplane import BatchInvoker, CapabilitySet, ChannelError, PowerState, Reading, Verb
from powerplane.channel import maybe_await, verb_method
from powerplane_conformance.checks import CheckSpec, spec_of
from powerplane_conformance.iowatch import unwatched
from powerplane_conformance.model import (
    END_STATE,
    START_STATE,
    Observation,
    Subject,
    describe_error,
)
from powerplane_conformance.session import ConformanceSession

__all__ = [
    "PLANNED",
    "NodePlan",
    "Plan",
    "Round",
    "Step",
    "Wants",
    "build_steps",
    "concurrent_groups",
    "plan_for",
    "planned",
    "wait_all",
]

PLANNED = frozenset({"{VERB}_READBACK", "{VERB}_REPEATED", "{VERB}_CONCURRENT",
                     "POWER_ON_IDEMPOTENT", "SHUTDOWN_IDEMPOTENT", "READBACK_NOT_STALE"})
"""The checks whose power changes the plan makes (terminate's readback is not one)."""


def planned(spec: CheckSpec, verb: Verb | None) -> bool:
    """Whether the plan makes this check's power changes."""
    return spec.template in PLANNED and verb is not Verb.TERMINATE


ORDER = (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON)
"""The order concurrent rounds are made in, on every machine of a channel alike."""
BARRIER_S = 3600.0
"""How long a worker waits for the others at a concurrent round, at most."""


@dataclass(frozen=True)
class Round:
    """One round of a verb on one machine: sent from its start state, read back after."""

    verb: Verb
    by: str
    """Which check made it, and why (``POWER_ON_READBACK``, ``SHUTDOWN_REPEATED round 2``)."""
    error: str
    """Why the verb was not accepted (empty when it was)."""
    observation: Observation | None
    """The readback after it (None when the verb was not accepted)."""
    latency: float
    """Seconds from sending the verb to the end of the readback."""
    start: str = ""
    """What the machine read just before the verb was sent."""
    fresh: Reading | str | None = None
    """After a shutdown that did not read off: what a fresh session read (or why it could
    not), for READBACK_NOT_STALE."""
    counts: bool = True
    """A round of its verb for ``{VERB}_REPEATED`` (not one sent through invoke_batch)."""

    @property
    def ok(self) -> bool:
        return not self.error and self.observation is not None and self.observation.ok

    def describe(self) -> str:
        if self.error:
            return f"{self.verb.value} not accepted: {self.error}"
        assert self.observation is not None
        return f"{self.observation.describe()}, {self.latency:.2f} s after {self.verb.value}"


Kind = Literal["round", "idempotent", "reach"]


@dataclass(eq=False)
class Step:
    """One thing a worker does to one machine, for the check named ``owner``."""

    kind: Kind
    verb: Verb | None
    want: PowerState
    """The state the machine must read first (a round, an idempotent verb), or the state
    to bring it to (``reach``)."""
    by: str
    owner: str
    """The assertion id of the check this step is evidence for (``""``: the plan's own)."""
    group: Group | None = None
    """The machines of a concurrent round (None: this machine alone)."""
    counts: bool = True
    done: threading.Event = field(default_factory=threading.Event)
    round: Round | None = None
    observation: Observation | None = None
    """An idempotent verb's readback."""
    error: BaseException | None = None
    """An idempotent verb's error (None: accepted)."""
    not_made: str = ""
    """Why the step was not made (its check is NOT TESTED with it)."""

    def wait(self) -> Step:
        self.done.wait()
        return self


@dataclass(eq=False)
class Group:
    """A concurrent round: the machines of one channel, the barrier they meet at, and the
    outcome of the one all-at-once call per machine."""

    verb: Verb
    subjects: list[Subject]
    barrier: threading.Barrier = field(init=False)
    ready: dict[str, bool] = field(default_factory=dict)
    outcomes: dict[str, Any] = field(default_factory=dict)
    sent_at: float = 0.0

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(len(self.subjects))


@dataclass
class Wants:
    """What the selected checks need of one machine."""

    readback: set[Verb] = field(default_factory=set)
    repeated: set[Verb] = field(default_factory=set)
    idempotent: set[Verb] = field(default_factory=set)
    not_stale: bool = False
    concurrent: list[Group] = field(default_factory=list)
    """In :data:`ORDER`."""

    def any(self) -> bool:
        return bool(self.readback or self.repeated or self.idempotent or self.not_stale
                    or self.concurrent)


def _name(verb: Verb) -> str:
    return verb.name  # REBOOT, SHUTDOWN, POWER_ON


def build_steps(
    wants: Wants, original: PowerState, caps: CapabilitySet, repeat: int, batch: bool
) -> list[Step]:
    """The steps for one machine, fewest power changes first: each idempotent verb where
    the machine already is in its state, the reboots while on, shutdown and power-on
    rounds alternating, and back to ``original`` at the end (a change the next step does
    not undo is made only when nothing else would bring the machine back)."""
    need: dict[Verb, int] = {}
    for verb in ORDER:
        need[verb] = repeat if verb in wants.repeated else (1 if verb in wants.readback else 0)
    if wants.not_stale:
        need[Verb.SHUTDOWN] = max(need[Verb.SHUTDOWN], 1)
    made = dict.fromkeys(ORDER, 0)
    idem = set(wants.idempotent)
    syncs = list(wants.concurrent)
    steps: list[Step] = []
    end = PowerState.OFF if original is PowerState.OFF else PowerState.ON
    state = end

    def add_round(verb: Verb) -> None:
        if not caps.advertises(verb):  # no round of it: the session's way, if any
            steps.append(Step("reach", None, END_STATE[verb],
                              f"the way to {END_STATE[verb].value} for the next step", ""))
            return
        group = syncs[0] if syncs and syncs[0].verb is verb else None
        counted = need[verb] - made[verb]
        if group is not None and (batch or counted <= 1):
            syncs.pop(0)
            ident = f"{_name(verb)}_CONCURRENT"
            others = ", ".join(x.key for x in group.subjects)
            if not batch:
                made[verb] += 1
            steps.append(Step("round", verb, START_STATE[verb], f"{ident}, with {others}",
                              ident, group, counts=not batch))
            return
        made[verb] += 1
        k = made[verb]
        if k == 1 and verb in wants.readback:
            by = owner = f"{_name(verb)}_READBACK"
        elif verb in wants.repeated and k <= repeat:
            owner = f"{_name(verb)}_REPEATED"
            by = f"{owner} round {k}"
        elif verb is Verb.SHUTDOWN and wants.not_stale and k == 1:
            by = owner = "READBACK_NOT_STALE"
        else:
            by, owner = "the way back to the state at the start", ""
        steps.append(Step("round", verb, START_STATE[verb], by, owner))

    def left(verb: Verb) -> bool:
        return need[verb] - made[verb] > 0 or any(g.verb is verb for g in syncs)

    for _ in range(16 * (repeat + 2)):  # a bound; the loop ends long before
        if state is PowerState.ON:
            if Verb.POWER_ON in idem:
                idem.discard(Verb.POWER_ON)
                steps.append(Step("idempotent", Verb.POWER_ON, PowerState.ON,
                                  "POWER_ON_IDEMPOTENT", "POWER_ON_IDEMPOTENT"))
                continue
            if left(Verb.REBOOT) and (not syncs or syncs[0].verb is Verb.REBOOT
                                      or need[Verb.REBOOT] > made[Verb.REBOOT]):
                add_round(Verb.REBOOT)
                continue
            if left(Verb.SHUTDOWN) or left(Verb.POWER_ON) or Verb.SHUTDOWN in idem \
                    or syncs or end is PowerState.OFF:
                add_round(Verb.SHUTDOWN)
                state = PowerState.OFF
                continue
            break
        if Verb.SHUTDOWN in idem:
            idem.discard(Verb.SHUTDOWN)
            steps.append(Step("idempotent", Verb.SHUTDOWN, PowerState.OFF,
                              "SHUTDOWN_IDEMPOTENT", "SHUTDOWN_IDEMPOTENT"))
            continue
        if left(Verb.POWER_ON) or left(Verb.SHUTDOWN) or left(Verb.REBOOT) \
                or Verb.POWER_ON in idem or syncs or end is PowerState.ON:
            add_round(Verb.POWER_ON)
            state = PowerState.ON
            continue
        break
    return steps


class NodePlan:
    """The steps for one machine and the worker that makes them."""

    def __init__(self, plan: Plan, subject: Subject, steps: list[Step]) -> None:
        self.plan = plan
        self.subject = subject
        self.steps = steps
        self.finished = threading.Event()
        self.restore_failed = ""
        """Why the machine could not be put back at the end (empty: it was, or needed not)."""
        self.left_by = ""
        """The owner of the last step that took the machine away from its state at the
        start (the check a failed restore is recorded on)."""
        self.changed = threading.Condition()
        """Notified when :attr:`left_by` changes and when the worker is done."""
        self.failed: dict[Verb, Round] = {}
        """Per verb: its first round that failed (no more rounds of it are made)."""
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"powerplane-conformance-plan-{subject.key}")

    # -- the worker --------------------------------------------------------------------------
    def _run(self) -> None:
        session, s = self.plan.session, self.subject
        unwatched()  # its power changes are no watched call's I/O
        try:
            for step in self.steps:
                try:
                    if self.plan.stopped:
                        step.not_made = "the run was stopped"
                        if step.group is not None:
                            self._meet(step, ready=False)
                        continue
                    self._make(step)
                except Exception as exc:  # the plan's own fault: never a verdict
                    step.not_made = f"the step could not be made: {describe_error(exc)}"
                finally:
                    step.done.set()
            original = session.original.get(s.key)
            if original is not None and original is not PowerState.UNKNOWN \
                    and s.key not in session.terminated and not self.plan.stopped:
                why = session.restore(s)
                if why is not None and self.left_by:
                    self.restore_failed = why
        except Exception as exc:
            self.restore_failed = describe_error(exc)
        finally:
            for step in self.steps:
                step.done.set()
            with self.changed:
                self.finished.set()
                self.changed.notify_all()

    def _left(self, owner: str) -> None:
        with self.changed:
            self.left_by = owner
            self.changed.notify_all()

    def restore_failure(self, owner: str) -> str | None:
        """Why the machine could not be put back, when the check ``owner`` is the one that
        took it away last (the restore it made necessary); None otherwise. Waits until
        the machine is back, another check took it away, or the worker is done."""
        if not any(x.owner == owner for x in self.steps):
            return None
        for step in self.steps:
            if step.owner == owner:
                step.wait()
        with self.changed:
            self.changed.wait_for(lambda: self.finished.is_set() or self.left_by != owner)
            if self.finished.is_set() and self.left_by == owner and self.restore_failed:
                return self.restore_failed
        return None

    def _reading(self) -> Reading | None:
        try:
            return self.plan.session.read(self.subject)
        except Exception:
            return None

    def _reach(self, want: PowerState) -> str | None:
        """Bring the machine to ``want`` (None: it reads it), or why not."""
        session, s = self.plan.session, self.subject
        if session.stopping.is_set():  # interrupted: the session's close puts it back
            return "the run was stopped"
        reading = self._reading()
        if reading is not None and session.accepts(s, want)(reading):
            return None
        verb = Verb.POWER_ON if want is PowerState.ON else Verb.SHUTDOWN
        earlier = self.failed.get(verb)
        if earlier is not None:
            ident = f"{_name(verb)}_READBACK"
            what = (f"{verb.value} was not accepted" if earlier.error else
                    f"the machine did not read {want.value} after {verb.value}")
            return (f"{what} (see {ident}; {earlier.by}: {earlier.describe()}), and it is "
                    "not asked again")
        why = session.ensure(s, want)
        if why is None:
            self._moved(want, "")
        return why

    def _moved(self, now: PowerState, owner: str) -> None:
        original = self.plan.session.original.get(self.subject.key)
        if original is not None and now is not original:
            self._left(owner or self.left_by)
        elif now is original:
            self._left("")

    def _make(self, step: Step) -> None:
        session, s = self.plan.session, self.subject
        if step.kind == "reach":
            why = self._reach(step.want)
            if why is not None:
                step.not_made = why
            return
        assert step.verb is not None
        verb = step.verb
        earlier = self.failed.get(verb)
        if step.kind == "round" and step.counts and earlier is not None:
            step.not_made = (f"not made: an earlier {verb.value} round failed "
                             f"({earlier.by}: {earlier.describe()})")
        else:
            why = self._reach(step.want)
            if why is not None:
                step.not_made = f"precondition not met on {s.key}: {why}"
        if step.group is not None:
            self._meet(step, ready=not step.not_made)
            return
        if step.not_made:
            return
        if session.stopping.is_set():  # interrupted: no verb leaves after the signal
            step.not_made = "the run was stopped"
            return
        start = self._reading()
        if session.stopping.is_set():
            step.not_made = "the run was stopped"
            return
        if step.kind == "idempotent":
            try:
                session.invoke(s, verb)
            except Exception as exc:
                step.error = exc
            step.observation = session.wait_for(s, step.want)
            return
        began = time.monotonic()
        try:
            session.invoke(s, verb)
        except Exception as exc:
            self._record(step, Round(verb, step.by, describe_error(exc), None,
                                     time.monotonic() - began, _state(start)))
            return
        self._read_back(step, start, began)

    def _read_back(self, step: Step, start: Reading | None, began: float) -> None:
        session, s = self.plan.session, self.subject
        assert step.verb is not None
        obs = session.wait_for(s, END_STATE[step.verb])
        fresh: Reading | str | None = None
        if step.verb is Verb.SHUTDOWN and not obs.ok and self.plan.wants_fresh(s) \
                and not any(r.ok for r in self.plan.rounds(s, Verb.SHUTDOWN)):
            fresh = self._fresh_read()
        self._record(step, Round(step.verb, step.by, "", obs, time.monotonic() - began,
                                 _state(start), fresh, step.counts))

    def _fresh_read(self) -> Reading | str:
        session, s = self.plan.session, self.subject
        try:
            fresh = session.fresh_channel(s)
        except Exception as exc:
            return describe_error(exc)
        try:
            return session.read(s, fresh)
        except Exception as exc:
            return describe_error(exc)
        finally:
            session.close_channel(fresh)

    def _record(self, step: Step, done: Round) -> None:
        assert step.verb is not None
        step.round = done
        if not done.ok and step.counts:
            self.failed.setdefault(step.verb, done)
        if done.ok:
            self._moved(END_STATE[step.verb], step.owner)
        elif not done.error:
            self.left_by = step.owner or self.left_by  # where it is now, nobody knows

    def _meet(self, step: Step, ready: bool) -> None:
        """A concurrent round: wait for every machine of the group, send the verb to all of
        them at once (the last to arrive does), then read this machine back."""
        group = step.group
        assert group is not None and step.verb is not None
        s = self.subject
        group.ready[s.key] = ready
        start = self._reading() if ready else None
        try:
            index = group.barrier.wait(BARRIER_S)
            if index == 0:
                self.plan.send_all(group)
            group.barrier.wait(BARRIER_S)
        except threading.BrokenBarrierError:
            step.not_made = step.not_made or "another machine of the concurrent round never came"
            return
        if step.not_made:
            return
        if not all(group.ready.values()):
            late = ", ".join(k for k, ok in group.ready.items() if not ok)
            step.not_made = f"not made: {late} was not ready for it (see its own result)"
            return
        outcome = group.outcomes.get(s.key)
        if isinstance(outcome, BaseException):
            self._record(step, Round(step.verb, step.by, describe_error(outcome), None,
                                     time.monotonic() - group.sent_at, _state(start),
                                     counts=step.counts))
            return
        self._read_back(step, start, group.sent_at)


def _state(reading: Reading | None) -> str:
    return reading.state.value if reading is not None else "unread"


class Plan:
    """Every machine's steps in one session; built once, from the selected checks."""

    def __init__(self, session: ConformanceSession) -> None:
        self.session = session
        self.nodes: dict[str, NodePlan] = {}
        self.fresh: set[str] = set()
        self.stopped = False

    def wants_fresh(self, s: Subject) -> bool:
        return s.key in self.fresh

    def steps(self, s: Subject, owner: str | None = None,
              verb: Verb | None = None) -> list[Step]:
        node = self.nodes.get(s.key)
        if node is None:
            return []
        return [x for x in node.steps if (owner is None or x.owner == owner)
                and (verb is None or x.verb is verb)]

    def rounds(self, s: Subject, verb: Verb) -> list[Round]:
        """Every round of ``verb`` made on ``s`` so far, in order."""
        return [x.round for x in self.steps(s, verb=verb)
                if x.kind == "round" and x.round is not None]

    def settled(self, s: Subject) -> None:
        """Wait until the worker of ``s`` (if any) is done: nothing moves it after."""
        node = self.nodes.get(s.key)
        if node is not None:
            node.finished.wait()

    def send_all(self, group: Group) -> None:
        """One verb to every ready machine of ``group`` at once (through ``invoke_batch``
        where the channel offers it, as the host does); each outcome by machine."""
        session = self.session
        subs = [x for x in group.subjects if group.ready.get(x.key)]
        if len(subs) != len(group.subjects):
            return
        channel = session.channel_of(subs[0])
        verb = group.verb
        method = verb_method(channel, verb)

        async def all_at_once() -> list[Any]:
            if isinstance(channel, BatchInvoker):
                try:
                    return list(await maybe_await(channel.invoke_batch, verb,
                                                  [x.target for x in subs]))
                except Exception as exc:
                    return [exc] * len(subs)
            if method is None:
                return [ChannelError(f"the channel has no method {verb.method}()",
                                     channel=subs[0].channel)] * len(subs)
            return await asyncio.gather(*(maybe_await(method, x.target) for x in subs),
                                        return_exceptions=True)

        group.sent_at = time.monotonic()
        try:
            results = session.loop.run(all_at_once(), session.call_timeout)
        except Exception as exc:
            results = [exc] * len(subs)
        if len(results) != len(subs):
            bad = ChannelError(f"invoke_batch answered {len(results)} outcomes for "
                               f"{len(subs)} targets", channel=subs[0].channel)
            results = [bad] * len(subs)
        for x, r in zip(subs, results, strict=True):
            group.outcomes[x.key] = r

    def start(self) -> None:
        for node in self.nodes.values():
            node.thread.start()

    def worker(self, key: str) -> threading.Thread | None:
        """The started worker that changes machine ``key``, if any."""
        node = self.nodes.get(key)
        if node is None or node.thread.ident is None:
            return None
        return node.thread

    def stop(self, wait: bool = True) -> None:
        """No more steps; wait for the workers (each ends its step in flight), unless not
        ``wait`` (a restore after a signal waits for each machine's own worker)."""
        self.stopped = True
        for node in self.nodes.values():
            for step in node.steps:
                if step.group is not None:
                    step.group.barrier.abort()
        for node in self.nodes.values():
            if wait and node.thread.is_alive():
                node.thread.join(self.session.settings.settle_timeout_s
                                 + self.session.call_timeout + 5)




def _selected(item: pytest.Item, session: ConformanceSession) -> Iterator[tuple[Any, Verb | None,
                                                                               Subject | None]]:
    """(spec, verb, subject or None for a per-channel check) of every check of this suite
    class that pytest will run and the gate lets act."""
    for other in item.session.items:
        spec = spec_of(getattr(other, "function", None))
        if spec is None or other.parent is not item.parent:
            continue
        params = getattr(other, "callspec", None)
        values: dict[str, Any] = dict(params.params) if params is not None else {}
        verb: Verb | None = values.get("verb") or spec.verb
        if not planned(spec, verb):
            continue
        if spec.per_channel:
            if session.settings.allow_destructive:
                yield spec, verb, None
            continue
        try:
            subj = session.subject(values.get("subject"))
        except LookupError:
            continue
        if session.gate(spec, verb, subj) is None:
            yield spec, verb, subj


def concurrent_groups(session: ConformanceSession, verb: Verb) -> list[list[Subject]]:
    """Per channel: its machines that advertise ``verb``, where there are two or more."""
    out = []
    for subs in session.channels().values():
        able = [x for x in subs if isinstance(c := session.caps(x), CapabilitySet)
                and c.advertises(verb)]
        if len(able) >= 2:
            out.append(able)
    return out


def plan_for(item: pytest.Item, session: ConformanceSession) -> Plan:
    """The session's plan, built and started at the first check that asks."""
    with session.owned_lock:
        if isinstance(session.plan, Plan):
            return session.plan
        plan = Plan(session)
        session.plan = plan  # the session stops it when it closes
        wants: dict[str, Wants] = {}
        groups: dict[Verb, list[list[Subject]]] = {}
        for spec, verb, subj in _selected(item, session):
            if subj is None:
                if verb is not None and verb not in groups:
                    groups[verb] = concurrent_groups(session, verb)
                continue
            w = wants.setdefault(subj.key, Wants())
            if spec.template == "{VERB}_READBACK" and verb in ORDER:
                w.readback.add(verb)
            elif spec.template == "{VERB}_REPEATED" and verb is not None:
                w.repeated.add(verb)
            elif spec.template == "POWER_ON_IDEMPOTENT":
                w.idempotent.add(Verb.POWER_ON)
            elif spec.template == "SHUTDOWN_IDEMPOTENT":
                w.idempotent.add(Verb.SHUTDOWN)
            elif spec.template == "READBACK_NOT_STALE":
                w.not_stale = True
                plan.fresh.add(subj.key)
        for verb in ORDER:
            for subs in groups.get(verb, []):
                group = Group(verb, subs)
                for x in subs:
                    wants.setdefault(x.key, Wants()).concurrent.append(group)
        for s in session.subjects:
            mine = wants.get(s.key)
            caps = session.caps(s)
            if mine is None or not mine.any() or not isinstance(caps, CapabilitySet):
                continue
            original = session.original.get(s.key, PowerState.UNKNOWN)
            batch = isinstance(session.channel_of(s), BatchInvoker)
            steps = build_steps(mine, original, caps, session.settings.repeat, batch)
            if steps:
                plan.nodes[s.key] = NodePlan(plan, s, steps)
        _check_groups(plan)
        plan.start()
        return plan


def _check_groups(plan: Plan) -> None:
    """A concurrent round every machine of its group did not plan (a machine whose
    capabilities failed) is one no machine waits for: each of them skips it."""
    planned: dict[int, int] = {}
    for node in plan.nodes.values():
        for step in node.steps:
            if step.group is not None:
                planned[id(step.group)] = planned.get(id(step.group), 0) + 1
    for node in plan.nodes.values():
        for step in node.steps:
            group = step.group
            if group is not None and planned[id(group)] != len(group.subjects):
                group.barrier = threading.Barrier(planned[id(group)])
                for x in group.subjects:
                    if x.key not in plan.nodes:
                        group.ready[x.key] = False


def wait_all(steps: Sequence[Step]) -> list[Step]:
    return [x.wait() for x in steps]
