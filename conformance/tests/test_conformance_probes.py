"""The network negatives' probes are made side by side (each with a channel of its own,
against a fake of its own or the device), at most ``MAX_PROBES`` at once, and each check
judges its own probe as strictly as before.

The device here is a simulated channel whose address and timeouts are declared, so the
suite derives every probe with no hints; a probe's read (through a channel pointed at
the suite's closed port or silent server, or holding a wrong password) first meets the
other probes: it waits, at most ``MEET_S``, until ``MAX_PROBES`` probes have arrived,
then talks TCP to its fake, or is refused by the device (the ``secret_key`` hint names
the secret the channel presents; ``expect_password`` is the device's side). Every read
is logged in order (enter, leave): probes made one after another would show one leave
before the next enter. No timing anywhere.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from conformance_targets import messages, outcome, sim_target

from powerplane import (
    Address,
    ChannelTimeout,
    ChannelType,
    Reading,
    Timeouts,
    Unreachable,
    hookimpl,
)
from powerplane.plugins import registry
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target
from powerplane_conformance.api import RunSummary
from powerplane_conformance.iowatch import IOWatch, unwatched
from powerplane_conformance.loop import LoopThread
from powerplane_conformance.probes import MAX_PROBES

Run = Callable[..., RunSummary]

DEVICE = "device.example:623"
"""The device's own address (in-process: the simulated machines)."""
MEET_S = 5.0
"""How long a probe's read waits for the others, at most (inside the probe's own bound)."""


class MeetingConfig(SimulatedConfig):
    timeouts: Timeouts = Timeouts(connect_s=5, read_s=5)
    """Bounds on connecting to and hearing from the device."""


class Meeting(SimulatedChannel):
    """A simulated device; a read through a probe's channel meets the other probes first."""

    config: MeetingConfig
    log: ClassVar[list[tuple[str, str]]] = []
    """``("enter" | "leave", probe)``, in the order they happened (one event loop)."""
    arrived: ClassVar[int] = 0
    pytest_at: ClassVar[set[str | None]] = set()
    """``PYTEST_CURRENT_TEST`` as each probe entered and left."""
    leak_in_log: ClassVar[bool] = False
    """Write the password it was given into a log line (a liar)."""
    met: ClassVar[asyncio.Condition | None] = None

    def _probe(self) -> str | None:
        cfg = self.config
        if cfg.endpoint != DEVICE:
            return f"fake {cfg.endpoint}"
        given = cfg.password.reveal() if cfg.password else None
        expected = cfg.expect_password.reveal() if cfg.expect_password else None
        return None if given == expected else f"wrong password {id(self)}"

    async def read_power_state(self, target: str) -> Reading:
        probe = self._probe()
        if probe is None:
            return await super().read_power_state(target)
        cls = type(self)
        if cls.met is None:
            cls.met = asyncio.Condition()
        cls.log.append(("enter", probe))
        cls.pytest_at.add(os.environ.get("PYTEST_CURRENT_TEST"))
        try:
            async with cls.met:
                cls.arrived += 1
                cls.met.notify_all()
                try:
                    await asyncio.wait_for(
                        cls.met.wait_for(lambda: cls.arrived >= MAX_PROBES), MEET_S)
                except TimeoutError:
                    pass  # alone: the log shows it
            if probe.startswith("wrong"):
                if cls.leak_in_log and self.config.password is not None:
                    logging.getLogger("meeting").warning(
                        "login with %s", self.config.password.reveal())
                return await super().read_power_state(target)  # refused
            return await self._fake(target)
        finally:
            cls.pytest_at.add(os.environ.get("PYTEST_CURRENT_TEST"))
            cls.log.append(("leave", probe))

    async def _fake(self, target: str) -> Reading:
        host, _, port = str(self.config.endpoint).rpartition(":")
        bound = self.config.timeouts
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port)), bound.connect_s)
        except TimeoutError as exc:
            raise ChannelTimeout("no connection", channel=self.name, target=target) from exc
        except OSError as exc:
            raise Unreachable(f"cannot connect: {exc.strerror}", channel=self.name,
                              target=target) from exc
        try:
            await asyncio.wait_for(reader.readline(), bound.read_s)
        except TimeoutError as exc:
            raise ChannelTimeout("no answer", channel=self.name, target=target) from exc
        finally:
            writer.close()
        raise Unreachable("the connection closed", channel=self.name, target=target)


class _Plugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="meeting", config=MeetingConfig, factory=Meeting,
                             target=parse_target,
                             address=Address("endpoint", format="host:port"),
                             description="a device whose probes meet"))


@pytest.fixture
def meeting() -> Iterator[None]:
    reg = registry()
    reg.add_module("conformance-meeting", _Plugin(), "tests", "0")
    Meeting.log.clear()
    Meeting.arrived = 0
    Meeting.met = None
    Meeting.leak_in_log = False
    Meeting.pytest_at = set()
    yield
    reg.remove("conformance-meeting")


NETWORK = "wrong_credentials_rejected or closed_port_unreachable or silent_server_timeout " \
          "or secret_not_disclosed"


def meeting_target(machines: dict[str, str]) -> dict[str, Any]:
    # the address and the short timeouts are derived from the declarations; the hint
    # names the secret the channel presents (expect_password is the device's side)
    return sim_target({"endpoint": DEVICE}, {"allow_destructive": False},
                      machines=machines, type_name="meeting")


def most_inside(log: list[tuple[str, str]]) -> int:
    inside = top = 0
    for what, _ in log:
        inside += 1 if what == "enter" else -1
        top = max(top, inside)
    return top


@pytest.mark.usefixtures("meeting")
def test_the_network_negatives_probes_overlap(run: Run) -> None:
    """Two nodes: wrong credentials on each, one closed port and one silent server for the
    channel: four probes, all inside at once (every enter before the first leave), and
    each check judges its own: pass."""
    summary = run(meeting_target({"m1": "on", "m2": "off"}), pytest_args=["-k", NETWORK])
    log = Meeting.log
    enters = [p for what, p in log if what == "enter"]
    assert len(enters) == 4, log
    assert sum(1 for p in enters if p.startswith("wrong")) == 2, log
    first_leave = next(i for i, (what, _) in enumerate(log) if what == "leave")
    assert [what for what, _ in log[:first_leave]] == ["enter"] * 4, log
    for ident in ("WRONG_CREDENTIALS_REJECTED", "CLOSED_PORT_UNREACHABLE",
                  "SILENT_SERVER_TIMEOUT", "SECRET_NOT_DISCLOSED"):
        assert "pass" in outcome(summary, ident), (ident, messages(summary, ident))
        assert outcome(summary, ident) <= {"pass", "skip"}, (ident, messages(summary, ident))
    # the once-per-channel probes: one check made it, the other node's names it
    assert "made by CLOSED_PORT_UNREACHABLE on n-m1@lab" in messages(
        summary, "CLOSED_PORT_UNREACHABLE")
    assert "made by SILENT_SERVER_TIMEOUT on n-m1@lab" in messages(
        summary, "SILENT_SERVER_TIMEOUT")
    assert summary.data["counts"]["fail"] == 0
    # pytest does not go on while the probes run: it unsets PYTEST_CURRENT_TEST after
    # each test, and a client that reads the environment whole then fails (KeyError)
    assert len(Meeting.pytest_at) == 1, Meeting.pytest_at
    (at,) = Meeting.pytest_at
    assert at is not None and "test_wrong_credentials_rejected[n-m1@lab]" in at, at


@pytest.mark.usefixtures("meeting")
def test_no_more_than_max_probes_at_once(run: Run) -> None:
    """Three nodes: five probes; at most MAX_PROBES inside at once, every one made once,
    and every check judged (wrong credentials refused on each node)."""
    summary = run(meeting_target({"m1": "on", "m2": "off", "m3": "on"}),
                  pytest_args=["-k", NETWORK])
    log = Meeting.log
    assert sum(1 for what, _ in log if what == "enter") == 5, log
    assert most_inside(log) == MAX_PROBES, log
    results = summary.data["results"]
    wrong = [r for r in results if r["id"] == "WRONG_CREDENTIALS_REJECTED"]
    assert [r["outcome"] for r in wrong] == ["pass"] * 3, wrong
    assert summary.data["counts"]["fail"] == 0, results


@pytest.mark.usefixtures("meeting")
def test_a_secret_in_a_probes_log_line_is_still_found(run: Run) -> None:
    """The probes run side by side, and each one's log lines are its own: the wrong
    password each node's probe presented, written in a log line on the session's event
    loop, fails SECRET_NOT_DISCLOSED on that node."""
    Meeting.leak_in_log = True
    summary = run(meeting_target({"m1": "on", "m2": "off"}), pytest_args=["-k", NETWORK])
    results = [r for r in summary.data["results"] if r["id"] == "SECRET_NOT_DISCLOSED"]
    assert [r["outcome"] for r in results] == ["fail", "fail"], results
    for r in results:
        assert "a wrong secret in a log line" in r["message"], r["message"]
    assert "pass" in outcome(summary, "WRONG_CREDENTIALS_REJECTED")
    assert "ppc-" not in str(summary.data)  # the canaries are redacted


def test_watches_open_at_once_each_see_their_own_calls() -> None:
    """Two watches open at the same time in two threads: each gets the log lines of the
    calls made in its own context (on the event loop too), and a line written in no
    watch's context goes to both."""
    loop = LoopThread()
    both = threading.Barrier(2, timeout=30)
    seen: dict[str, list[str]] = {}
    log = logging.getLogger("powerplane-conformance-test-watch")

    async def on_loop(name: str) -> None:
        log.warning("%s on the loop", name)

    def watch(name: str) -> None:
        with IOWatch() as io:
            both.wait()  # both watches are open now
            log.warning("%s in its thread", name)
            loop.run(on_loop(name), 30)
            both.wait()
            if name == "a":
                nobody = threading.Thread(target=log.warning, args=("in no watch",))
                nobody.start()
                nobody.join(30)
            both.wait()
        seen[name] = io.logs

    try:
        threads = [threading.Thread(target=watch, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        loop.close()
    for mine, other in (("a", "b"), ("b", "a")):
        text = "\n".join(seen[mine])
        assert f"{mine} in its thread" in text and f"{mine} on the loop" in text, text
        assert f"{other} in its thread" not in text and f"{other} on the loop" not in text
        assert "in no watch" in text


def test_a_thread_that_is_unwatched_is_in_no_watch() -> None:
    """The power plan's workers change machines while a check watches its own call (no
    I/O before refusing): what such a thread does, on the event loop too, is in no
    watch; a thread that says nothing is in every open watch."""
    loop = LoopThread()
    log = logging.getLogger("powerplane-conformance-test-unwatched")

    async def on_loop() -> None:
        log.warning("the plan on the loop")

    def worker() -> None:
        unwatched()
        log.warning("the plan in its thread")
        loop.run(on_loop(), 30)

    try:
        with IOWatch() as io:
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join(30)
            other = threading.Thread(target=log.warning, args=("a library's thread",))
            other.start()
            other.join(30)
    finally:
        loop.close()
    assert not any("the plan" in line for line in io.logs), io.logs
    assert any("a library's thread" in line for line in io.logs), io.logs
