"""An interrupted run is never a pass: SIGINT and SIGTERM during discovery, during a power
check and during the restore give the verdict ``interrupted`` (never conformant), name the
checks that did not run and whether each machine was put back, write results.json and the
HTML saying so, and exit 130. As a pytest plugin, a KeyboardInterrupt, ``-x`` and
``session.shouldstop`` never produce a pass either.

The moments are made, not guessed: the target's simulated channel keeps its machines in a
``state_file``, and every call it takes holds an exclusive ``flock`` on
``<state_file>.lock``. The test holds that lock itself, waits until the kernel lists the
command's process as waiting for it (``/proc/locks``: the command is inside a call), sends
the signal, and lets go. Every wait has an explicit timeout; nothing is timed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance_targets import sim_target

from powerplane_conformance import cli_suite
from powerplane_conformance.api import exit_code

WAIT_S = 60.0
"""The bound on every wait of these tests (a process to exit, a line to show)."""


def _target(tmp_path: Path, **conformance: Any) -> tuple[Path, Path]:
    """Two machines on a simulated channel with a state file (its calls take its lock)."""
    state = tmp_path / "lab-state.json"
    data = sim_target({"state_file": str(state), "latency_ms": 20},
                      conformance={"settle_timeout_s": 5, **conformance})
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    # written ahead: every call, reads too, then works under the file's lock
    state.write_text(json.dumps({"machines": {"m1": "on", "m2": "off"}, "boots": {},
                                 "dispatches": [], "pending": {}}), encoding="utf-8")
    return path, state


@contextlib.contextmanager
def held(state: Path) -> Iterator[None]:
    """The simulated channel's lock, held by this process: every call of it waits."""
    with open(str(state) + ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _tree(pid: int) -> set[str]:
    """``pid`` and its descendants (``--subprocess`` runs pytest in a child)."""
    found, todo = set(), [str(pid)]
    while todo:
        here = todo.pop()
        found.add(here)
        try:
            todo += Path(f"/proc/{here}/task/{here}/children").read_text().split()
        except OSError:
            pass
    return found


def waiting_for_a_lock(pid: int) -> bool:
    """Whether the kernel lists process ``pid`` (or a child of it) as blocked on a lock
    (``/proc/locks``)."""
    pids = _tree(pid)
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] in pids:
            return True
    return False


def wait_until(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"the command exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S:g} s: {what}")
        time.sleep(0.02)


class Run:
    """``powerplane conformance`` in a child process, its output in files."""

    def __init__(self, target: Path, work: Path, *extra: str) -> None:
        self.report = work / "r.json"
        self.html = work / "r.html"
        self.out = work / "stdout.txt"
        self.err = work / "stderr.txt"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        out, err = os.open(self.out, flags, 0o600), os.open(self.err, flags, 0o600)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "powerplane.cli", "conformance", "--target",
                 str(target), "--yes", "--report", str(self.report), "--html", str(self.html),
                 *extra],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env={**os.environ, "NO_COLOR": "1"})
        finally:  # the child has its own copies
            os.close(out)
            os.close(err)

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def stdout(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def in_a_call(self) -> None:
        wait_until(lambda: waiting_for_a_lock(self.proc.pid), "the command waits in a call",
                   self.proc)

    def shown(self, text: str) -> None:
        wait_until(lambda: text in self.stderr(), f"{text!r} on stderr", self.proc)

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self) -> int:
        try:
            return self.proc.wait(WAIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(WAIT_S)

    def results(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.report.read_text(encoding="utf-8"))
        return data


def assert_interrupted(run: Run, code: int, sig: signal.Signals) -> dict[str, Any]:
    """What every interrupted run shows: exit 130, the verdict, the signal, the HTML."""
    assert code == 130, run.stdout() + run.stderr()
    data = run.results()
    assert data["verdict"] == "interrupted" and data["conformant"] is False
    assert data["interrupted"]["signal"] == sig.name
    assert data["headline"].startswith(f"interrupted (signal {sig.name})")
    assert "pass:" not in run.stdout() and "every advertised verb verified" not in run.stdout()
    assert run.stdout().splitlines()[0] == data["headline"]
    assert exit_code(data) == 130
    page = run.html.read_text(encoding="utf-8")
    assert 'data-verdict="interrupted"' in page and "verdict: INTERRUPTED" in page
    assert "did not run" in page
    assert "Traceback" not in run.stderr()
    return data


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_discovery(tmp_path: Path, sig: signal.Signals) -> None:
    target, state = _target(tmp_path)
    with held(state):
        run = Run(target, tmp_path)
        run.in_a_call()  # starting the session: nothing has been read yet
        run.signal(sig)
    data = assert_interrupted(run, run.wait(), sig)
    cut = data["interrupted"]
    assert cut["during"].startswith("starting the session")
    assert data["results"] == [] and data["counts"]["pass"] == 0
    assert len(cut["not_run"]) == cut["checks_collected"] > 0
    assert {c["id"] for c in cut["not_run"]} >= {"REBOOT_READBACK", "STATE_RESTORED"}
    assert cut["machines_restored"] is None  # no machine's state was read: none was touched
    assert all(m["original"] is None for m in cut["machines"])
    assert all(c["status"] != "verified" for m in data["matrix"] for c in m["verbs"])


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "mode"), [(signal.SIGINT, ()), (signal.SIGTERM, ()),
                                           (signal.SIGINT, ("--subprocess",)),
                                           (signal.SIGTERM, ("--subprocess",))])
def test_a_signal_during_a_power_check(tmp_path: Path, sig: signal.Signals,
                                       mode: tuple[str, ...]) -> None:
    """In this process or (``--subprocess``) in pytest's child, which gets the signal once."""
    target, state = _target(tmp_path)
    run = Run(target, tmp_path, *mode)
    run.shown("POWER_ON_IDEMPOTENT")  # a power check has finished; the plan runs on
    with held(state):
        run.in_a_call()
        run.signal(sig)
    data = assert_interrupted(run, run.wait(), sig)
    cut = data["interrupted"]
    assert not cut["during"].startswith("starting the session")
    assert cut["not_run"], cut
    ran = {r["test"] for r in data["results"]}
    assert not ran & {c["test"] for c in cut["not_run"]}
    assert "STATE_RESTORED" in {c["id"] for c in cut["not_run"]}
    # the machines were put back when the session closed, and the report says so
    assert cut["machines_restored"] is True, cut["machines"]
    assert {m["subject"]: m["original"] for m in cut["machines"]} == {
        "n-m1@lab": "on", "n-m2@lab": "off"}
    machines = json.loads(state.read_text(encoding="utf-8"))["machines"]
    assert machines == {"m1": "on", "m2": "off"}
    assert "Restored (reads its state at the start): n-m1@lab (on), n-m2@lab (off)" \
        in data["verdict_reason"]
    assert "putting the machines back" in run.stderr()
    # no verb is called verified while checks of it did not run
    for m in data["matrix"]:
        for c in m["verbs"]:
            if c["advertised"]:
                assert c["status"] == "not_verified", c


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_during_the_restore_leaves_the_machines_and_says_so(
    tmp_path: Path, sig: signal.Signals
) -> None:
    target, state = _target(tmp_path)
    run = Run(target, tmp_path)
    run.shown("POWER_ON_IDEMPOTENT")
    with held(state):  # the restore cannot finish while this is held
        run.in_a_call()
        run.signal(sig)
        run.shown("putting the machines back the way they were")
        run.signal(sig)
    data = assert_interrupted(run, run.wait(), sig)
    cut = data["interrupted"]
    assert cut["machines_restored"] is False
    assert all(m["restored"] is not True for m in cut["machines"])
    assert any("interrupted again" in m["detail"] for m in cut["machines"]), cut["machines"]
    assert "NOT restored: n-m1@lab" in data["verdict_reason"]
    assert "NOT restored" in run.html.read_text(encoding="utf-8")


# --- as a pytest plugin ------------------------------------------------------------------

def _pytest_args(target: Path, report: Path, *extra: str) -> list[str]:
    return [str(Path(cli_suite.__file__).resolve()), "-p", "no:cacheprovider", "-q",
            "--tb=no", "--disable-plugin-autoload", "-p", "powerplane_conformance.plugin",
            "--powerplane-target", str(target), "--powerplane-report", str(report),
            "--rootdir", str(target.parent), *extra]


class _StopAfter:
    """A pytest plugin that stops the run once ``after`` checks have finished: by
    ``session.shouldstop``, or by a KeyboardInterrupt in the next check's call."""

    def __init__(self, after: int, how: str) -> None:
        self.after, self.how, self.done = after, how, 0
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.done += 1
        if self.done == self.after and self.how == "shouldstop" and self.session is not None:
            self.session.shouldstop = "stopped by the test's plugin"

    def pytest_runtest_call(self, item: pytest.Item) -> None:
        if self.done >= self.after and self.how == "keyboard":
            raise KeyboardInterrupt


@pytest.mark.parametrize("how", ["shouldstop", "keyboard"])
def test_a_stopped_pytest_run_is_never_a_pass(tmp_path: Path, how: str) -> None:
    target, _ = _target(tmp_path)
    report = tmp_path / "results.json"
    status = pytest.main(_pytest_args(target, report), plugins=[_StopAfter(3, how)])
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["verdict"] == "interrupted" and data["conformant"] is False
    cut = data["interrupted"]
    assert cut["not_run"] and len(data["results"]) < cut["checks_collected"]
    if how == "keyboard":
        assert status == pytest.ExitCode.INTERRUPTED
        assert cut["cause"] == "KeyboardInterrupt"
    else:
        assert cut["cause"] == "pytest stopped the run (stopped by the test's plugin)"
    assert cut["machines_restored"] is True


def test_x_after_a_failure_is_interrupted_not_pass(tmp_path: Path) -> None:
    """``-x``: the first failure stops the run; what did not run is named."""
    state = tmp_path / "lab-state.json"
    data = sim_target({"faults": {"*": "silent"}, "state_file": str(state)},
                      machines={"m1": "off"}, conformance={"settle_timeout_s": 0.3})
    target = tmp_path / "target.yaml"
    target.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    report = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", *_pytest_args(target, report, "-x")],
                          capture_output=True, text=True, timeout=WAIT_S, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = json.loads(report.read_text(encoding="utf-8"))
    assert found["verdict"] == "interrupted" and found["conformant"] is False
    assert found["counts"]["fail"] == 1
    assert found["interrupted"]["cause"].startswith("pytest stopped the run (stopping after 1")
    assert found["interrupted"]["not_run"]
    assert "1 check failed before the stop" in found["verdict_reason"]


def test_a_full_run_carries_no_interruption(tmp_path: Path) -> None:
    target, _ = _target(tmp_path)
    report = tmp_path / "results.json"
    assert pytest.main(_pytest_args(target, report)) == pytest.ExitCode.OK
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["verdict"] == "pass" and "interrupted" not in data


def test_checks_left_out_with_k_are_not_checks_that_did_not_run(tmp_path: Path) -> None:
    """``-k`` (or ``-m``, ``--deselect``) chooses what runs: a run of that choice that ran
    to its end is not interrupted."""
    from powerplane_conformance.api import run_suite

    target, _ = _target(tmp_path)
    summary = run_suite(target, report=tmp_path / "results.json",
                        pytest_args=["-k", "unknown_target or readback_not_stale"])
    assert summary.data["verdict"] != "interrupted" and "interrupted" not in summary.data
    assert summary.exit_code == 0
    assert {r["id"] for r in summary.data["results"]} == {"UNKNOWN_TARGET_ERROR",
                                                          "READBACK_NOT_STALE"}
