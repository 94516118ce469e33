"""No "yes" without proof: the verdict, its headline and reason, the advertised-versus-verified
matrix, the exit codes (``--require-complete``) and the confirmation a destructive run asks for.

Every run here is a real run of the suite against core's ``simulated`` channel type (or a
liar built on it). Verbs the channel saw are counted in its ``state_file`` (the simulated
channel's dispatch log, shared by every session and process that opens the channel).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conformance_targets import sim_target

from powerplane.cli import cli
from powerplane_conformance import cli as conformance_cli
from powerplane_conformance.api import RunSummary, exit_code
from powerplane_conformance.report import summary_text

Write = Callable[[dict[str, Any]], Path]
Run = Callable[..., RunSummary]

VERBS = ["reboot", "shutdown", "power-on", "terminate"]
STATUSES = {"verified", "not_verified", "failed", "not_advertised"}
OUTCOMES = {"pass", "fail", "skip", "not_tested", "xfail"}
READ_ONLY = {"allow_destructive": False}


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def cells(data: dict[str, Any], channel: str = "lab") -> dict[str, dict[str, Any]]:
    """The matrix row of ``channel``: verb -> cell."""
    rows = [m for m in data["matrix"] if m["channel"] == channel]
    assert len(rows) == 1, data["matrix"]
    return {c["verb"]: c for c in rows[0]["verbs"]}


def dispatches(state_file: Path) -> list[list[str]]:
    """Every verb the simulated channel acted on or accepted, from its state file."""
    if not state_file.exists():
        return []
    found: list[list[str]] = json.loads(state_file.read_text(encoding="utf-8"))["dispatches"]
    return found


def check_matrix_shape(data: dict[str, Any]) -> None:
    """The matrix is exactly the shared data model: per channel under test, every verb."""
    assert [m["channel"] for m in data["matrix"]] == [c["name"] for c in data["channels"]]
    for m in data["matrix"]:
        assert set(m) == {"channel", "type", "verbs"}
        assert [c["verb"] for c in m["verbs"]] == VERBS
        for c in m["verbs"]:
            assert set(c) == {"verb", "advertised", "status", "reasons", "checks"}
            assert c["status"] in STATUSES and isinstance(c["advertised"], bool)
            assert set(c["checks"]) == OUTCOMES
            assert all(isinstance(r, str) and r for r in c["reasons"])
            assert (c["status"] == "not_advertised") <= (not c["advertised"])


# --- the verdict --------------------------------------------------------------------------

def test_read_only_run_is_incomplete_not_pass(run: Run) -> None:
    summary = run(sim_target(conformance=READ_ONLY))
    data = summary.data
    assert data["verdict"] == "incomplete" and data["conformant"] is False
    assert data["headline"] == "not verified: 3 of 3 advertised verbs untested"
    assert "allow_destructive is off in the target file" in data["verdict_reason"]
    assert summary.exit_code == 0
    check_matrix_shape(data)
    row = cells(data)
    for verb in ("reboot", "shutdown", "power-on"):
        assert row[verb]["advertised"] and row[verb]["status"] == "not_verified", row[verb]
        assert row[verb]["checks"]["not_tested"] > 0 and row[verb]["checks"]["pass"] == 0
        assert any("allow_destructive is off" in r for r in row[verb]["reasons"])
    assert row["terminate"] == {**row["terminate"], "advertised": False,
                                "status": "not_advertised"}
    text = summary_text(data)
    assert text.splitlines()[0] == "not verified: 3 of 3 advertised verbs untested"
    assert "conformant for every advertised verb" not in text
    assert ": yes" not in text.splitlines()[0]


def test_read_only_run_exits_one_under_require_complete(run: Run) -> None:
    summary = run(sim_target(conformance=READ_ONLY), require_complete=True)
    assert summary.data["verdict"] == "incomplete"
    assert summary.exit_code == 1


def test_full_destructive_run_on_the_same_target_passes(run: Run) -> None:
    summary = run(sim_target(conformance={"allow_destructive": True}), require_complete=True)
    data = summary.data
    assert data["verdict"] == "pass" and data["conformant"] is True, data["verdict_reason"]
    assert data["headline"] == "pass: every advertised verb verified (3 of 3)"
    assert summary.exit_code == 0
    check_matrix_shape(data)
    row = cells(data)
    for verb in ("reboot", "shutdown", "power-on"):
        assert row[verb]["status"] == "verified" and row[verb]["reasons"] == []
        assert row[verb]["checks"]["pass"] > 0
        assert row[verb]["checks"]["fail"] == row[verb]["checks"]["not_tested"] == 0
    assert row["terminate"]["status"] == "not_advertised"
    # what was not tested outside the verbs is still said, never hidden by a pass
    assert "CLOSED_PORT_UNREACHABLE" in data["verdict_reason"]
    assert summary_text(data).splitlines()[0] == data["headline"]


def test_a_verb_whose_concurrency_check_could_not_run_is_not_verified(run: Run) -> None:
    """One node: the concurrency checks are NOT TESTED, so no verb is fully verified (the
    verdict stays incomplete); the headline says what is true: every other check of
    every advertised verb passed on that one node, only concurrency was not verified."""
    summary = run(sim_target(machines={"m1": "on"}))
    data = summary.data
    assert data["verdict"] == "incomplete" and summary.exit_code == 0
    assert data["conformant"] is False
    assert data["headline"] == "verified on one node; concurrency not verified (one node)"
    assert summary_text(data).splitlines()[0] == data["headline"]
    assert "untested" not in data["headline"]
    row = cells(data)
    assert row["reboot"]["checks"]["pass"] > 0 and row["reboot"]["status"] == "not_verified"
    assert any("fewer than two nodes" in r and "REBOOT_CONCURRENT" in r
               for r in row["reboot"]["reasons"])


def test_one_node_headline_still_counts_a_verb_with_other_checks_untested(run: Run) -> None:
    """One node on a channel that cannot power on: reboot's only gap is its concurrency,
    shutdown also has SHUTDOWN_REPEATED not tested (the machine cannot come back on).
    Only reboot is called verified on one node; shutdown is counted untested."""
    summary = run(sim_target(machines={"m1": "on"}, channel={"verbs": ["reboot", "shutdown"]}))
    data = summary.data
    row = cells(data)
    assert data["verdict"] == "incomplete" and data["conformant"] is False
    assert row["reboot"]["status"] == row["shutdown"]["status"] == "not_verified"
    assert any("SHUTDOWN_REPEATED" in r for r in row["shutdown"]["reasons"])
    assert data["headline"] == ("not verified: 1 of 2 advertised verbs untested; 1 verified "
                                "on one node (concurrency not verified: one node)")


def test_a_read_only_run_on_one_node_is_not_called_verified_on_one_node(run: Run) -> None:
    """The one-node headline needs the verbs' other checks to have passed: a read-only run
    on one node (every check of every verb not tested) still heads "not verified"."""
    summary = run(sim_target(machines={"m1": "on"}, conformance=READ_ONLY))
    assert summary.data["headline"] == "not verified: 3 of 3 advertised verbs untested"


@pytest.mark.usefixtures("liars")
def test_a_liar_fails_with_exit_one_and_the_failed_verb_in_the_matrix(run: Run) -> None:
    summary = run(sim_target(type_name="liar-off-reader", machines={"m1": "on"},
                             conformance={"settle_timeout_s": 0.3}))
    data = summary.data
    failed = [r for r in data["results"] if r["outcome"] == "fail"]
    assert data["verdict"] == "fail" and data["conformant"] is False
    assert data["headline"] == f"fail: {len(failed)} checks failed"
    assert summary.exit_code == 1
    assert "POWER_ON_READBACK on n-m" in data["verdict_reason"]
    check_matrix_shape(data)
    cell = cells(data)["power-on"]
    assert cell["status"] == "failed" and cell["checks"]["fail"] > 0
    assert any(r.startswith("POWER_ON_READBACK on n-m") and "observed: off" in r
               for r in cell["reasons"])


def test_declared_defect_counts_as_shown_and_is_named_in_the_reason(run: Run) -> None:
    summary = run(sim_target({"faults": {"*": "silent"}}, machines={"m1": "off"},
                             conformance={"settle_timeout_s": 0.3, "xfail": {
                                 "POWER_ON_READBACK": "firmware 2.1 ignores On",
                                 "POWER_ON_REPEATED": "same", "POWER_ON_CONCURRENT": "same"}}))
    data = summary.data
    assert data["counts"]["fail"] == 0 and data["counts"]["xfail"] >= 2
    assert "Declared defects observed (xfail): POWER_ON_READBACK" in data["verdict_reason"]
    # the machines never came on: the other verbs' checks could not run, and say so
    assert data["verdict"] == "incomplete" and summary.exit_code == 0
    assert cells(data)["shutdown"]["status"] == "not_verified"


def test_only_the_channel_under_test_is_in_the_matrix(run: Run) -> None:
    data = sim_target(conformance=READ_ONLY)
    data["channels"]["spare"] = {**data["channels"]["lab"], "machines": {"s1": "on"}}
    data["nodes"]["n-s1"] = {"channels": [{"channel": "spare", "target": "s1"}]}
    data["conformance"]["nodes"].append("n-s1")
    data["conformance"]["negative"]["spare"] = {"secret_key": "password"}
    summary = run(data, channel="spare")
    assert [m["channel"] for m in summary.data["matrix"]] == ["spare"]
    assert summary.data["headline"] == "not verified: 3 of 3 advertised verbs untested"


def test_exit_codes_follow_the_verdict() -> None:
    counts = {"pass": 1, "fail": 0, "skip": 0, "not_tested": 0, "xfail": 0}
    assert exit_code({"verdict": "pass", "counts": counts}) == 0
    assert exit_code({"verdict": "pass", "counts": counts}, require_complete=True) == 0
    assert exit_code({"verdict": "incomplete", "counts": counts}) == 0
    assert exit_code({"verdict": "incomplete", "counts": counts}, require_complete=True) == 1
    assert exit_code({"verdict": "fail", "counts": {**counts, "fail": 1}}) == 1
    assert exit_code({"verdict": "pass", "counts": counts}, 3) == 1  # pytest broke
    assert exit_code({"verdict": "maybe", "counts": counts}) == 1  # unknown: never a yes


# --- the command --------------------------------------------------------------------------

def test_cli_read_only_is_incomplete_exit_zero_and_one_under_require_complete(
    write_target: Write, tmp_path: Path
) -> None:
    target = write_target(sim_target(conformance=READ_ONLY))
    report = tmp_path / "results.json"
    result = invoke("conformance", "--target", str(target), "--report", str(report))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "not verified: 3 of 3 advertised verbs untested"
    assert "allow_destructive is off" in result.stdout.splitlines()[1]
    saved = json.loads(report.read_text(encoding="utf-8"))
    assert saved["verdict"] == "incomplete" and saved["conformant"] is False
    check_matrix_shape(saved)
    result = invoke("conformance", "--target", str(target), "--require-complete")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("not verified:")


def test_cli_json_carries_verdict_headline_reason_and_matrix(write_target: Write) -> None:
    target = write_target(sim_target())
    result = invoke("conformance", "--target", str(target), "--yes", "--require-complete",
                    "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "pass" and data["conformant"] is True
    assert data["headline"] == "pass: every advertised verb verified (3 of 3)"
    assert data["verdict_reason"]
    check_matrix_shape(data)
    assert {c["status"] for c in cells(data).values()} == {"verified", "not_advertised"}


@pytest.mark.usefixtures("liars")
def test_cli_liar_fails_exit_one(write_target: Write) -> None:
    target = write_target(sim_target(type_name="liar-off-reader", machines={"m1": "on"},
                                     conformance={"settle_timeout_s": 0.3}))
    result = invoke("conformance", "--target", str(target), "--yes")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].startswith("fail: ")


# --- confirming a destructive run -----------------------------------------------------------

@pytest.fixture
def destructive(write_target: Write, tmp_path: Path) -> tuple[Path, Path]:
    """A destructive target whose channel logs every verb it sees in a state file."""
    state = tmp_path / "lab-state.json"
    return write_target(sim_target({"state_file": str(state)})), state


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdin counts as a terminal (the answer comes from CliRunner's input)."""
    monkeypatch.setattr(conformance_cli, "_interactive", lambda: True)


@pytest.mark.usefixtures("terminal")
def test_typed_channel_name_proceeds(destructive: tuple[Path, Path]) -> None:
    target, state = destructive
    result = invoke("conformance", "--target", str(target), input="lab\n")
    assert result.exit_code == 0, result.output
    assert "Type the channel name to proceed" in result.stderr
    assert "through channel lab to 2 nodes (n-m1, n-m2)" in result.stderr
    assert result.stdout.splitlines()[0] == "pass: every advertised verb verified (3 of 3)"
    assert dispatches(state), "the confirmed run sent verbs"


@pytest.mark.usefixtures("terminal")
@pytest.mark.parametrize("answer", ["lob\n", "\n", "lab lab2\n", "LAB\n"])
def test_wrong_answer_exits_two_and_sends_nothing(
    destructive: tuple[Path, Path], answer: str
) -> None:
    target, state = destructive
    result = invoke("conformance", "--target", str(target), input=answer)
    assert result.exit_code == 2
    assert "confirmation did not match the channel name (lab); nothing was sent" \
        in result.stderr
    assert result.stdout == ""
    assert dispatches(state) == [] and not state.exists()


@pytest.mark.usefixtures("terminal")
def test_yes_skips_the_question(destructive: tuple[Path, Path]) -> None:
    target, state = destructive
    result = invoke("conformance", "--target", str(target), "--yes")
    assert result.exit_code == 0, result.output
    assert "Type the channel" not in result.output
    assert dispatches(state)


@pytest.mark.usefixtures("terminal")
def test_read_only_run_asks_nothing(write_target: Write) -> None:
    target = write_target(sim_target(conformance=READ_ONLY))
    result = invoke("conformance", "--target", str(target))
    assert result.exit_code == 0, result.output
    assert "Type the channel" not in result.output


@pytest.mark.usefixtures("terminal")
def test_several_channels_are_typed_back_in_any_order(
    write_target: Write, tmp_path: Path
) -> None:
    data = sim_target({"state_file": str(tmp_path / "lab.json")})
    data["channels"]["spare"] = {**data["channels"]["lab"], "machines": {"s1": "on"},
                                 "state_file": str(tmp_path / "spare.json")}
    data["nodes"]["n-s1"] = {"channels": [{"channel": "spare", "target": "s1"}]}
    data["conformance"]["nodes"].append("n-s1")
    data["conformance"]["negative"]["spare"] = {"secret_key": "password"}
    target = write_target(data)
    wrong = invoke("conformance", "--target", str(target), input="lab\n")
    assert wrong.exit_code == 2 and "(lab, spare)" in wrong.stderr
    assert not (tmp_path / "lab.json").exists() and not (tmp_path / "spare.json").exists()
    right = invoke("conformance", "--target", str(target), input="spare, lab\n")
    assert right.exit_code in (0, 1), right.output
    assert "Type the channel names to proceed (separated by spaces)" in right.stderr
    assert dispatches(tmp_path / "lab.json") and dispatches(tmp_path / "spare.json")


def test_no_terminal_and_no_yes_refuses_and_sends_nothing(
    destructive: tuple[Path, Path]
) -> None:
    target, state = destructive
    result = invoke("conformance", "--target", str(target), input="lab\n")
    assert result.exit_code == 2
    assert "no terminal to confirm on; nothing was sent (pass --yes" in result.stderr
    assert result.stdout == "" and not state.exists()


def test_bad_target_is_exit_two_before_any_question(write_target: Write) -> None:
    target = write_target(sim_target(conformance={"settle_timeout_s": -1}))
    result = invoke("conformance", "--target", str(target))
    assert result.exit_code == 2
    assert "conformance.settle_timeout_s" in result.stderr
    assert "Type the channel" not in result.output and "--yes" not in result.output


@pytest.mark.slow
@pytest.mark.parametrize(("answer", "code"), [("lab", 0), ("nope", 2)])
def test_the_question_on_a_real_terminal(
    destructive: tuple[Path, Path], answer: str, code: int
) -> None:
    """The command in a child whose stdin is a pseudo-terminal: it asks, reads the typed
    line, and runs (or, for a wrong name, exits 2 before the channel sees a verb)."""
    target, state = destructive
    master, slave = pty.openpty()
    try:
        os.write(master, f"{answer}\n".encode())  # typed ahead; read when it asks
        proc = subprocess.run(
            [sys.executable, "-m", "powerplane.cli", "conformance", "--target", str(target)],
            stdin=slave, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "NO_COLOR": "1"})
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Type the channel name to proceed" in proc.stderr
    if code == 0:
        assert proc.stdout.splitlines()[0] == "pass: every advertised verb verified (3 of 3)"
        assert dispatches(state)
    else:
        assert "nothing was sent" in proc.stderr and proc.stdout == ""
        assert not state.exists()


# --- --html -------------------------------------------------------------------------------

def test_html_into_a_missing_directory_is_exit_two_before_the_run(
    write_target: Write, tmp_path: Path
) -> None:
    state = tmp_path / "lab.json"
    target = write_target(sim_target({"state_file": str(state)}))
    result = invoke("conformance", "--target", str(target), "--yes",
                    "--html", str(tmp_path / "absent" / "report.html"))
    assert result.exit_code == 2
    assert "--html" in result.stderr and "Traceback" not in result.output
    assert not state.exists()


def test_html_report_is_written_from_the_same_document(
    write_target: Write, tmp_path: Path
) -> None:
    pytest.importorskip("powerplane_conformance.html", reason="the HTML report is not built")
    target = write_target(sim_target(conformance=READ_ONLY))
    page, report = tmp_path / "report.html", tmp_path / "results.json"
    result = invoke("conformance", "--target", str(target), "--html", str(page),
                    "--report", str(report))
    assert result.exit_code == 0, result.output
    html = page.read_text(encoding="utf-8")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert "<html" in html.lower()
    assert data["headline"] in html
