"""The verb checks: each advertised verb is read back, is idempotent where it should be,
holds over repeated rounds, and a verb not advertised is refused before any I/O; the
state is restored at the end; terminate (never undone) last."""

from __future__ import annotations

import time

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
    Subject,
    describe_error,
)

__all__ = ["VERBS3", "RestoreChecks", "VerbChecks", "accepted", "want_text"]

VERBS3 = (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON)


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
        check.precondition(s, START_STATE[verb])
        start = time.monotonic()
        accepted(check, s, verb)
        want = END_STATE[verb]
        obs = session.wait_for(s, want)
        check.latency(time.monotonic() - start)
        if not obs.ok:
            check.fail(f"reads {want_text(session, s, want)} within "
                       f"{check.settings.settle_timeout_s:g} s after {verb.value}",
                       obs.describe())

    @proves("POWER_ON_IDEMPOTENT", verb=Verb.POWER_ON, destructive=True, start="on")
    def test_power_on_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.ON)
        accepted(check, s, Verb.POWER_ON, " while on")
        obs = session.wait_for(s, PowerState.ON)
        if not obs.ok or "off" in obs.states:
            check.fail("still reads on", obs.describe())

    @proves("SHUTDOWN_IDEMPOTENT", verb=Verb.SHUTDOWN, destructive=True, start="off")
    def test_shutdown_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.OFF)
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
        check.precondition(s, PowerState.ON)
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except Exception as exc:
            check.not_tested(f"shutdown was not accepted (see SHUTDOWN_READBACK): "
                             f"{describe_error(exc)}")
        obs = session.wait_for(s, PowerState.OFF)
        if obs.ok:
            return
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
        want = END_STATE[verb]
        for i in range(1, n + 1):
            check.precondition(s, START_STATE[verb])
            accepted(check, s, verb, f" in round {i} of {n}")
            obs = session.wait_for(s, want)
            if not obs.ok:
                check.fail(f"reads {want_text(session, s, want)} after {verb.value} in every "
                           f"one of {n} rounds", f"round {i}: {obs.describe()}")

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
