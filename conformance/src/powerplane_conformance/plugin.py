"""The pytest plugin (entry point ``pytest11``): inert unless the suite runs.

It adds ``--powerplane-target``, ``--powerplane-channel`` and ``--powerplane-report``,
parametrizes suite checks by subject, classifies outcomes (PASS, FAIL, SKIP, NOT TESTED,
XFAIL, with strict declared defects), and writes ``results.json``. Its hooks touch only
tests declared with ``@check`` in a :class:`~powerplane_conformance.suite.ConformanceSuite`;
every other test of every other project is left alone.

Progress: instead of a dot, each check prints one line as it finishes (after its restore)::

    PASS         0.42s POWER_ON_READBACK          power-on  n-m1@lab
    NOT TESTED   0.00s REBOOT_CONCURRENT          reboot    lab  the target names fewer ...

(the reason when it fits the terminal's width; colour only on a terminal)

through pytest's own ``pytest_report_teststatus`` (the line is the short letter of the
check's teardown report; with ``-v`` it follows the test id), so pytest's progress counter,
``-q``, colour only on a terminal, and JUnit stay pytest's. NOT TESTED is its own category:
the final line reads ``15 passed, 5 skipped, 8 not tested``; JUnit still records a NOT
TESTED check as skipped, with its ``NOT TESTED:`` reason.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from powerplane_conformance.checks import (
    ALL_SUBJECTS,
    META,
    NOT_TESTED,
    NOT_TESTED_PREFIX,
    RESTORE_FAILED,
    SECRETS,
    XFAIL,
    redact,
    spec_of,
)
from powerplane_conformance.context import CONTEXTS
from powerplane_conformance.interrupt import received, reset, signals_interrupt
from powerplane_conformance.outcomes import Outcome, Result
from powerplane_conformance.terminal import BY_HAND

if TYPE_CHECKING:
    from powerplane_conformance.session import ConformanceSession

__all__ = [
    "interruption",
    "progress_line",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_generate_tests",
    "pytest_keyboard_interrupt",
    "pytest_report_teststatus",
    "pytest_runtest_call",
    "pytest_runtest_logfinish",
    "pytest_runtest_logreport",
    "pytest_runtest_logstart",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]

RESULTS = pytest.StashKey[dict[str, Result]]()
ELAPSED = pytest.StashKey[float]()
"""Per item: the seconds its phases took so far (pytest's report durations)."""
FINISHED = pytest.StashKey[set[str]]()
"""Per config: the checks whose teardown is done (their line is due or shown)."""
SHOWN = pytest.StashKey[set[str]]()
"""Per config: the checks whose progress line pytest was given."""
CURRENT = pytest.StashKey[tuple[str, str]]()
"""Per config: the check running now and its phase (``setup``, ``call``, ``teardown``)."""
SESSION = pytest.StashKey[pytest.Session]()
"""Per config: pytest's session (whether it was told to stop)."""
SIGNALS = pytest.StashKey[contextlib.ExitStack]()
"""Per config: SIGINT and SIGTERM interrupt the run while checks are collected."""

NOT_TESTED_CATEGORY = "not tested"
"""pytest's summary category for NOT TESTED (``8 not tested``), apart from ``skipped``."""
CATEGORY = {Outcome.PASS: "passed", Outcome.FAIL: "failed", Outcome.SKIP: "skipped",
            Outcome.XFAIL: "xfailed", Outcome.NOT_TESTED: NOT_TESTED_CATEGORY}
MARKUP: dict[Outcome, dict[str, bool]] = {
    Outcome.PASS: {"green": True}, Outcome.FAIL: {"red": True, "bold": True},
    Outcome.SKIP: {"yellow": True}, Outcome.XFAIL: {"yellow": True},
    Outcome.NOT_TESTED: {"yellow": True},
}
PROGRESS_ROOM = len(" [100%]") + 2
"""What pytest appends to a line near the edge (its percentage); a reason stops short of it."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("powerplane", "powerplane conformance suite")
    group.addoption("--powerplane-target", dest="powerplane_target", default=None,
                    metavar="FILE", help="Target file (a deployment config with a "
                    "conformance: section). Without it the suite stays inert.")
    group.addoption("--powerplane-channel", dest="powerplane_channel", default=None,
                    metavar="NAME", help="Test only this channel of the target.")
    group.addoption("--powerplane-report", dest="powerplane_report", default=None,
                    metavar="PATH", help="Write results.json here.")


def _subjects_from_file(config: pytest.Config) -> list[str] | None:
    """``node@channel`` for each channel of each node the target file names (no validation)."""
    path = config.getoption("powerplane_target", None)
    if not path:
        return None
    try:
        from powerplane.config import read_config

        data, _, _ = read_config(Path(path))  # the file's bounds: size, UTF-8, hostile YAML
    except Exception:
        return None
    if not isinstance(data, dict):
        return None
    nodes = data.get("nodes") or {}
    section = data.get("conformance") or {}
    names = section.get("nodes") if isinstance(section, dict) else None
    if not isinstance(nodes, dict):
        return None
    only = config.getoption("powerplane_channel", None)
    out: list[str] = []
    for name in names if isinstance(names, list) else list(nodes):
        spec = nodes.get(name)
        refs = spec.get("channels") if isinstance(spec, dict) else None
        for ref in refs if isinstance(refs, list) else []:
            channel = ref.get("channel") if isinstance(ref, dict) else None
            if isinstance(channel, str) and (not only or channel == only):
                out.append(f"{name}@{channel}")
    return out or None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    spec = spec_of(metafunc.function)
    if spec is None or "subject" not in metafunc.fixturenames:
        return
    if spec.per_channel:
        metafunc.parametrize("subject", [ALL_SUBJECTS], ids=["all"])
        return
    subjects = getattr(metafunc.cls, "conformance_subjects", None)
    if subjects is None:
        subjects = _subjects_from_file(metafunc.config)
    if subjects:
        metafunc.parametrize("subject", list(subjects), ids=list(subjects))


RANK = ("POWER_ON_IDEMPOTENT", "REBOOT_READBACK", "REBOOT_REPEATED", "REBOOT_CONCURRENT",
        "SHUTDOWN_READBACK", "READBACK_NOT_STALE", "SHUTDOWN_IDEMPOTENT", "POWER_ON_READBACK",
        "SHUTDOWN_REPEATED", "SHUTDOWN_CONCURRENT", "POWER_ON_REPEATED", "POWER_ON_CONCURRENT")
"""The order the power plan makes the evidence of these checks in (a machine that starts
on), so each one's line is shown soon after its evidence is in."""


def _phase(item: pytest.Item) -> tuple[int, int]:
    """Run order within a suite class: the checks that change nothing (they run while the
    power plan's workers change the machines), the checks that judge the plan's power
    changes in the order it makes them, then the refusals and the blind-readback check
    (once a machine's plan is done: nothing else moves it), restoration, terminate last."""
    from powerplane_conformance.plan import planned

    spec = spec_of(getattr(item, "function", None))
    assert spec is not None
    params = getattr(item, "callspec", None)
    verb = params.params.get("verb") if params is not None else None
    verb = verb or spec.verb
    if planned(spec, verb):
        ident = spec.assertion(verb).id
        return 1, RANK.index(ident) if ident in RANK else len(RANK)
    if spec.template == "STATE_RESTORED":
        return 3, 0
    if verb is not None and str(verb) == "terminate" and not spec.absent:
        return 4, 0
    if spec.absent or spec.template == "BLIND_NEVER_OFF":
        return 2, 0
    return 0, 0


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    slots = [i for i, item in enumerate(items) if spec_of(getattr(item, "function", None))]
    if not slots:
        return
    ordered = sorted(
        (items[i] for i in slots),
        key=lambda item: (item.parent.nodeid if item.parent else "", _phase(item)),
    )
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item
    if SIGNALS not in config.stash:  # the suite runs: SIGTERM interrupts it as SIGINT does
        stack = contextlib.ExitStack()
        stack.enter_context(signals_interrupt())
        config.stash[SIGNALS] = stack


def pytest_sessionstart(session: pytest.Session) -> None:
    reset()  # a signal of an earlier run in this process is not this run's
    session.config.stash[SESSION] = session


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """A signal's banner names the signal, not every frame it cut: pytest formats each
    one with its source (a third of a second, more than the whole stop should take)."""
    if received() and len(excinfo.traceback) > 1:
        excinfo.traceback = excinfo.traceback[-1:]


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(SIGNALS, None)
    if stack is not None:
        del config.stash[SIGNALS]
        stack.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, object, object]:
    """Which check runs now: an interrupted run names the check it was cut in.

    A signal's KeyboardInterrupt ends the check here and tells pytest to stop: pytest then
    says so in one line (``Interrupted: signal SIGINT ...``) instead of its KeyboardInterrupt
    banner and traceback, and the session's close puts the machines back."""
    if spec_of(getattr(item, "function", None)) is None:
        return (yield)
    item.config.stash[CURRENT] = (item.nodeid, "setup")
    try:
        result = yield  # a KeyboardInterrupt leaves CURRENT naming the check it cut
    except KeyboardInterrupt:
        if not received():
            raise
        item.session.shouldstop = (f"signal {received()}: the run stops; the report names "
                                   "the checks that did not run")
        return True
    if CURRENT in item.config.stash:
        del item.config.stash[CURRENT]
    return result


def _phase_is(item: pytest.Item, phase: str) -> None:
    if CURRENT in item.config.stash and item.config.stash[CURRENT][0] == item.nodeid:
        item.config.stash[CURRENT] = (item.nodeid, phase)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _phase_is(item, "setup")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _phase_is(item, "call")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    _phase_is(item, "teardown")


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
        return text.removeprefix("Skipped: ")
    return report.longreprtext.strip()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    meta = item.stash.get(META, None)
    if meta is None:
        return report
    elapsed = item.stash.get(ELAPSED, 0.0) + max(report.duration, 0.0)
    item.stash[ELAPSED] = elapsed
    if report.when == "teardown":
        _record_restore(item)
        done = item.config.stash.get(RESULTS, {}).get(item.nodeid)
        if done is not None:
            done.duration_s = round(elapsed, 3)
            item.config.stash.setdefault(FINISHED, set()).add(item.nodeid)
        return report
    declared = item.stash.get(XFAIL, None)
    if report.when == "call" and declared is not None:
        if report.failed:
            report.outcome = "skipped"
            report.wasxfail = declared
        elif report.passed:
            report.outcome = "failed"
            report.longrepr = (f"[XPASS(strict)] {meta['id']}: the declared defect did not "
                               f"occur: {declared}")
    outcome: Outcome | None = None
    message = ""
    if report.when == "setup" and not report.passed:
        outcome = Outcome.FAIL if report.failed else Outcome.SKIP
    elif report.when == "call":
        if report.passed:
            outcome = Outcome.PASS
        elif report.failed:
            outcome = Outcome.FAIL
        elif hasattr(report, "wasxfail"):
            outcome = Outcome.XFAIL
            message = f"declared defect: {declared}"
        else:
            outcome = Outcome.SKIP
    if outcome is None:
        return report
    if not message:
        message = _reason(report) if not report.passed else ""
    if outcome is Outcome.SKIP and item.stash.get(NOT_TESTED, False):
        outcome = Outcome.NOT_TESTED
        message = message.removeprefix(NOT_TESTED_PREFIX)
    if outcome is Outcome.XFAIL:
        message = f"{message} (observed: {report.longreprtext.strip()})" if report.longrepr \
            else message
    latency = next((v for k, v in item.user_properties if k == "latency_s"), None)
    secrets = item.config.stash.get(SECRETS, set())
    result = Result(
        id=meta["id"], text=meta["text"], channel=meta["channel"] or None, node=meta["node"],
        verb=meta["verb"], outcome=outcome, message=redact(message, secrets),
        latency_s=float(latency) if isinstance(latency, int | float) else None,
        test=item.nodeid, duration_s=round(elapsed, 3),
    )
    item.config.stash.setdefault(RESULTS, {})[item.nodeid] = result
    return report


def _record_restore(item: pytest.Item) -> None:
    """A restore after the check that did not succeed goes on the check's result."""
    failed = item.stash.get(RESTORE_FAILED, None)
    result = item.config.stash.get(RESULTS, {}).get(item.nodeid)
    if not failed or result is None:
        return
    why = "; ".join(failed)
    result.restore_failed = why
    note = f"restore failed after the check: {why}"
    result.message = f"{result.message}\n{note}" if result.message else note


def _where(result: Result) -> str:
    if result.node and result.channel:
        return f"{result.node}@{result.channel}"
    return result.node or result.channel or "-"


def _why(result: Result) -> str:
    """The one line that says why a check did not pass (for FAIL: what was observed)."""
    lines = [x.strip() for x in result.message.splitlines() if x.strip()]
    if result.outcome is Outcome.PASS:
        return f"restore failed: {result.restore_failed}" if result.restore_failed else ""
    if result.outcome is Outcome.FAIL:
        observed = [x for x in lines if x.startswith("observed:")]
        lines = observed or lines
    return lines[0] if lines else ""


def progress_line(result: Result, width: int | None = None) -> str:
    """One check as a line: outcome, seconds, assertion id, verb, node@channel, and why
    (trimmed to ``width`` columns; outcome to where are never cut)."""
    seconds = f"{result.duration_s:6.2f}s" if result.duration_s is not None else " " * 7
    head = (f"{str(result.outcome).upper().replace('_', ' '):<10} {seconds} "
            f"{result.id:<26} {result.verb or '-':<9} {_where(result)}")
    why = _why(result)
    if not why:
        return head
    text = f"{head}  {why}"
    if width is not None and len(text) > width:
        room = width - len(head) - 2
        text = f"{head}  {why[:room - 3]}..." if room > 12 else head
    return text


def _columns() -> int:
    """The terminal's width as pytest reckons it (80 off a terminal, or when too narrow)."""
    columns = shutil.get_terminal_size(fallback=(80, 24)).columns
    return columns if columns >= 40 else 80


Status = tuple[str, str, "str | tuple[str, Mapping[str, bool]]"]


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Status | None:
    """A check's progress line instead of its dot, and NOT TESTED as its own category.

    The report that decides the outcome (the call, or a setup that did not pass) is counted
    under the outcome's category and prints nothing; the teardown report, once the check is
    done and restored, prints the line. Asked again for the short summary (``-r``), a
    finished check answers with pytest's usual words (``NOT TESTED`` for its own)."""
    if not isinstance(report, pytest.TestReport):
        return None
    result = config.stash.get(RESULTS, {}).get(report.nodeid)
    if result is None:
        return None
    markup = MARKUP[result.outcome]
    if report.when == "teardown":
        shown = config.stash.setdefault(SHOWN, set())
        if report.nodeid in shown:
            return None
        shown.add(report.nodeid)
        line = progress_line(result, _columns() - PROGRESS_ROOM)
        if report.failed:  # an error tearing the check down is pytest's own ERROR, too
            line, markup = f"{line}  [teardown error]", {"red": True, "bold": True}
            return "error", "\n" + line, (line, markup)
        return "", "\n" + line, (line, markup)
    if report.when == "setup" and report.passed:
        return None
    category = CATEGORY[result.outcome]
    if result.outcome is Outcome.FAIL and report.when == "setup":
        category = "error"
    if report.nodeid not in config.stash.get(FINISHED, set()):
        return category, "", ""  # counted now, shown when the check is done
    if result.outcome is Outcome.NOT_TESTED:
        return category, "N", ("NOT TESTED", markup)
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]
                            ) -> Generator[None, None, None]:
    """pytest's ``-v`` test id waits while a person is asked at the terminal."""
    with BY_HAND:
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> Generator[None, None, None]:
    """A check's progress line waits while a person is asked at the terminal: it never cuts
    into the open prompt (:mod:`powerplane_conformance.terminal`)."""
    with BY_HAND:
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]
                             ) -> Generator[None, None, None]:
    """pytest's percentage waits while a person is asked at the terminal."""
    with BY_HAND:
        return (yield)


def results_of(config: pytest.Config) -> list[Result]:
    """Every result recorded in this pytest run, in run order."""
    return list(config.stash.get(RESULTS, {}).values())


def _sessions(config: pytest.Config) -> list[ConformanceSession]:
    empty: list[ConformanceSession] = []
    return config.stash.get(CONTEXTS, empty)


def _planned_check(item: pytest.Item, config: pytest.Config) -> dict[str, Any]:
    """What a check that did not run would have proved: id, verb, channel, node, test."""
    from powerplane import Verb

    spec = spec_of(getattr(item, "function", None))
    assert spec is not None
    params = getattr(item, "callspec", None)
    values: dict[str, Any] = dict(params.params) if params is not None else {}
    verb = values.get("verb") or spec.verb
    meta = item.stash.get(META, None)
    if meta is not None:
        return {"id": meta["id"], "verb": meta["verb"], "channel": meta["channel"] or None,
                "node": meta["node"], "test": item.nodeid}
    subject = values.get("subject")
    node, channel = None, None
    if isinstance(subject, str) and subject != ALL_SUBJECTS:
        node, _, channel = subject.partition("@")
        channel = channel or None
    elif spec.per_channel:
        names = sorted({c for s in _sessions(config) for c in s.channels()})
        channel = ",".join(names) or None
    return {"id": spec.assertion(verb).id,
            "verb": verb.value if isinstance(verb, Verb) else None,
            "channel": channel, "node": node, "test": item.nodeid}


def _machines(config: pytest.Config) -> list[dict[str, Any]]:
    """Per machine under test: the state it had at the start, whether the restore when the
    session closed brought it back (``restored``; None: not known) and how it ended
    (``restore``: ``restored``, ``sent_not_confirmed`` — its verb was sent and no reading
    confirmed it, outcome unknown — or ``not_restored``; None: not known)."""
    out: list[dict[str, Any]] = []
    for session in _sessions(config):
        for subject in session.subjects:
            original = session.original.get(subject.key)
            why: str | None
            if subject.key in session.restored:
                why = session.restored[subject.key]
                restored: bool | None = why is None
            else:
                restored, why = None, "not known: the session did not close"
            if original is None and not restored:
                why = ("its state at the start was never read (the run was interrupted "
                       "before), so nothing was done to it and nothing to undo"
                       if not session.started else why)
            # after a signal the restore was bounded: restored, sent but not confirmed
            # (outcome unknown), or not restored; else restored or not
            restore = session.restore_outcome.get(subject.key) or (
                None if restored is None or original is None
                else "restored" if restored else "not_restored")
            out.append({"subject": subject.key, "node": subject.node,
                        "channel": subject.channel,
                        "original": original.value if original is not None else None,
                        "restored": restored, "restore": restore,
                        "detail": "" if restored else (why or "")})
    return out


def _all_restored(machines: list[dict[str, Any]]) -> bool | None:
    """True when every machine whose state at the start is known reads it again; False
    when one does not (or is not known to); None when no machine's start was read."""
    known = [m for m in machines if m["original"] is not None]
    if not known:
        return None
    return all(m["restored"] is True for m in known)


def interruption(config: pytest.Config, exitstatus: int | pytest.ExitCode,
                 broke: bool = False) -> dict[str, Any] | None:
    """How the run was cut short, or None when every collected check ran to its end.

    Cut short: a signal (SIGINT, SIGTERM), a KeyboardInterrupt, pytest told to stop
    (``-x``, ``--maxfail``, ``session.shouldstop``), or any collected check that did not
    finish. Names the signal or cause, the check it was cut in, the checks that did not run,
    and, per machine, whether it was put back the way it was."""
    session = config.stash.get(SESSION, None)
    # the items pytest kept to run (after -k, -m, --deselect), not all it collected
    items = [i for i in (session.items if session is not None else [])
             if spec_of(getattr(i, "function", None)) is not None]
    finished = config.stash.get(FINISHED, set())
    recorded = config.stash.get(RESULTS, {})
    sessions = _sessions(config)
    signal_name = received()
    stop = (session.shouldstop or session.shouldfail) if session is not None else False
    unfinished = [i for i in items if i.nodeid not in finished]
    closing = any(s.interrupted for s in sessions)
    if not (broke or signal_name or closing or unfinished or stop
            or exitstatus == pytest.ExitCode.INTERRUPTED):
        return None
    if signal_name:
        cause = f"signal {signal_name}"
    elif stop:  # pytest raises its Interrupted for it: that is no KeyboardInterrupt of ours
        cause = f"pytest stopped the run ({stop})" if isinstance(stop, str) \
            else "pytest stopped the run (session.shouldstop)"
    elif broke or closing or exitstatus == pytest.ExitCode.INTERRUPTED:
        cause = "KeyboardInterrupt"
    else:
        cause = "the run ended before every collected check ran"
    during: str | None = None
    current = config.stash.get(CURRENT, None)
    by_id = {i.nodeid: i for i in items}
    if current is not None and current[0] in by_id:
        check = _planned_check(by_id[current[0]], config)
        where = (f"{check['node']}@{check['channel']}" if check["node"] and check["channel"]
                 else check["node"] or check["channel"] or "the run")
        if current[1] == "setup" and not any(s.started for s in sessions):
            during = "starting the session (discovering capabilities, reading each machine)"
        elif current[1] == "teardown":
            during = f"{check['id']} on {where}, while putting its machine back"
        else:
            during = f"{check['id']} on {where} ({current[1]})"
    elif closing:
        during = "closing the session, while putting the machines back"
    cut = [i for i in unfinished if i.nodeid in recorded]
    not_run = [_planned_check(i, config) for i in unfinished if i.nodeid not in recorded]
    machines = _machines(config)
    return {
        "signal": signal_name,
        "cause": cause,
        "during": during,
        "checks_collected": len(items),
        "not_run": not_run,
        "not_finished": [_planned_check(i, config) for i in cut],
        "machines": machines,
        "machines_restored": _all_restored(machines),
    }


def _build(config: pytest.Config, exitstatus: int | pytest.ExitCode,
           broke: bool = False) -> dict[str, Any]:
    from powerplane_conformance.report import build_results

    return build_results(results_of(config), _sessions(config),
                         interruption=interruption(config, exitstatus, broke))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int
                         ) -> Generator[None, None, None]:
    """results.json, written once every fixture is torn down (the machines restored, the
    channels closed) — and written even when that teardown is interrupted."""
    broke = False
    try:
        return (yield)
    except KeyboardInterrupt:
        broke = True
        raise
    finally:
        _write_report(session, exitstatus, broke)


def _write_report(session: pytest.Session, exitstatus: int, broke: bool) -> None:
    config = session.config
    path = config.getoption("powerplane_report", None)
    if not path:
        return
    data = _build(config, exitstatus, broke)
    text = redact(json.dumps(data, indent=2, default=str), config.stash.get(SECRETS, set()))
    Path(path).write_text(text + "\n", encoding="utf-8")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = results_of(config)
    if not results:
        return
    folded = _not_tested_folded(results) if terminalreporter.hasopt("s") else []
    if folded:  # -rs: pytest's short summary lists SKIP only; NOT TESTED is apart
        terminalreporter.write_sep("=", "not tested (blocked by the target file)")
        for line in folded:
            terminalreporter.write_line(line, yellow=True)
    if config.getoption("powerplane_report", None):
        return  # the CLI prints its own summary
    from powerplane_conformance.report import summary_text

    data = _build(config, exitstatus)
    terminalreporter.write_sep("=", "powerplane conformance")
    terminalreporter.write_line(summary_text(data))


def _not_tested_folded(results: list[Result]) -> list[str]:
    """``NOT TESTED [n] reason`` per distinct reason, like pytest's folded skips."""
    reasons = Counter(r.message.strip().splitlines()[0] if r.message.strip() else "-"
                      for r in results if r.outcome is Outcome.NOT_TESTED)
    return [f"NOT TESTED [{n}] {why}" for why, n in reasons.items()]
