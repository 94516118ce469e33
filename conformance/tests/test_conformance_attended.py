"""An attended target: a person at the rack is the way back for a channel that cannot
power on (``conformance.attended: true``).

Every run is a real run of the suite against core's ``simulated`` channel advertising
``reboot`` and ``shutdown`` only (as an in-band OS API does), its machines kept in a state
file: the "person" powers a machine on by writing that file through a channel of its own,
exactly as the suite's channel then reads it. The person's word is never the evidence;
the readback is, so a person who does nothing leaves the check NOT TESTED, never passed.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conformance_targets import messages, outcome, sim_target

from powerplane.channel import PowerState
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig
from powerplane_conformance.api import RunSummary

Run = Callable[..., RunSummary]

SHUTDOWN_ONLY = ["reboot", "shutdown"]
PROMPT = "at the rack, then press Enter"


def attended_target(state: Path, *, attended: bool = True, readback: str = "full",
                    **conformance: Any) -> dict[str, Any]:
    """Two machines, both on, on a channel that cannot power on."""
    return sim_target({"verbs": SHUTDOWN_ONLY, "readback": readback, "state_file": str(state)},
                      {"attended": attended, **conformance}, machines={"m1": "on", "m2": "on"})


class Person:
    """Presses a machine's power button when asked: powers it on in the state file."""

    def __init__(self, state: Path, press: bool = True) -> None:
        self.press = press
        self.asked: list[tuple[str, Any]] = []
        self.rack = SimulatedChannel("rack", SimulatedConfig(
            machines={"m1": "on", "m2": "on"}, state_file=str(state)))

    def __call__(self, node: str, target: Any) -> None:
        self.asked.append((node, target))
        if self.press:
            self.rack.set_state(str(target), PowerState.ON)


def shutdown_cell(summary: RunSummary) -> dict[str, Any]:
    row = next(m for m in summary.data["matrix"] if m["channel"] == "lab")
    return next(c for c in row["verbs"] if c["verb"] == "shutdown")


@pytest.mark.parametrize("readback", ["full", "on-only"])
def test_a_person_powering_on_verifies_shutdown_and_the_verdict_is_pass(
    run: Run, tmp_path: Path, readback: str
) -> None:
    """The way back through a person, read back on (also by a channel that cannot see
    off: it can see on): shutdown verified on both nodes, the state restored, pass."""
    state = tmp_path / "lab.json"
    person = Person(state)
    summary = run(attended_target(state, readback=readback), power_on_by_hand=person)
    data = summary.data
    assert data["verdict"] == "pass", (data["headline"], data["verdict_reason"])
    assert summary.exit_code == 0 and data["counts"]["fail"] == 0
    cell = shutdown_cell(summary)
    assert cell["status"] == "verified" and cell["checks"]["not_tested"] == 0, cell
    for ident in ("SHUTDOWN_READBACK", "READBACK_NOT_STALE", "SHUTDOWN_REPEATED",
                  "SHUTDOWN_CONCURRENT", "STATE_RESTORED"):
        assert outcome(summary, ident) == {"pass"}, (ident, messages(summary, ident))
    assert {n for n, _ in person.asked} == {"n-m1", "n-m2"}
    noted = [r for r in data["results"] if "the way back was a person" in r["message"]]
    assert noted, "the checks a person brought a machine back for say so"
    assert all("powered on by hand at the rack" in r["message"] and "read back on: on"
               in r["message"] for r in noted)
    assert Person(state).rack.state_of("m1") == "on" and Person(state).rack.state_of("m2") \
        == "on"


class SlowPerson(Person):
    """A person who takes a moment at each machine, and records when each prompt begins
    and ends. Asked about one machine, they wait (at most ``linger_s``) for a prompt about
    another machine to begin: two prompts at once would show in the log."""

    def __init__(self, state: Path, linger_s: float = 1.0) -> None:
        super().__init__(state)
        self.linger_s = linger_s
        self.log: list[tuple[str, str]] = []
        self.inside = 0
        self.changed = threading.Condition()

    def __call__(self, node: str, target: Any) -> None:
        with self.changed:
            self.log.append(("begin", node))
            self.inside += 1
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.inside > 1, timeout=self.linger_s)
        try:
            super().__call__(node, target)
        finally:
            with self.changed:
                self.inside -= 1
                self.log.append(("end", node))
                self.changed.notify_all()


def test_two_machines_needing_a_person_at_once_are_asked_one_at_a_time(
    run: Run, tmp_path: Path
) -> None:
    """Both machines go off together (the concurrent shutdown round, each machine's worker
    beside the other's) and both need a person to come back: the prompts come one at a
    time, each naming its machine, each one ended before the next begins."""
    state = tmp_path / "lab.json"
    person = SlowPerson(state)
    summary = run(attended_target(state), power_on_by_hand=person,
                  pytest_args=["-k", "test_verb_concurrent and shutdown"])
    assert outcome(summary, "SHUTDOWN_CONCURRENT") == {"pass"}, \
        messages(summary, "SHUTDOWN_CONCURRENT")
    assert {n for n, _ in person.asked} == {"n-m1", "n-m2"}, person.log
    log = person.log
    assert len(log) == 2 * len(person.asked)
    for i in range(0, len(log), 2):
        assert log[i][0] == "begin" and log[i + 1] == ("end", log[i][1]), log
    assert [n for n, _ in person.asked] == [n for what, n in log if what == "begin"]


def test_a_person_who_does_nothing_leaves_the_check_not_tested(
    run: Run, tmp_path: Path
) -> None:
    """Asked, the person does not power the machine on: readback shows it did not come
    back, so nothing that needed it is verified; not the channel's fault, so no FAIL."""
    state = tmp_path / "lab.json"
    person = Person(state, press=False)
    summary = run(attended_target(state, settle_timeout_s=0.3), power_on_by_hand=person)
    data = summary.data
    assert data["verdict"] == "incomplete" and data["counts"]["fail"] == 0, data["headline"]
    assert person.asked, "the person was asked"
    assert shutdown_cell(summary)["status"] == "not_verified"
    assert outcome(summary, "SHUTDOWN_REPEATED") == {"not_tested"}
    said = messages(summary, "SHUTDOWN_REPEATED")
    assert "the machine did not read on after the person was asked to power on" in said
    assert "at the rack" in said and "the way back was a person" not in said
    assert "did not read on after the person was asked" in data["verdict_reason"]


def test_without_attended_nobody_is_asked_and_the_verdict_is_todays(
    run: Run, tmp_path: Path
) -> None:
    """``attended`` off: exactly today's behaviour, even with a person given."""
    state = tmp_path / "lab.json"
    person = Person(state)
    summary = run(attended_target(state, attended=False), power_on_by_hand=person)
    assert person.asked == []
    assert summary.data["verdict"] == "incomplete"
    assert shutdown_cell(summary)["status"] == "not_verified"
    assert "precondition not met on n-m1@lab: the machine is not on and channel 'lab' " \
           "does not advertise power-on to make it so" in messages(summary, "SHUTDOWN_REPEATED")
    assert "a person must restore it" in messages(summary, "STATE_RESTORED")


def test_attended_with_no_one_to_ask_is_not_tested_with_what_to_do(
    run: Run, tmp_path: Path
) -> None:
    summary = run(attended_target(tmp_path / "lab.json"))
    assert summary.data["verdict"] == "incomplete"
    said = messages(summary, "SHUTDOWN_REPEATED")
    assert "there is no person to ask: the target is attended, so run `powerplane " \
           "conformance` on a terminal" in said
    assert "run_suite(power_on_by_hand=...)" in said


def test_a_read_only_attended_run_asks_nobody(run: Run, tmp_path: Path) -> None:
    state = tmp_path / "lab.json"
    person = Person(state)
    Person(state).rack.set_state("m2", PowerState.OFF)  # off at the start: left as it is
    summary = run(attended_target(state, allow_destructive=False), power_on_by_hand=person)
    assert person.asked == [] and summary.data["verdict"] == "incomplete"


def test_a_person_is_in_process_only(tmp_path: Path) -> None:
    from powerplane_conformance.api import run_suite

    with pytest.raises(ValueError, match="in_subprocess"):
        run_suite(attended_target(tmp_path / "lab.json"), in_subprocess=True,
                  power_on_by_hand=lambda node, target: None)


def _converse(master: int, proc: subprocess.Popen[bytes], state: Path,
              timeout: float) -> str:
    """Read the child's terminal; at each prompt power the named machine on, press Enter."""
    rack = Person(state)
    seen, pending = b"", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        text = seen.decode(errors="replace")
        while text.count(PROMPT) > pending:
            pending += 1
            line = text.split(PROMPT)[pending - 1].rsplit("power on ", 1)[1]
            target = line.split("(", 1)[1].split(")", 1)[0]
            rack(line.split(" ", 1)[0], target)
            os.write(master, b"\n")
        if proc.poll() is not None and not ready:
            break
    return seen.decode(errors="replace")


@pytest.mark.slow
def test_the_command_asks_the_person_at_the_terminal(
    write_target: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    """``powerplane conformance`` in a child whose terminal is a pseudo-terminal: it asks
    "power on <node> (<target>) at the rack, then press Enter" (through pytest's output
    capture), the machine is powered on in the state file before Enter, and the run
    passes; the report says the way back was a person."""
    state = tmp_path / "lab.json"
    target = write_target(attended_target(state))
    report = tmp_path / "results.json"
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "powerplane.cli", "conformance", "--target", str(target),
             "--yes", "--report", str(report)],
            stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "NO_COLOR": "1"})
        os.close(slave)
        text = _converse(master, proc, state, timeout=120)
        proc.wait(30)
    finally:
        os.close(master)
    assert proc.returncode == 0, text
    assert "power on n-m1 (m1) at the rack, then press Enter" in text
    assert "\r\npass: every advertised verb verified" in text, text[-3000:]
    assert "the way back was a person" in report.read_text(encoding="utf-8")


def test_the_command_off_a_terminal_asks_nobody(
    write_target: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from powerplane.cli import cli

    target = write_target(attended_target(tmp_path / "lab.json"))
    result = CliRunner().invoke(cli, ["conformance", "--target", str(target), "--yes"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert PROMPT not in result.output
    assert result.stdout.startswith("not verified:")
    assert "there is no person to ask" in result.stdout


def test_a_progress_line_never_cuts_into_an_open_prompt() -> None:
    """pytest's report writes hold the terminal: while one is being written no prompt can
    open, and while a prompt is open the write waits (the same lock)."""
    from powerplane_conformance import plugin
    from powerplane_conformance.terminal import BY_HAND

    for wrapper in (lambda: plugin.pytest_runtest_logreport(None),  # type: ignore[arg-type]
                    lambda: plugin.pytest_runtest_logstart("x", ("x", None, "x")),
                    lambda: plugin.pytest_runtest_logfinish("x", ("x", None, "x"))):
        gen = wrapper()
        next(gen)  # pytest's own writers run here
        assert not BY_HAND.acquire(blocking=False)  # a prompt would wait for the line
        with pytest.raises(StopIteration):
            gen.send(None)
        assert BY_HAND.acquire(blocking=False)  # released once the line is written
        BY_HAND.release()


def test_the_prompt_holds_the_terminal(run: Run, tmp_path: Path) -> None:
    from powerplane_conformance.terminal import BY_HAND

    state = tmp_path / "lab.json"
    person = Person(state)
    held: list[bool] = []

    def asked(node: str, target: Any) -> None:
        held.append(not BY_HAND.acquire(blocking=False))
        person(node, target)

    summary = run(attended_target(state), power_on_by_hand=asked)
    assert held and all(held)
    assert summary.data["verdict"] == "pass", summary.data["headline"]
