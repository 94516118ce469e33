"""The verb checks: each advertised verb is read back, is idempotent where it should be,
holds over repeated rounds, and a verb not advertised is refused before any I/O; the
state is restored at the end; terminate (never undone) last.

Every power change the verb checks make is a *round* of its verb, recorded per machine
(:func:`rounds_of`): from the state the verb is tested from (read back first), the verb
sent, and readback until the state it leads to, within ``settle_timeout_s``. A round is
the same observation whichever check made it, so none is made twice: ``{VERB}_READBACK``
is round 1 of ``{VERB}_REPEATED``; the shutdown that brings a machine off for a power-on
round is a shutdown round, and the power-on that brings it back on is a power-on round
(the rounds of the two verbs alternate); ``READBACK_NOT_STALE`` passes on a shutdown
round that read off. ``{VERB}_REPEATED`` makes only the rounds still missing and reports
every round of its verb, each with the check that made it and its readings; a check
whose evidence could not be had is NOT TESTED with why, and a failed round is a failure
of its own verb's checks only.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import Channel, PowerState, verb_method
from powerplane.errors import ChannelTimeout, NotSupported, Unreachable
from powerplane_conformance.checks import CheckContext
from powerplane_conformance.checks import check as proves
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.session import (
    END_STATE,
    START_STATE,
    ConformanceSession,
    Observation,
    Subject,
    describe_error,
)

__all__ = ["VERBS3", "RestoreChecks", "Round", "VerbChecks", "accepted", "reach", "rounds_of",
           "verb_round", "want_text"]

VERBS3 = (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON)


@dataclass(frozen=True)
class Round:
    """One round of a verb on one machine: sent from its start state, read back after."""

    verb: Verb
    by: str
    """Which check made it, and why (``POWER_ON_READBACK``, ``the precondition of ...``)."""
    error: str
    """Why the verb was not accepted (empty when it was)."""
    observation: Observation | None
    """The readback after it (None when the verb was not accepted)."""
    latency: float
    """Seconds from sending the verb to the end of the readback."""

    @property
    def ok(self) -> bool:
        return not self.error and self.observation is not None and self.observation.ok

    def describe(self) -> str:
        if self.error:
            return f"{self.verb.value} not accepted: {self.error}"
        assert self.observation is not None
        return f"{self.observation.describe()}, {self.latency:.2f} s after {self.verb.value}"


_ROUNDS: weakref.WeakKeyDictionary[ConformanceSession, dict[tuple[str, Verb], list[Round]]] = \
    weakref.WeakKeyDictionary()


def rounds_of(session: ConformanceSession, subject: Subject, verb: Verb) -> list[Round]:
    """Every round of ``verb`` made on ``subject`` in this session, oldest first."""
    return list(_ROUNDS.get(session, {}).get((subject.key, verb), []))


def verb_round(check: CheckContext, subject: Subject, verb: Verb, by: str) -> Round:
    """Send ``verb`` (the machine reads the state it is tested from: the caller made sure)
    and read back until the state it leads to, within the settle window; recorded."""
    session = check.session
    start = time.monotonic()
    try:
        session.invoke(subject, verb)
    except Exception as exc:
        done = Round(verb, by, describe_error(exc), None, time.monotonic() - start)
    else:
        obs = session.wait_for(subject, END_STATE[verb])
        done = Round(verb, by, "", obs, time.monotonic() - start)
    _ROUNDS.setdefault(session, {}).setdefault((subject.key, verb), []).append(done)
    return done


def reach(check: CheckContext, subject: Subject, want: PowerState, why: str) -> None:
    """Bring the machine to ``want`` or end as NOT TESTED with why not (as
    :meth:`CheckContext.precondition`). When it reads the state the verb to ``want``
    (shutdown or power-on) is tested from, and the channel advertises that verb, the
    change is a recorded round of it; otherwise the session's own way is taken."""
    session = check.session
    verb = Verb.POWER_ON if want is PowerState.ON else Verb.SHUTDOWN
    caps = session.caps(subject)
    if isinstance(caps, CapabilitySet) and caps.advertises(verb):
        try:
            reading = session.read(subject)
        except Exception:
            reading = None
        if reading is not None and not session.accepts(subject, want)(reading) \
                and session.accepts(subject, START_STATE[verb])(reading):
            done = verb_round(check, subject, verb, why)
            if done.ok:
                return
            if done.error:
                text = f"{verb.value} to reach {want.value} failed: {done.error}"
            else:
                assert done.observation is not None
                ident = "POWER_ON_READBACK" if verb is Verb.POWER_ON else "SHUTDOWN_READBACK"
                text = (f"the machine did not read {want.value} after {verb.value} (see "
                        f"{ident}): {done.observation.describe()}")
            check.not_tested(f"precondition not met on {subject.key}: {text}")
    check.precondition(subject, want)


def _record_rounds(check: CheckContext, rounds: list[Round]) -> None:
    """What the check observed, as a JUnit property (results.json: the slowest latency)."""
    text = "; ".join(f"round {i} ({r.by}): {r.describe()}" for i, r in enumerate(rounds, 1))
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
        ident = check.assertion.id
        reach(check, s, START_STATE[verb], f"the precondition of {ident}")
        done = verb_round(check, s, verb, ident)
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
        s, session = check.subject, check.session
        reach(check, s, PowerState.ON, f"the precondition of {check.assertion.id}")
        accepted(check, s, Verb.POWER_ON, " while on")
        obs = session.wait_for(s, PowerState.ON)
        if not obs.ok or "off" in obs.states:
            check.fail("still reads on", obs.describe())

    @proves("SHUTDOWN_IDEMPOTENT", verb=Verb.SHUTDOWN, destructive=True, start="off")
    def test_shutdown_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        reach(check, s, PowerState.OFF, f"the precondition of {check.assertion.id}")
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except (Unreachable, ChannelTimeout) as exc:
            if check.caps.sees_power_off:
                check.fail("shutdown accepted while off", describe_error(exc))
            # a channel that cannot see off cannot reach an off machine either: harmless
        except Exception as exc:
            check.fail("shutdown accepted while off", describe_error(exc))
        obs = session.wait_for(s, PowerState.OFF)
        if not obs.ok or "on" in obs.states:
            check.fail(f"still reads {want_text(session, s, PowerState.OFF)}", obs.describe())

    @proves("READBACK_NOT_STALE", verb=Verb.SHUTDOWN, destructive=True, start="on")
    def test_readback_not_stale(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        seen = [r for r in rounds_of(session, s, Verb.SHUTDOWN) if r.ok]
        if seen:  # this session read a shutdown's change: that is the evidence
            _record_rounds(check, seen[:1])
            check.latency(seen[0].latency)
            return
        ident = check.assertion.id
        reach(check, s, PowerState.ON, f"the precondition of {ident}")
        done = verb_round(check, s, Verb.SHUTDOWN, ident)
        if done.error:
            check.not_tested(f"shutdown was not accepted (see SHUTDOWN_READBACK): "
                             f"{done.error}")
        if done.ok:
            _record_rounds(check, [done])
            check.latency(done.latency)
            return
        assert done.observation is not None
        obs = done.observation
        fresh: Channel = session.fresh_channel(s)
        try:
            reading = session.read(s, fresh)
        except Exception as exc:
            check.not_tested(f"inconclusive: a fresh session could not read: {describe_error(exc)}")
        finally:
            session.close_channel(fresh)
        if session.accepts(s, PowerState.OFF)(reading):
            check.fail(f"reads {want_text(session, s, PowerState.OFF)} after shutdown, as a "
                       f"fresh session to the device does (it reads {reading.state.value})",
                       f"this session still reads {obs.describe()}")
        check.not_tested("inconclusive: no session read the machine off after shutdown "
                         "(see SHUTDOWN_READBACK)")

    @proves("{VERB}_REPEATED", verbs=VERBS3, destructive=True, start="verb")
    def test_verb_repeated(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        n = check.settings.repeat
        ident = check.assertion.id
        want = END_STATE[verb]
        rounds = rounds_of(session, s, verb)  # made earlier: its READBACK, preconditions
        while len(rounds) < n and all(r.ok for r in rounds):
            k = len(rounds) + 1
            # from the start state: for power-on and shutdown, a round of the other verb
            reach(check, s, START_STATE[verb], f"the precondition of {ident} round {k}")
            verb_round(check, s, verb, f"{ident} round {k}")
            rounds = rounds_of(session, s, verb)
        _record_rounds(check, rounds)
        check.latency(max(r.latency for r in rounds))
        bad = [(i, r) for i, r in enumerate(rounds, 1) if not r.ok]
        if not bad:
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
        check.precondition(s, PowerState.ON)
        session.terminated.add(s.key)
        accepted(check, s, verb)
        obs = session.wait_for(s, PowerState.OFF)
        if not obs.ok:
            check.fail(f"reads {want_text(session, s, PowerState.OFF)} after terminate",
                       obs.describe())
