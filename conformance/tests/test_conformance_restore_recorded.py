"""A restore after a destructive check that does not succeed is recorded on that check's
result (its message and ``restore_failed``), never swallowed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conformance_targets import sim_target

from powerplane_conformance.api import RunSummary


def test_a_restore_that_cannot_succeed_is_on_the_check(run: Callable[..., RunSummary]) -> None:
    """No power-on: after SHUTDOWN_READBACK the machine cannot be put back on."""
    summary = run(sim_target({"verbs": ["reboot", "shutdown"], "readback": "on-only"},
                             machines={"m1": "on", "m2": "on"}))
    rows = [r for r in summary.data["results"] if r["id"] == "SHUTDOWN_READBACK"]
    assert rows and all(r["outcome"] == "pass" for r in rows)
    for r in rows:
        assert r["restore_failed"] and "does not advertise power-on" in r["restore_failed"]
        assert "restore failed after the check" in r["message"]
    untouched = [r for r in summary.data["results"] if r["id"] == "REBOOT_READBACK"]
    assert untouched and all(r["restore_failed"] is None for r in untouched)


@pytest.mark.usefixtures("liars")
def test_a_restore_whose_verb_fails_is_on_the_check(run: Callable[..., RunSummary]) -> None:
    """power-on fails at the device: SHUTDOWN_READBACK's round leaves the machine off,
    POWER_ON_READBACK fails, and the restore (power-on again) fails too: the restore is
    recorded on the check that took the machine away."""
    summary = run(sim_target({}, machines={"m1": "on", "m2": "on"}, type_name="stuck-off"))
    failed = [r for r in summary.data["results"] if r["id"] == "POWER_ON_READBACK"]
    assert failed and all(r["outcome"] == "fail" for r in failed), summary.data["results"]
    rows = [r for r in summary.data["results"] if r["id"] == "SHUTDOWN_READBACK"]
    assert rows
    for r in rows:
        assert r["outcome"] == "pass"
        assert "power-on to reach on failed" in r["restore_failed"]
        assert "chassis interlock open" in r["restore_failed"]
