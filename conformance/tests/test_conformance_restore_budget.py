"""After a signal the restore is bounded and concurrent, and each machine's outcome is said
honestly: ``restored`` only on a reading of its state at the start, ``sent_not_confirmed``
when the verb that puts it back was sent and no reading confirmed it (outcome unknown),
``not_restored`` when nothing was sent; results.json, the HTML and stderr say which, stderr
how to finish by hand, and pytest's KeyboardInterrupt banner is one line instead.

A slow channel (every call 200 ms) and a channel that cannot answer at all (its state-file
lock held by the test until the command has exited) make the budget matter. Nothing is
timed: every wait is an explicit timeout on the operation.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance_targets import sim_target
from test_conformance_interrupted import WAIT_S, Run, held

from powerplane_conformance.session import RESTORE_BUDGET_S

OUTCOME_WORDS = {"restored": "", "sent_not_confirmed": "restore sent, not confirmed "
                 "(outcome unknown)", "not_restored": "not restored"}


def _slow_target(tmp_path: Path) -> tuple[Path, Path]:
    """Two machines on a simulated channel where every call takes 200 ms."""
    state = tmp_path / "lab-state.json"
    data = sim_target({"state_file": str(state), "latency_ms": 200},
                      conformance={"settle_timeout_s": 5})
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    state.write_text(json.dumps({"machines": {"m1": "on", "m2": "off"}, "boots": {},
                                 "dispatches": [], "pending": {}}), encoding="utf-8")
    return path, state


def _outcomes_said(run: Run, data: dict[str, Any]) -> dict[str, str]:
    """Each machine's restore outcome, checked to read the same in results.json, the HTML
    and on stderr."""
    assert data["verdict"] == "interrupted" and data["conformant"] is False
    machines = data["interrupted"]["machines"]
    assert {m["subject"] for m in machines} == {"n-m1@lab", "n-m2@lab"}
    page = run.html.read_text(encoding="utf-8")
    err = run.stderr()
    out: dict[str, str] = {}
    for m in machines:
        outcome = m["restore"]
        assert outcome in OUTCOME_WORDS, m
        assert (m["restored"] is True) == (outcome == "restored"), m
        if outcome == "restored":
            assert m["detail"] == "", m
        else:
            assert m["detail"].startswith(OUTCOME_WORDS[outcome]), m
            # the terminal says how to finish it by hand
            assert f"{m['subject']}: {OUTCOME_WORDS[outcome]}" in err, err
            verb = "power-on" if m["original"] == "on" else "shutdown"
            assert f"invoke {m['node']} {verb} --reason" in err, err
        assert f'data-subject="{m["subject"]}" data-restored="{m["restored"]}" ' \
               f'data-restore="{outcome}"' in page
        out[m["subject"]] = outcome
    if "sent_not_confirmed" in out.values():
        assert "Restore sent, not confirmed (outcome unknown): " in data["verdict_reason"]
        assert "restore sent, not confirmed (outcome unknown)" in page
    # one line from pytest, not its KeyboardInterrupt banner and traceback
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err
    assert f"Interrupted: signal {data['interrupted']['signal']}" in err, err
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_slow_channel_restore_reports_each_machine_honestly(
    tmp_path: Path, sig: signal.Signals
) -> None:
    target, state = _slow_target(tmp_path)
    run = Run(target, tmp_path)
    run.shown("POWER_ON_IDEMPOTENT")  # a power check has finished; the plan runs on
    run.signal(sig)
    assert run.proc.wait(timeout=WAIT_S) == 130, run.stdout() + run.stderr()
    data = run.results()
    outcomes = _outcomes_said(run, data)
    assert f"at most {RESTORE_BUDGET_S:g} s" in run.stderr()
    # restored is a reading, never a hope: each machine said restored reads its state at
    # the start (nothing of the run is left to change it: the process is gone)
    machines = json.loads(state.read_text(encoding="utf-8"))["machines"]
    start = {"n-m1@lab": ("m1", "on"), "n-m2@lab": ("m2", "off")}
    for subject, outcome in outcomes.items():
        name, original = start[subject]
        if outcome == "restored":
            assert machines[name] == original, (subject, machines)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [(), ("--subprocess",)])
def test_a_channel_that_never_answers_ends_the_restore_within_its_budget(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    """Every call waits on the lock the test holds until the command has exited: no
    machine can be read or sent anything, so none is restored, none had its verb sent, and
    the command still exits (130) while the lock is held, in this process or (with
    ``--subprocess``) in pytest's child."""
    target, state = _slow_target(tmp_path)
    run = Run(target, tmp_path, *mode)
    run.shown("POWER_ON_IDEMPOTENT")
    with held(state):
        run.in_a_call()
        run.signal(signal.SIGINT)
        code = run.proc.wait(timeout=WAIT_S)
    assert code == 130, run.stdout() + run.stderr()
    data = run.results()
    outcomes = _outcomes_said(run, data)
    assert set(outcomes.values()) == {"not_restored"}, data["interrupted"]["machines"]
    assert data["interrupted"]["machines_restored"] is False
    assert "NOT restored: n-m1@lab" in data["verdict_reason"]
    assert "to finish by hand" in run.stderr()
    for m in data["interrupted"]["machines"]:  # why, in words: nothing left to put it back
        assert " was sent to bring it back" not in m["detail"], m
