"""The verb checks: each advertised verb is read back, is idempotent where it should be,
holds over repeated rounds, and a verb not advertised is refused before any I/O; the
state is restored at the end; terminate (never undone) last.

Every power change the verb checks judge is a *round* of its verb, made by the session's
power plan (:mod:`~powerplane_conformance.plan`): from the state the verb is tested from
(read back first), the verb sent, and readback until the state it leads to, within
``settle_timeout_s``. A round is the same observation whichever check it is made for, so
none is made twice: ``{VERB}_READBACK`` is round 1 of ``{VERB}_REPEATED``; the shutdown
and power-on rounds alternate, each the other's precondition; ``READBACK_NOT_STALE`` passes
on a shutdown round that read off. ``{VERB}_REPEATED`` reports every round of its verb,
each with the check it was made for and its readings; a check whose evidence could not be
had is NOT TESTED with why, and a failed round is a failure of its own verb's checks only.
Each check waits for its own steps only: the machines' workers make the rounds while
pytest runs the checks that change nothing.
"""

from __future__ import annotations

from powerplane import (
    CapabilitySet,
    ChannelTimeout,
    NotSupported,
    PowerState,
    Reading,
    Unreachable,
    Verb,
)
from powerplane.channel import verb_method
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.model import END_STATE, VERBS3, Subject, describe_error
from powerplane_conformance.plan import Round, Step, plan_for, wait_all
from powerplane_conformance.session import ConformanceSession

__all__ = ["VERBS3", "RestoreChecks", "Round", "VerbChecks", "accepted", "want_text"]



def _steps(check: CheckContext, owner: str, verb: Verb | None = None) -> list[Step]:
    """This check's steps on its machine, once made (none: the plan has none for it)."""
    plan = plan_for(check.item, check.session)
    return wait_all(plan.steps(check.subject, owner, verb))


def _one(check: CheckContext, owner: str) -> Step:
    steps = _steps(check, owner)
    if not steps:
        check.not_tested(f"no step was planned for {owner} on {check.subject.key}")
    step = steps[0]
    if step.not_made:
        check.not_tested(step.not_made)
    return step


def _record_rounds(check: CheckContext, rounds: list[Round]) -> None:
    """What the check observed, as a JUnit property (results.json: the slowest latency)."""
    text = "; ".join(f"round {i} ({r.by}): from {r.start or 'unread'}, {r.describe()}"
                     for i, r in enumerate(rounds, 1))
    check.item.user_properties.append(("rounds", text))


def want_text(session: ConformanceSession, subject: Subject, want: PowerState) -> str:
    """How the wanted state reads in a message (off for a blind channel: no longer on)."""
    caps = session.caps(subject)
    if want is PowerState.OFF and isinstance(caps, CapabilitySet) and not caps.sees_power_off:
        return "no longer on (the channel declares it cannot see off)"
    return want.value


def accepted(check: CheckContext, subject: Subject, verb: Verb, what: str = "") -> None:
    """Send ``verb``; FAIL the check when it is not accepted."""
    try:
        check.session.invoke(subject, verb)
    except Exception as exc:
        check.fail(f"{verb.value} accepted{what}", describe_error(exc))


class VerbChecks:
    """Readback after each verb, idempotence, repetition, refusal of what is not advertised."""

    @proves("{VERB}_READBACK", verbs=VERBS3, destructive=True, start="verb")
    def test_verb_readback(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        step = _one(check, check.assertion.id)
        done = step.round
        assert done is not None
        _record_rounds(check, [done])
        if done.error:
            check.fail(f"{verb.value} accepted", done.error)
        check.latency(done.latency)
        want = END_STATE[verb]
        if not done.ok:
            assert done.observation is not None
            check.fail(f"reads {want_text(session, s, want)} within "
                       f"{check.settings.settle_timeout_s:g} s after {verb.value}",
                       done.observation.describe())

    @proves("POWER_ON_IDEMPOTENT", verb=Verb.POWER_ON, destructive=True, start="on")
    def test_power_on_idempotent(self, check: CheckContext) -> None:
        step = _one(check, check.assertion.id)
        if step.error is not None:
            check.fail("power-on accepted while on", describe_error(step.error))
        obs = step.observation
        assert obs is not None
        if not obs.ok or "off" in obs.states:
            check.fail("still reads on", obs.describe())

    @proves("SHUTDOWN_IDEMPOTENT", verb=Verb.SHUTDOWN, destructive=True, start="off")
    def test_shutdown_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        step = _one(check, check.assertion.id)
        exc = step.error
        if isinstance(exc, Unreachable | ChannelTimeout):
            if check.caps.sees_power_off:
                check.fail("shutdown accepted while off", describe_error(exc))
            # a channel that cannot see off cannot reach an off machine either: harmless
        elif exc is not None:
            check.fail("shutdown accepted while off", describe_error(exc))
        obs = step.observation
        assert obs is not None
        if not obs.ok or "on" in obs.states:
            check.fail(f"still reads {want_text(session, s, PowerState.OFF)}", obs.describe())

    @proves("READBACK_NOT_STALE", verb=Verb.SHUTDOWN, destructive=True, start="on")
    def test_readback_not_stale(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        plan = plan_for(check.item, session)
        made: Round | None = None
        why = ""
        for step in plan.steps(s, verb=Verb.SHUTDOWN):
            if step.kind != "round":
                continue
            step.wait()
            if step.round is None:
                why = why or step.not_made
                continue
            if step.round.ok:  # this session read a shutdown's change: that is the evidence
                _record_rounds(check, [step.round])
                check.latency(step.round.latency)
                return
            made = made or step.round
            if made.fresh is not None:
                break
        if made is None:
            check.not_tested(why or f"no shutdown round was made on {s.key}")
        if made.error:
            check.not_tested(f"shutdown was not accepted (see SHUTDOWN_READBACK): "
                             f"{made.error}")
        _record_rounds(check, [made])
        assert made.observation is not None
        reading = made.fresh
        if not isinstance(reading, Reading):
            check.not_tested(f"inconclusive: a fresh session could not read: {reading}")
        if session.accepts(s, PowerState.OFF)(reading):
            check.fail(f"reads {want_text(session, s, PowerState.OFF)} after shutdown, as a "
                       f"fresh session to the device does (it reads {reading.state.value})",
                       f"this session still reads {made.observation.describe()}")
        check.not_tested("inconclusive: no session read the machine off after shutdown "
                         "(see SHUTDOWN_READBACK)")

    @proves("{VERB}_REPEATED", verbs=VERBS3, destructive=True, start="verb")
    def test_verb_repeated(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        n = check.settings.repeat
        want = END_STATE[verb]
        plan = plan_for(check.item, session)
        steps = wait_all([x for x in plan.steps(s, verb=verb)
                          if x.kind == "round" and x.counts])
        rounds = [x.round for x in steps if x.round is not None]
        missing = [x.not_made for x in steps if x.round is None and x.not_made]
        bad = [(i, r) for i, r in enumerate(rounds, 1) if not r.ok]
        if rounds:
            _record_rounds(check, rounds)
            check.latency(max(r.latency for r in rounds))
        if not bad:
            if len(rounds) < n:
                check.not_tested(missing[0] if missing else
                                 f"{len(rounds)} of {n} rounds were made on {s.key}")
            return
        every = f"every one of {max(n, len(rounds))} rounds"
        if any(r.error for _, r in bad):
            i, r = next((i, r) for i, r in bad if r.error)
            check.fail(f"{verb.value} accepted in {every}",
                       f"round {i} of {len(rounds)} ({r.by}): {r.describe()}")
        check.fail(f"reads {want_text(session, s, want)} after {verb.value} in {every}",
                   "; ".join(f"round {i} of {len(rounds)} ({r.by}): {r.describe()}"
                             for i, r in bad))

    @proves("UNADVERTISED_REFUSED", verbs=tuple(Verb), absent=True, destructive=True)
    def test_unadvertised_refused(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        plan_for(check.item, session).settled(s)  # the machine is still while it runs
        channel = session.channel_of(s)
        if verb_method(channel, verb) is None:
            return  # no method at all: nothing can be sent
        try:
            before = session.read(s).state
        except Exception:
            before = None
        with IOWatch() as io:
            try:
                result = session.invoke(s, verb)
            except NotSupported:
                result = NotSupported
            except Exception as exc:
                result = exc
        if result is not NotSupported:
            if isinstance(result, BaseException):
                check.fail("NotSupported, raised before any I/O", describe_error(result))
            check.fail("NotSupported, raised before any I/O",
                       f"the call was accepted ({result!r}): a no-op, or worse, for a verb "
                       "it does not advertise")
        if io.connects or io.argv:
            check.fail("NotSupported, raised before any I/O",
                       f"{len(io.connects)} connection(s) and {len(io.argv)} process(es) "
                       "before refusing")
        try:
            after = session.read(s).state
        except Exception:
            after = None
        if before is not None and after is not None and before is not after:
            check.fail("the machine untouched",
                       f"it read {before.value} before and {after.value} after")


class RestoreChecks:
    """The state at the start restored; terminate, never undone, last."""

    @proves("STATE_RESTORED", common=True)
    def test_state_restored(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        plan_for(check.item, session).settled(s)
        original = session.original.get(s.key)
        if original is None or original is PowerState.UNKNOWN:
            check.not_tested(f"the power state of {s.node} at the start was unknown")
        if session.accepts(s, original)(session.read(s)):
            return
        verb = Verb.POWER_ON if original is PowerState.ON else Verb.SHUTDOWN
        if not check.caps.advertises(verb):
            check.not_tested(f"{s.node} is no longer {original.value} and channel {s.channel} "
                             f"cannot {verb.value}: a person must restore it")
        why = session.restore(s)
        if why is not None:
            check.fail(f"reads {original.value}, as at the start", why)

    @proves("{VERB}_READBACK", verbs=(Verb.TERMINATE,), destructive=True,
            start="verb")
    def test_terminate_readback(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        plan_for(check.item, session).settled(s)
        check.precondition(s, PowerState.ON)
        session.terminated.add(s.key)
        accepted(check, s, verb)
        obs = session.wait_for(s, PowerState.OFF)
        if not obs.ok:
            check.fail(f"reads {want_text(session, s, PowerState.OFF)} after terminate",
                       obs.describe())
