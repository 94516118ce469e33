"""The suite catches liars, each with a FAIL naming the right assertion."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conformance_targets import messages, outcome, sim_target

from powerplane_conformance.api import RunSummary

pytestmark = pytest.mark.usefixtures("liars")

Run = Callable[..., RunSummary]

FAST = {"settle_timeout_s": 0.3}
"""A liar never settles: keep each wait it fails short."""


def test_silent_power_on_fails_power_on_readback(run: Run) -> None:
    summary = run(sim_target(
        {"faults": {"*": "silent"}}, machines={"m1": "off"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert summary.data["verdict"] == "fail"
    assert outcome(summary, "POWER_ON_READBACK") == {"fail"}
    text = messages(summary, "POWER_ON_READBACK")
    assert "expected: reads on within 0.3 s after power-on" in text
    assert "observed: off" in text


def test_off_reader_fails_power_on_readback(run: Run) -> None:
    summary = run(sim_target(
        type_name="liar-off-reader", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert outcome(summary, "POWER_ON_READBACK") == {"fail"}
    assert outcome(summary, "POWER_ON_REPEATED") == {"fail"}
    assert "observed: off" in messages(summary, "POWER_ON_READBACK")


def test_blind_channel_that_reads_off_fails_blind_never_off(run: Run) -> None:
    summary = run(sim_target(
        type_name="liar-blind", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert outcome(summary, "BLIND_NEVER_OFF") == {"fail"}
    assert "never off, even after shutdown" in messages(summary, "BLIND_NEVER_OFF")


def test_stale_readback_fails_readback_not_stale(run: Run) -> None:
    chan = {"endpoint": f"stale-{uuid.uuid4().hex}"}
    summary = run(sim_target(
        chan, type_name="liar-stale", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert outcome(summary, "READBACK_NOT_STALE") == {"fail"}
    assert "fresh session" in messages(summary, "READBACK_NOT_STALE")


def test_silent_channel_is_not_called_stale(run: Run) -> None:
    """Stale readback and a verb that does nothing look alike; a fresh session tells them apart."""
    summary = run(sim_target(
        {"faults": {"*": "silent"}}, machines={"m1": "on"},
        conformance=FAST))
    assert outcome(summary, "SHUTDOWN_READBACK") == {"fail"}
    assert "fail" not in outcome(summary, "READBACK_NOT_STALE")


def test_swallowed_error_fails_unknown_target_error(run: Run) -> None:
    summary = run(sim_target(
        type_name="liar-swallow", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert outcome(summary, "UNKNOWN_TARGET_ERROR") == {"fail"}
    assert "an error swallowed" in messages(summary, "UNKNOWN_TARGET_ERROR")


def test_password_in_error_fails_secret_not_disclosed(
    run: Run, tmp_path: Path, _password: str
) -> None:
    summary = run(sim_target(
        type_name="liar-leak", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert outcome(summary, "SECRET_NOT_DISCLOSED") == {"fail"}
    assert "a wrong secret in the wrong-credentials error" in messages(
        summary, "SECRET_NOT_DISCLOSED")
    report = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert "ppc-" not in report  # the canary was redacted from the report
    assert _password not in report


def test_noop_for_unadvertised_verb_fails_unadvertised_refused(run: Run) -> None:
    chan = {"verbs": ["reboot", "power-on"]}
    summary = run(sim_target(
        chan, type_name="liar-noop", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    results = [r for r in summary.data["results"] if r["id"] == "UNADVERTISED_REFUSED"]
    by_verb = {r["verb"]: r["outcome"] for r in results}
    assert by_verb == {"reboot": "skip", "shutdown": "fail", "power-on": "skip",
                       "terminate": "pass"}
    assert "a no-op, or worse" in messages(summary, "UNADVERTISED_REFUSED")


def test_honest_simulated_channel_passes_in_process_run(run: Run) -> None:
    summary = run(sim_target(
        conformance=FAST))
    assert summary.exit_code == 0
    assert summary.data["counts"]["fail"] == 0
    assert summary.data["counts"]["pass"] > 20


def test_lagging_readback_fails_readback_not_stale(run: Run) -> None:
    """Readback that shows each change only after longer than the settle window: the
    readback checks fail, and the stale-readback check names it, however fast the suite
    reads (what the channel shows depends on time, not on how often it is asked)."""
    chan = {"endpoint": f"lagging-{uuid.uuid4().hex}"}
    summary = run(sim_target(
        chan, type_name="liar-lagging", machines={"m1": "on"},
        conformance=FAST))
    assert summary.exit_code == 1
    assert summary.data["verdict"] == "fail"
    assert outcome(summary, "SHUTDOWN_READBACK") == {"fail"}
    assert outcome(summary, "READBACK_NOT_STALE") == {"fail"}
    text = messages(summary, "READBACK_NOT_STALE")
    assert "as a fresh session to the device does (it reads off)" in text
    assert "this session still reads on" in text
