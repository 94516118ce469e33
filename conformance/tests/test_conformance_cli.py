"""``powerplane conformance``: one command, reports, exit codes, outcomes kept apart."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conformance_targets import outcome, sim_target

from powerplane.cli import cli
from powerplane_conformance.api import RunSummary

Write = Callable[[dict[str, Any]], Path]
Run = Callable[..., RunSummary]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_passing_run_writes_report_junit_and_verdict(write_target: Write, tmp_path: Path) -> None:
    target = write_target(sim_target(conformance={
        "expected_capabilities": {"lab": ["reboot", "shutdown", "power-on"]}}))
    report, junit = tmp_path / "out.json", tmp_path / "junit.xml"
    result = invoke("conformance", "--target", str(target), "--report", str(report),
                    "--junit", str(junit), "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "pass: every advertised verb verified (3 of 3)"
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["suite"] == {"name": "powerplane-conformance", "version": "0.1.0"}
    assert data["plugin"]["name"] == "simulated" and data["plugin"]["version"]
    assert data["channel_type"] == "simulated"
    assert data["channels"][0]["capabilities"]["n-m1"]["verbs"] == {
        "reboot": "graceful", "shutdown": "graceful", "power-on": "graceful"}
    assert set(data["counts"]) == {"pass", "fail", "skip", "not_tested", "xfail"}
    assert data["counts"]["fail"] == 0 and data["verdict"] == "pass" and data["conformant"]
    assert sum(data["counts"].values()) == len(data["results"])
    first = data["results"][0]
    assert {"id", "channel", "verb", "outcome", "message"} <= set(first)
    cases = ET.parse(junit).getroot().iter("testcase")
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert all("assertion" in p and "verb" in p for p in props)
    readback = [p for p in props if p["assertion"] == "POWER_ON_READBACK"]
    assert readback and all("latency_s" in p for p in readback)


def test_failing_run_exits_one_with_verdict_fail(write_target: Write) -> None:
    target = write_target(sim_target({"faults": {"*": "silent"}}, machines={"m1": "off"},
                                     conformance={"settle_timeout_s": 0.3}))
    result = invoke("conformance", "--target", str(target), "-o", "json", "--yes")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["verdict"] == "fail" and data["counts"]["fail"] > 0
    assert data["conformant"] is False and data["headline"].startswith("fail: ")


@pytest.mark.parametrize(
    ("conformance", "path"),
    [
        ({"settle_timeout_s": -1}, "conformance.settle_timeout_s"),
        ({"nodes": ["nope"]}, "conformance.nodes[0]"),
        ({"bogus": 1}, "conformance.bogus"),
        ({"xfail": {"NO_SUCH_ID": "x"}}, "conformance.xfail.NO_SUCH_ID"),
        ({"expected_capabilities": {"lab": ["fly"]}}, "conformance.expected_capabilities.lab"),
        ({"negative": {"ghost": {}}}, "conformance.negative.ghost"),
    ],
)
def test_bad_target_exits_two_naming_the_path(
    write_target: Write, conformance: dict[str, Any], path: str
) -> None:
    result = CliRunner().invoke(cli, ["conformance", "--target",
                                      str(write_target(sim_target(conformance=conformance)))])
    assert result.exit_code == 2
    assert path in result.output
    assert "Traceback" not in result.output


def test_missing_section_missing_file_and_unknown_channel_exit_two(
    write_target: Write, tmp_path: Path
) -> None:
    data = sim_target()
    del data["conformance"]
    result = invoke("conformance", "--target", str(write_target(data)))
    assert result.exit_code == 2 and "conformance: required section is missing" in result.output
    result = invoke("conformance", "--target", str(tmp_path / "absent.yaml"))
    assert result.exit_code == 2
    result = invoke("conformance", "--target", str(write_target(sim_target())),
                    "--channel", "ghost")
    assert result.exit_code == 2 and "--channel" in result.output


def test_target_defaults_to_global_config(write_target: Write) -> None:
    result = invoke("--config", str(write_target(sim_target())), "conformance", "--yes")
    assert result.exit_code == 0, result.output


def test_destructive_checks_not_tested_unless_allowed(run: Run) -> None:
    summary = run(sim_target(conformance={"allow_destructive": False}))
    assert summary.exit_code == 0
    for ident in ("POWER_ON_READBACK", "SHUTDOWN_READBACK", "REBOOT_REPEATED",
                  "SHUTDOWN_CONCURRENT", "READBACK_NOT_STALE"):
        assert outcome(summary, ident) == {"not_tested"}
    msgs = {r["message"] for r in summary.data["results"] if r["id"] == "POWER_ON_READBACK"}
    assert msgs == {"allow_destructive is off in the target file"}
    assert summary.data["channels"][0]["original_state"] == {"n-m1": "on", "n-m2": "off"}


def test_declared_defect_is_xfail_and_unexpected_pass_fails(run: Run) -> None:
    silent = sim_target({"faults": {"*": "silent"}}, machines={"m1": "off"}, conformance={
        "settle_timeout_s": 0.3,
        "xfail": {"POWER_ON_READBACK": "firmware 2.1 ignores On",
                  "POWER_ON_REPEATED": "same", "POWER_ON_CONCURRENT": "same"}})
    summary = run(silent)
    assert outcome(summary, "POWER_ON_READBACK") == {"xfail"}
    assert summary.data["counts"]["xfail"] >= 2
    assert summary.data["counts"]["fail"] == 0 and summary.exit_code == 0
    honest = sim_target(conformance={"xfail": {"SHUTDOWN_READBACK": "thought broken"}})
    summary = run(honest)
    assert outcome(summary, "SHUTDOWN_READBACK") == {"fail"}
    assert summary.exit_code == 1
    assert any("XPASS(strict)" in r["message"] for r in summary.data["results"]
               if r["id"] == "SHUTDOWN_READBACK")


def test_channel_filter_and_unadvertised_verbs_skip(run: Run) -> None:
    summary = run(sim_target({"verbs": ["reboot"]}), channel="lab")
    skips = [r["message"] for r in summary.data["results"]
             if r["id"] == "POWER_ON_READBACK"]
    assert skips and all(m == "channel lab does not advertise power-on" for m in skips)
    assert outcome(summary, "POWER_ON_READBACK") == {"skip"}
    assert outcome(summary, "UNADVERTISED_REFUSED") == {"skip", "pass"}
    assert summary.exit_code == 0


def test_subprocess_run(write_target: Write, tmp_path: Path) -> None:
    target = write_target(sim_target(machines={"m1": "on"}))
    report = tmp_path / "r.json"
    result = invoke("conformance", "--target", str(target), "--subprocess",
                    "--report", str(report), "--yes")
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text(encoding="utf-8"))["counts"]["pass"] > 10


@pytest.mark.perf
def test_cli_module_stays_cheap_to_import() -> None:
    code = ("import sys, powerplane_conformance.cli; "
            "bad = [m for m in ('pytest', 'powerplane.host', 'pydantic') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, ("perf (conformance CLI import time): importing it imports "
                                  "none of pytest, the host, pydantic: "
                                  + proc.stdout + proc.stderr)


def test_help_lists_both_commands() -> None:
    result = invoke("--help")
    assert "conformance" in result.output and "new-plugin" in result.output


def test_one_way_shutdown_runs_last_and_is_not_undone(run: Run) -> None:
    """A Talos-like channel: no power-on, cannot see off. Reboot checks run before any
    shutdown; the suite says it cannot restore the machines instead of failing."""
    summary = run(sim_target({"verbs": ["reboot", "shutdown"], "readback": "on-only"},
                             machines={"m1": "on", "m2": "on"}))
    assert summary.exit_code == 0, [r for r in summary.data["results"] if r["outcome"] == "fail"]
    for ident in ("REBOOT_READBACK", "REBOOT_REPEATED", "REBOOT_CONCURRENT",
                  "SHUTDOWN_READBACK", "BLIND_NEVER_OFF"):
        assert outcome(summary, ident) == {"pass"}, ident
    assert outcome(summary, "STATE_RESTORED") == {"not_tested"}
    assert "a person must restore it" in " ".join(
        r["message"] for r in summary.data["results"] if r["id"] == "STATE_RESTORED")


def test_failure_message_is_the_assertion_not_a_traceback(run: Run) -> None:
    summary = run(sim_target({"faults": {"*": "refused"}}, machines={"m1": "on"},
                             conformance={"settle_timeout_s": 0.3}))
    msgs = [r["message"] for r in summary.data["results"] if r["id"] == "POWER_ON_IDEMPOTENT"]
    assert msgs and msgs[0].startswith("POWER_ON_IDEMPOTENT: Power-on of a machine")
    assert "RefusedByDevice" in msgs[0] and "During handling" not in msgs[0]


def test_capability_drift_and_mode_mismatch_fail(run: Run) -> None:
    drift = run(sim_target({"verbs": ["reboot"]}, conformance={
        "expected_capabilities": {"lab": ["reboot", "shutdown", "power-on"]}}))
    assert outcome(drift, "CAPABILITIES_EXPECTED") == {"fail"}
    assert "observed: reboot" in " ".join(r["message"] for r in drift.data["results"]
                                          if r["id"] == "CAPABILITIES_EXPECTED")
    modes = run(sim_target({"graceful": False}, conformance={
        "expected_capabilities": {"lab": {"reboot": "graceful", "shutdown": "hard",
                                          "power-on": "hard"}}}))
    assert outcome(modes, "CAPABILITIES_EXPECTED") == {"fail"}
    same = run(sim_target({"graceful": False}, conformance={
        "expected_capabilities": {"lab": {"reboot": "hard", "shutdown": "hard",
                                          "power-on": "hard"}}}))
    assert outcome(same, "CAPABILITIES_EXPECTED") == {"pass"}


@pytest.mark.usefixtures("liars")
def test_concurrency_goes_through_invoke_batch_when_offered(run: Run) -> None:
    import conformance_liars

    before = conformance_liars.Batching.batches
    summary = run(sim_target(type_name="honest-batching"))
    assert summary.exit_code == 0
    assert outcome(summary, "REBOOT_CONCURRENT") == {"pass"}
    assert conformance_liars.Batching.batches - before == 3
