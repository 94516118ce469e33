"""People see progress: one live line per check (outcome, seconds, assertion id, verb,
node@channel) instead of pytest's dots, in the command's in-process run and in a vendor's
own ``pytest``; NOT TESTED counted apart from skipped in pytest's final line; no control
sequences off a terminal; each check's wall seconds in results.json."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conformance_targets import sim_target

from powerplane_conformance.api import RunSummary
from powerplane_conformance.outcomes import Outcome, Result
from powerplane_conformance.plugin import progress_line

Run = Callable[..., RunSummary]

LINE = re.compile(r"^(PASS|FAIL|SKIP|NOT TESTED|XFAIL) +(\d+\.\d\d)s (\S+) +(\S+) +(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FINAL = re.compile(r"^=*\s*(\d+ \w+(?: \w+)?(?:, \d+ \w+(?: \w+)?)*) in [\d.]+s")
WORDS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "not_tested": "NOT TESTED",
         "xfail": "XFAIL"}
SUMMARY_KEY = {"pass": "passed", "fail": "failed", "skip": "skipped",
               "not_tested": "not tested", "xfail": "xfailed"}

VENDOR_MODULE = '''
import pytest

from powerplane_conformance import ConformanceSuite


class TestVendorDevice(ConformanceSuite):
    conformance_subjects = {subjects!r}

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls):
        return {target!r}
'''

READ_ONLY = sim_target(machines={"m1": "on"}, conformance={"allow_destructive": False})
"""Every kind of outcome but FAIL and XFAIL: PASS, SKIP, NOT TESTED (destructive checks)."""
FAILING = sim_target({"faults": {"*": "silent"}}, machines={"m1": "off"},
                     conformance={"settle_timeout_s": 0.3,
                                  "xfail": {"POWER_ON_READBACK": "power-on is not seen"}})
"""A channel that ignores every verb: FAILs, and one declared defect (XFAIL)."""


def _env(autoload: bool = False, **extra: str) -> dict[str, str]:
    """The child's environment: no colour forced either way, 80 columns; without
    ``autoload`` only this plugin loads (the other installed plugins cost seconds)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PY_COLORS", "FORCE_COLOR", "NO_COLOR", "PYTEST_ADDOPTS",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    env.update({"COLUMNS": "80", **extra})
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _vendor_argv(tmp_path: Path, target: dict[str, Any], *extra: str,
                 autoload: bool = False) -> list[str]:
    """``python -m pytest`` on a vendor's own module subclassing ConformanceSuite (without
    ``autoload``, the plugin named with ``-p``; see :func:`_env`)."""
    module = tmp_path / "test_vendor.py"
    module.write_text(VENDOR_MODULE.format(subjects=["n-m1"], target=target), encoding="utf-8")
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    argv = [sys.executable, "-m", "pytest", str(module), "-c", str(ini), "--rootdir",
            str(tmp_path), "-p", "no:cacheprovider",
            "--powerplane-report", str(tmp_path / "results.json"), *extra]
    return argv if autoload else [*argv, "-p", "powerplane_conformance.plugin"]


def _lines(text: str) -> list[tuple[str, str, str, str, str]]:
    """(outcome, seconds, id, verb, where) of each progress line in ``text``."""
    out = []
    for line in text.splitlines():
        m = LINE.match(ANSI.sub("", line).strip("\r"))
        if m:
            out.append((m[1], m[2], m[3], m[4], m[5]))
    return out


def _final_counts(text: str) -> dict[str, int]:
    """pytest's last line (``3 failed, 8 passed, 5 skipped, 12 not tested in 4.4s``)."""
    last = [ANSI.sub("", x).strip("\r") for x in text.splitlines() if x.strip()][-1]
    m = FINAL.match(last)
    assert m, last
    counts = {}
    for part in m[1].split(", "):
        n, _, key = part.partition(" ")
        counts[key] = int(n)
    return counts


def _assert_one_line_per_check(text: str, data: dict[str, Any]) -> None:
    results = data["results"]
    got = _lines(text)
    assert len(got) == len(results), text
    expected = Counter(
        (WORDS[r["outcome"]], r["id"], r["verb"] or "-",
         f"{r['node']}@{r['channel']}" if r["node"] else r["channel"]) for r in results)
    assert Counter((o, i, v, w) for o, _, i, v, w in got) == expected
    for r in results:
        assert isinstance(r["duration_s"], float) and r["duration_s"] >= 0, r
    seconds = Counter(f"{r['duration_s']:.2f}" for r in results)
    assert Counter(s for _, s, _, _, _ in got) == seconds


def _assert_summary_matches(text: str, data: dict[str, Any]) -> None:
    final = _final_counts(text)
    for outcome, n in data["counts"].items():
        assert final.get(SUMMARY_KEY[outcome], 0) == n, (outcome, final, data["counts"])


def test_command_run_prints_a_line_per_check_and_counts_not_tested_apart(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ``powerplane conformance`` does (in-process, ``-q``, output on stderr)."""
    summary = run(READ_ONLY)
    err = capsys.readouterr().err
    data = summary.data
    assert data["counts"]["not_tested"] > 0 and data["counts"]["skip"] > 0
    _assert_one_line_per_check(err, data)
    _assert_summary_matches(err, data)
    assert "\x1b[" not in err


@pytest.mark.slow
def test_vendor_pytest_run_in_a_pipe(tmp_path: Path) -> None:
    """A vendor's plain ``pytest`` on their subclass (the plugin found through its entry
    point, with every other installed plugin), output to a pipe (a CI log): the file name
    alone on its line, then one line per check (no dots), no escape sequences; the final
    line, results.json and JUnit agree; ``-rs`` lists NOT TESTED apart from SKIP."""
    junit = tmp_path / "junit.xml"
    argv = _vendor_argv(tmp_path, READ_ONLY, "-rs", "--junitxml", str(junit), autoload=True)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env=_env(autoload=True),
                          check=False, cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "\x1b" not in out and "\r" not in out
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    _assert_one_line_per_check(out, data)
    _assert_summary_matches(out, data)
    header = [x for x in out.splitlines() if "test_vendor.py" in x]
    assert header == ["test_vendor.py "], header  # no dots after it
    assert "not tested" in _final_counts(out)
    # -rs: pytest's SKIPPED lines are SKIPs only; NOT TESTED folded in its own section
    skipped = [x for x in out.splitlines() if x.startswith("SKIPPED [")]
    assert skipped and not any("NOT TESTED" in x for x in skipped)
    folded = [x for x in out.splitlines() if x.startswith("NOT TESTED [")]
    assert sum(int(x.split("[")[1].split("]")[0]) for x in folded) == \
        data["counts"]["not_tested"]
    # JUnit still sees a NOT TESTED check as skipped, with its reason
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    skips = [c.find("skipped") for c in cases if c.find("skipped") is not None]
    messages = [s.get("message") or "" for s in skips if s is not None]
    assert sum(m.startswith("NOT TESTED") for m in messages) == data["counts"]["not_tested"]
    assert len(messages) == data["counts"]["not_tested"] + data["counts"]["skip"]


@pytest.mark.slow
def test_failures_and_declared_defects_have_their_lines(tmp_path: Path) -> None:
    """FAIL and XFAIL lines, each with what was observed, and pytest's counts to match."""
    proc = subprocess.run(_vendor_argv(tmp_path, FAILING, "-q", "-rN", "--tb=no"),
                          capture_output=True, text=True, timeout=120, env=_env(),
                          check=False, cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert data["counts"]["fail"] > 0 and data["counts"]["xfail"] == 1
    _assert_one_line_per_check(out, data)
    _assert_summary_matches(out, data)
    xfail = [x for x in out.splitlines() if x.startswith("XFAIL")]
    assert len(xfail) == 1 and "POWER_ON_READBACK" in xfail[0]
    assert all(x.startswith("FAIL") for x in out.splitlines()
               if LINE.match(x) and "POWER_ON_REPEATED" in x)


def test_verbose_run_puts_the_check_after_the_test_id(tmp_path: Path) -> None:
    proc = subprocess.run(_vendor_argv(tmp_path, READ_ONLY, "-v", "-rN"),
                          capture_output=True, text=True, timeout=120, env=_env(),
                          check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    rows = [x for x in proc.stdout.splitlines() if "::TestVendorDevice::" in x]
    assert len(rows) == len(data["results"])
    for row, r in zip(rows, data["results"], strict=True):
        assert row.startswith(f"test_vendor.py::TestVendorDevice::{r['test'].split('::')[-1]} ")
        assert f" {WORDS[r['outcome']]} " in row and f" {r['id']} " in row
        assert not row.rstrip().endswith(("PASSED", "SKIPPED"))  # no second word
    _assert_summary_matches(proc.stdout, data)


def _read_pty(master: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif proc.poll() is not None:
            break
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX")
def test_terminal_run_colours_each_line(tmp_path: Path) -> None:
    """On a terminal the same lines, coloured by outcome (markup only there)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(_vendor_argv(tmp_path, READ_ONLY, "-q", "-rN"), stdout=slave,
                            stderr=slave, stdin=subprocess.DEVNULL, cwd=tmp_path,
                            env=_env(TERM="xterm", COLUMNS="120"))
    os.close(slave)
    try:
        out = _read_pty(master, proc, 120)
        assert proc.wait(timeout=60) == 0, out
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert "\x1b[32m" in out  # green PASS
    _assert_one_line_per_check(out, data)
    _assert_summary_matches(out, data)


def test_line_says_what_was_observed_and_never_cuts_the_check() -> None:
    failed = Result(id="POWER_ON_READBACK", text="t", channel="lab", node="n-m1",
                    verb="power-on", outcome=Outcome.FAIL, duration_s=1.234,
                    message="POWER_ON_READBACK: t\n  expected: on\n  observed: off x5")
    assert progress_line(failed) == (
        "FAIL         1.23s POWER_ON_READBACK          power-on  n-m1@lab  observed: off x5")
    long = Result(id="REBOOT_CONCURRENT", text="t", channel="lab", node=None, verb="reboot",
                  outcome=Outcome.NOT_TESTED, duration_s=0.0, message="why " * 40)
    line = progress_line(long, width=90)
    assert line.startswith("NOT TESTED   0.00s REBOOT_CONCURRENT          reboot    lab  why")
    assert len(line) <= 90 and line.endswith("...")
    assert progress_line(long, width=20).endswith(" lab")  # too narrow: the reason goes
    restored = Result(id="REBOOT_READBACK", text="t", channel="lab", node="n-m1",
                      verb="reboot", outcome=Outcome.PASS, duration_s=0.5,
                      restore_failed="n-m1@lab: stayed off")
    assert progress_line(restored).endswith("restore failed: n-m1@lab: stayed off")
