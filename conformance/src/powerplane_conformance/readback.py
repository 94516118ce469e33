"""The readback checks: a reading comes back, and a channel that cannot see power off never
reads ``off``."""

from __future__ import annotations

from powerplane import PowerState, Verb
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.model import describe_error

__all__ = ["ReadbackChecks"]


class ReadbackChecks:
    """Readback answers; a blind channel never reads off."""

    @proves("READBACK_ANSWERS", common=True)
    def test_readback_answers(self, check: CheckContext) -> None:
        try:
            check.session.read(check.subject)
        except Exception as exc:
            check.fail("a reading (on, off or unknown)", describe_error(exc))

    @proves("BLIND_NEVER_OFF", common=True)
    def test_blind_never_off(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        if check.caps.sees_power_off:
            check.skip(f"channel {s.channel} declares it can see power off; this check applies "
                       "to channels that cannot")
        reading = session.read(s)
        if reading.state is PowerState.OFF:
            check.fail("never off", f"it read off ({reading.detail})")
        caps = check.caps
        if not (check.settings.allow_destructive and caps.advertises(Verb.SHUTDOWN)
                and caps.advertises(Verb.POWER_ON)):
            return  # no shutdown here: without power-on the suite could not undo it
        from powerplane_conformance.plan import plan_for

        plan_for(check.item, session).settled(s)  # no other change in flight on it
        if session.ensure(s, PowerState.ON) is not None:
            return
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except Exception:
            return
        try:
            obs = session.wait_for(s, PowerState.OFF, full_window=True)
            if "off" in obs.states:
                check.fail("never off, even after shutdown", f"it read {obs.describe()}")
        finally:
            check.restore(s)
