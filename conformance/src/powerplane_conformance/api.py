"""Run the suite from Python: what ``powerplane conformance`` does, as a function."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from powerplane import ConfigError, ConfigProblem
from powerplane.plugins import Registry
from powerplane_conformance.interrupt import received, signals_interrupt
from powerplane_conformance.session import ConformanceSession, PowerOnByHand
from powerplane_conformance.settings import Target, load_target

__all__ = ["Attendant", "RunSummary", "exit_code", "interrupted_before_the_suite", "run_suite",
           "validate_target"]

PYTEST_USAGE = 4
PYTEST_INTERRUPTED = int(pytest.ExitCode.INTERRUPTED)
EXIT_INTERRUPTED = 130
"""The exit status of an interrupted run (SIGINT, SIGTERM), as every command's."""
CHILD_GRACE_S = 60.0
"""How long an interrupted ``--subprocess`` run waits for its pytest child to put the
machines back and write results.json (a second signal cuts it to a few seconds)."""


@dataclass(frozen=True)
class RunSummary:
    """A finished run: the process exit status it implies and the results.json document."""

    exit_code: int
    """0 for ``pass`` and ``incomplete`` (1 for ``incomplete`` under ``require_complete``);
    1 for ``fail`` (a check failed) or a run that broke; 130 for ``interrupted``. Bad input raises
    :class:`~powerplane.errors.ConfigError` (exit 2) instead of returning."""
    data: dict[str, Any]
    """The results.json document."""


def validate_target(
    target: str | os.PathLike[str] | Mapping[str, Any],
    channel: str | None = None,
    registry: Registry | None = None,
) -> Target:
    """Load and validate the target (and ``channel``, if given); ConfigError when bad."""
    loaded = load_target(target, registry=registry)
    if channel is not None:
        used = {ref.channel for n in loaded.nodes for ref in loaded.deployment.nodes[n].channels}
        if channel not in used:
            known = ", ".join(sorted(used)) or "none"
            raise ConfigError([ConfigProblem(
                "--channel", f"channel {channel!r} reaches none of the nodes under test; "
                             f"channels: {known}")], source=loaded.deployment.source)
    return loaded


class Attendant:
    """A pytest plugin: the person at the rack of an ``attended`` target.

    Gives every conformance session of the run ``power_on_by_hand`` (called with pytest's
    output capture suspended, so a prompt reaches the terminal), and puts each note of a
    machine a person brought back on the message of the check that needed it. ``run_suite``
    registers it; a suite subclass run by plain pytest registers it in a conftest::

        def pytest_configure(config):
            config.pluginmanager.register(Attendant(press_the_button), "attendant")
    """

    def __init__(self, power_on_by_hand: PowerOnByHand) -> None:
        self.power_on_by_hand = power_on_by_hand
        self.sessions: list[ConformanceSession] = []

    def _asker(self, config: pytest.Config) -> PowerOnByHand:
        def ask(node: str, target: Any) -> None:
            capture = config.pluginmanager.getplugin("capturemanager")
            if capture is None:
                self.power_on_by_hand(node, target)
                return
            capture.suspend(in_=True)  # stdin too, as pytest's debugger does
            try:
                self.power_on_by_hand(node, target)
            finally:
                capture.resume()

        return ask

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        value = yield
        if isinstance(value, ConformanceSession) and value.power_on_by_hand is None:
            value.power_on_by_hand = self._asker(request.config)
            self.sessions.append(value)
        return value

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield  # the suite's plugin (inside this wrapper) has recorded the result
        from powerplane_conformance.plugin import RESULTS

        result = item.config.stash.get(RESULTS, {}).get(item.nodeid)
        if result is None:
            return report
        for session in self.sessions:
            notes, session.by_hand[:] = [note for _, note in session.by_hand], []
            for note in notes:
                result.message = f"{result.message}\n{note}" if result.message else note
        return report


def run_suite(
    target: str | os.PathLike[str] | Mapping[str, Any],
    *,
    channel: str | None = None,
    report: str | os.PathLike[str] | None = None,
    junit: str | os.PathLike[str] | None = None,
    in_subprocess: bool = False,
    pytest_args: Sequence[str] = (),
    require_complete: bool = False,
    power_on_by_hand: PowerOnByHand | None = None,
) -> RunSummary:
    """Run every check against ``target`` (a file or target data) and return the results.

    Validates the target first (raises :class:`~powerplane.errors.ConfigError`). pytest's
    own progress goes to stderr. In-process by default (channel types registered in
    this process are seen); ``in_subprocess`` runs ``python -m pytest`` instead.
    ``require_complete``: an ``incomplete`` verdict (an advertised verb not verified)
    exits 1 instead of 0, for CI gates. Never asks anything: confirming a destructive
    run is the caller's (the ``powerplane conformance`` command asks).

    ``power_on_by_hand(node, target)``: the person at the rack of an ``attended`` target,
    asked when a check needs a machine on that its channel cannot power on (see
    :class:`Attendant`); the suite then reads the machine back. In-process only.
    """
    if power_on_by_hand is not None and in_subprocess:
        raise ValueError("power_on_by_hand is called in this process: it cannot be given "
                         "with in_subprocess=True")
    import yaml

    from powerplane_conformance import cli_suite

    with signals_interrupt(), \
            tempfile.TemporaryDirectory(prefix="powerplane-conformance-") as tmp:
        work = Path(tmp)
        out = Path(report).resolve() if report else work / "results.json"
        try:
            if isinstance(target, Mapping):
                path = work / "target.yaml"
                path.write_text(yaml.safe_dump(dict(target), sort_keys=False),
                                encoding="utf-8")
            else:
                path = Path(target).resolve()
            validate_target(path, channel)
        except KeyboardInterrupt:
            data = interrupted_before_the_suite("loading the target file")
            _write(out, data)
            return RunSummary(EXIT_INTERRUPTED, data)
        ini = work / "pytest.ini"
        ini.write_text("[pytest]\njunit_family = xunit1\n", encoding="utf-8")
        args = [
            str(Path(cli_suite.__file__).resolve()),
            "-c", str(ini), "--rootdir", str(work),
            "-p", "no:cacheprovider", "-p", "no:warnings",
            "-p", "no:asyncio", "-p", "no:unraisableexception",
            "-q", "--tb=no", "--no-header", "-rN",
            "--powerplane-target", str(path), "--powerplane-report", str(out),
            # only the suite's own plugin: the other pytest plugins installed beside it
            # (asyncio, hypothesis, timeout, ...) cost seconds to load and check nothing here
            "--disable-plugin-autoload", "-p", "powerplane_conformance.plugin",
        ]
        if channel:
            args += ["--powerplane-channel", channel]
        if junit:
            args += ["--junitxml", str(Path(junit).resolve())]
        args += list(pytest_args)
        if out.exists():
            out.unlink()  # a report of an earlier run is never taken for this one's
        try:
            if in_subprocess:
                code = _subprocess([sys.executable, "-m", "powerplane_conformance.child",
                                    *args])
            else:
                plugins = [Attendant(power_on_by_hand)] if power_on_by_hand is not None else []
                with contextlib.redirect_stdout(sys.stderr):
                    code = int(pytest.main(args, plugins=plugins))
        except KeyboardInterrupt:  # past pytest's own handling (a second signal, ...)
            code = PYTEST_INTERRUPTED
        if not out.exists():
            if code == PYTEST_INTERRUPTED or received():
                data = interrupted_before_the_suite("starting the suite")
                _write(out, data)
                return RunSummary(EXIT_INTERRUPTED, data)
            reason = "usage error" if code == PYTEST_USAGE else f"pytest exit status {code}"
            raise ConfigError(f"the suite did not run ({reason}); see the output above",
                              source=str(path))
        data = json.loads(out.read_text(encoding="utf-8"))
    return RunSummary(exit_code(data, code, require_complete=require_complete), data)


def interrupted_before_the_suite(during: str) -> dict[str, Any]:
    """The results.json document of a run interrupted before any check was collected."""
    from powerplane_conformance.report import build_results

    signal_name = received()
    return build_results([], [], interruption={
        "signal": signal_name,
        "cause": f"signal {signal_name}" if signal_name else "KeyboardInterrupt",
        "during": during, "checks_collected": 0, "not_run": [], "not_finished": [],
        "machines": [], "machines_restored": None,
    })


def _write(path: Path, data: Mapping[str, Any]) -> None:
    try:
        path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError:
        pass


def exit_code(data: Mapping[str, Any], pytest_status: int = 0, *,
              require_complete: bool = False) -> int:
    """The exit status a results.json document implies: ``pass`` 0, ``incomplete`` 0 (1
    under ``require_complete``), ``fail`` 1, ``interrupted`` 130 (so is a pytest run that
    was interrupted, whatever the document says); a pytest run that broke otherwise (a
    status other than 0 or 1: internal error, usage) is 1 whatever the document says."""
    verdict = data.get("verdict")
    if verdict == "interrupted" or pytest_status == PYTEST_INTERRUPTED:
        return EXIT_INTERRUPTED
    if pytest_status not in (0, 1) or verdict == "fail" or data["counts"]["fail"] > 0:
        return 1
    if verdict == "pass":
        return 0
    # incomplete, or a verdict this version does not know: never more than was shown
    return 1 if require_complete or verdict != "incomplete" else 0


def _wait_for(child: subprocess.Popen[bytes], timeout: float | None = None) -> int:
    """``child.wait(timeout)``, but a signal here is raised at once: :meth:`subprocess.Popen.
    wait` waits a quarter of a second more on a Ctrl-C (it takes the child to have had the
    terminal's Ctrl-C too), and this child, in a session of its own, has each signal only
    once it is forwarded. The child is reaped by ``wait`` once it is known to have ended;
    :class:`subprocess.TimeoutExpired` when it has not within ``timeout``."""
    if timeout is None and hasattr(os, "waitid"):
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    elif timeout is not None and hasattr(os, "pidfd_open"):
        import select

        fd = os.pidfd_open(child.pid)  # readable once the child has ended
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
        finally:
            os.close(fd)
        if not ready:
            raise subprocess.TimeoutExpired(child.args, timeout)
    return child.wait(timeout)


def _subprocess(argv: list[str]) -> int:
    """Run pytest in a child; its output goes to our stderr (stdout stays for the summary)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        sys.stderr.write(proc.stdout + proc.stderr)
        return proc.returncode
    # a process group of its own: a Ctrl-C at the terminal reaches this process only, and
    # is forwarded once (the child would take a second one as "leave the machines")
    child = subprocess.Popen(argv, stdout=sys.stderr, start_new_session=True)
    try:
        return _wait_for(child)
    except KeyboardInterrupt:
        sig = signal.SIGTERM if received() == "SIGTERM" else signal.SIGINT
        child.send_signal(sig)
        try:
            _wait_for(child, CHILD_GRACE_S)
        except KeyboardInterrupt:  # again: the child leaves the machines as they are
            child.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                _wait_for(child, 5)
        except subprocess.TimeoutExpired:
            pass
        if child.poll() is None:
            child.kill()
            child.wait(5)
        return PYTEST_INTERRUPTED
