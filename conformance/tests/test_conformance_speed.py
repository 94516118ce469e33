"""Where the suite's time goes, cut without weakening a check: readback is polled fast at
first and backs off, and a machine is not restored when the next check on it would only
undo the restore (a restore the channel cannot carry out is still tried, and recorded)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import conformance_liars
import pytest
from conformance_targets import outcome, sim_target

from powerplane_conformance.api import RunSummary
from powerplane_conformance.session import MAX_POLL_S, poll_delays

Run = Callable[..., RunSummary]


def test_readback_is_polled_fast_first_then_backs_off() -> None:
    delays = list(itertools.islice(poll_delays(), 40))
    assert delays[0] <= 0.05
    assert delays == sorted(delays)
    assert delays[1] > delays[0]
    assert max(delays) == MAX_POLL_S
    assert MAX_POLL_S <= 0.5  # a change is seen within half a second of showing


@pytest.mark.usefixtures("liars")
def test_a_restore_the_next_check_would_undo_is_not_sent(run: Run) -> None:
    """One machine, on, repeat 1. After SHUTDOWN_READBACK leaves it off, SHUTDOWN_IDEMPOTENT
    (which starts from off) runs on it as it is: no power-on to restore it and shutdown to
    undo that. Every check still passes and the machine ends as it began."""
    conformance_liars.Recording.sent.clear()
    summary = run(sim_target(type_name="honest-recording", machines={"m1": "on"},
                             conformance={"repeat": 1}))
    assert summary.exit_code == 0, summary.data["results"]
    assert outcome(summary, "SHUTDOWN_READBACK") == {"pass"}
    assert outcome(summary, "SHUTDOWN_IDEMPOTENT") == {"pass"}
    assert outcome(summary, "STATE_RESTORED") == {"pass"}
    sent = [v.split()[0] for v in conformance_liars.Recording.sent if v.endswith(" m1")]
    # every power change is a round of its verb, made once; the idempotent verbs where m1
    # already is in their state
    assert sent == ["power-on", "reboot", "shutdown", "shutdown", "power-on"]


def test_a_restore_the_channel_cannot_do_is_still_tried_at_once(run: Run) -> None:
    """No power-on: the restore after SHUTDOWN_READBACK cannot succeed, and even though
    SHUTDOWN_IDEMPOTENT starts from off it is tried (and recorded) on SHUTDOWN_READBACK."""
    summary = run(sim_target({"verbs": ["reboot", "shutdown"]}, machines={"m1": "on"}))
    rows = [r for r in summary.data["results"] if r["id"] == "SHUTDOWN_READBACK"]
    assert [r["outcome"] for r in rows] == ["pass"]
    assert "does not advertise power-on" in (rows[0]["restore_failed"] or "")
