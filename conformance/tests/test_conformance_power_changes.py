"""Fewer power changes for the same evidence: every power change a verb check judges is a
round of its verb, made once by the power plan and used by every check it is evidence for.

``{VERB}_READBACK`` is round 1 of ``{VERB}_REPEATED``; shutdown and power-on rounds
alternate, each the other's start state; the idempotent verbs are sent where the machine
already is in their state; ``READBACK_NOT_STALE`` passes on a shutdown round that read off.
The verbs are counted on a recording channel (no timing anywhere): one machine that starts
on, default ``repeat`` 3, sent 24 verbs at first, 13 later (11 changes), and now 11: the
minimum of 9 changes (3 rounds of each verb) and the two idempotent verbs.
Each check still reports its own rounds, a failed round fails only its own verb's checks,
and a check with no evidence to reuse (under ``-k``) makes its own.

The network negatives likewise: SECRET_NOT_DISCLOSED searches the error texts, log lines
and argv the other negative checks of its node produced and probes only what did not run;
the closed-port and silent-server probes (they reach the suite's fakes, not the node) are
made once per channel; the short timeout the suite derives for them is 1 s. Counted as
the channel instances the suite builds against the fakes and with wrong secrets.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import conformance_liars
import pytest
from conformance_lineproto import DECLARED_ADDRESS, DeclaredLineConfig, LineChannel
from conformance_targets import messages, outcome, sim_target

from powerplane import Acceptance, ChannelTimeout, ChannelType, hookimpl
from powerplane.plugins import registry
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target
from powerplane_conformance.api import RunSummary
from powerplane_conformance.hints import short_timeouts
from powerplane_conformance.settings import NegativeHints

pytestmark = pytest.mark.usefixtures("liars")

Run = Callable[..., RunSummary]


def _sent(target: str = "m1") -> list[str]:
    """The verbs the recording channel was sent for ``target``, in order."""
    return [v.split()[0] for v in conformance_liars.Recording.sent if v.split()[1] == target]


@pytest.fixture
def recorded() -> Iterator[None]:
    conformance_liars.Recording.sent.clear()
    yield
    conformance_liars.Recording.sent.clear()


def _recording(machines: dict[str, str], **conformance: Any) -> dict[str, Any]:
    return sim_target(type_name="honest-recording", machines=machines,
                      conformance=conformance)


def _rounds(junit: Path) -> dict[str, str]:
    """The ``rounds`` property of each test case of a JUnit file, by test name."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        for prop in case.iter("property"):
            if prop.get("name") == "rounds":
                out[case.get("name", "?")] = prop.get("value", "")
    return out


MINIMUM_CHANGES = 3 * 3
"""Power changes one machine needs with ``repeat`` 3: three rounds of each of reboot,
shutdown and power-on (a round is one change; shutdown and power-on rounds alternate, each
the other's start state), and the machine ends as it began. Plus the two idempotent verbs
(sent where the machine already is in their state: no change)."""


@pytest.mark.usefixtures("recorded")
def test_one_machine_with_default_repeat_takes_the_minimum_9_changes(run: Run) -> None:
    summary = run(_recording({"m1": "on"}, repeat=3))
    assert summary.exit_code == 0, summary.data["results"]
    assert summary.data["verdict"] != "fail"
    for ident in ("REBOOT_READBACK", "REBOOT_REPEATED", "POWER_ON_READBACK",
                  "POWER_ON_IDEMPOTENT", "POWER_ON_REPEATED", "SHUTDOWN_READBACK",
                  "SHUTDOWN_IDEMPOTENT", "READBACK_NOT_STALE", "SHUTDOWN_REPEATED",
                  "STATE_RESTORED"):
        assert outcome(summary, ident) == {"pass"}, ident
    assert _sent() == [
        "power-on",                 # POWER_ON_IDEMPOTENT (on already)
        "reboot",                   # REBOOT_READBACK = REBOOT_REPEATED round 1
        "reboot", "reboot",         # REBOOT_REPEATED rounds 2, 3
        "shutdown",                 # SHUTDOWN_READBACK (READBACK_NOT_STALE's evidence)
        "shutdown",                 # SHUTDOWN_IDEMPOTENT (off already)
        "power-on",                 # POWER_ON_READBACK
        "shutdown", "power-on",     # round 2 of SHUTDOWN_REPEATED and POWER_ON_REPEATED
        "shutdown", "power-on",     # round 3 of each; on, as at the start
    ]
    assert len(_sent()) - 2 == MINIMUM_CHANGES  # before: 11 changes, 13 verbs


@pytest.mark.usefixtures("recorded")
def test_a_machine_that_starts_off_takes_the_same_minimum(run: Run) -> None:
    summary = run(_recording({"m1": "off"}, repeat=3))
    assert summary.exit_code == 0, summary.data["results"]
    sent = _sent()
    assert sent[:2] == ["shutdown", "power-on"]  # SHUTDOWN_IDEMPOTENT, POWER_ON_READBACK
    assert len(sent) - 2 == MINIMUM_CHANGES
    assert outcome(summary, "STATE_RESTORED") == {"pass"}


@pytest.mark.usefixtures("recorded")
def test_repeat_one_takes_3_changes(run: Run) -> None:
    summary = run(_recording({"m1": "on"}, repeat=1))
    assert summary.exit_code == 0, summary.data["results"]
    assert _sent() == ["power-on", "reboot", "shutdown", "shutdown", "power-on"]


@pytest.mark.usefixtures("recorded")
def test_each_repeated_check_reports_every_round_and_who_made_it(
    run: Run, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    summary = run(_recording({"m1": "on"}, repeat=3), junit=junit)
    assert summary.exit_code == 0
    rounds = _rounds(junit)
    power_on = rounds["test_verb_repeated[n-m1@lab-power-on]"]
    assert power_on.startswith("round 1 (POWER_ON_READBACK): from off, on")
    assert "round 2 (POWER_ON_REPEATED round 2): from off, on" in power_on
    assert "round 3 (POWER_ON_REPEATED round 3): from off, on" in power_on
    shutdown = rounds["test_verb_repeated[n-m1@lab-shutdown]"]
    assert shutdown.startswith("round 1 (SHUTDOWN_READBACK): from on, off")
    assert "round 2 (SHUTDOWN_REPEATED round 2): from on, off" in shutdown
    assert "round 4" not in shutdown
    assert rounds["test_verb_repeated[n-m1@lab-reboot]"].startswith(
        "round 1 (REBOOT_READBACK): from on, on")
    assert rounds["test_readback_not_stale[n-m1@lab]"].startswith(
        "round 1 (SHUTDOWN_READBACK): from on, off")
    latency = {r["id"]: r["latency_s"] for r in summary.data["results"]}
    assert latency["POWER_ON_REPEATED"] is not None


@pytest.mark.usefixtures("recorded")
def test_a_check_with_nothing_to_reuse_makes_its_own_rounds(run: Run) -> None:
    """Under ``-k``: SHUTDOWN_REPEATED alone makes all three of its rounds (the power-on
    between them is its precondition), READBACK_NOT_STALE alone its own shutdown."""
    summary = run(_recording({"m1": "on"}, repeat=3),
                  pytest_args=["-k", "test_verb_repeated and shutdown"])
    assert outcome(summary, "SHUTDOWN_REPEATED") == {"pass"}
    assert _sent() == ["shutdown", "power-on", "shutdown", "power-on", "shutdown", "power-on"]
    conformance_liars.Recording.sent.clear()
    summary = run(_recording({"m1": "on"}), pytest_args=["-k", "readback_not_stale"])
    assert outcome(summary, "READBACK_NOT_STALE") == {"pass"}
    assert _sent() == ["shutdown", "power-on"]


def test_a_failed_round_is_reported_by_the_check_it_is_evidence_for(run: Run) -> None:
    """Readback that always reads off (so the machine starts off): POWER_ON_REPEATED fails
    on the round POWER_ON_READBACK made, saying whose it was, and no more power-on rounds
    are sent after a failed one."""
    conformance_liars.Recording.sent.clear()
    summary = run(sim_target(type_name="liar-off-reader", machines={"m1": "on"},
                             conformance={"settle_timeout_s": 0.3, "repeat": 3}))
    assert outcome(summary, "POWER_ON_READBACK") == {"fail"}
    assert outcome(summary, "POWER_ON_REPEATED") == {"fail"}
    text = messages(summary, "POWER_ON_REPEATED")
    assert "round 1 of 1 (POWER_ON_READBACK): off" in text
    assert "POWER_ON_REPEATED round" not in text
    assert "not asked again" in messages(summary, "REBOOT_READBACK")


class ShutdownIgnored(SimulatedChannel):
    """Accepts shutdown and does nothing; power-on and reboot work."""

    async def shutdown(self, target: str) -> Acceptance:
        return Acceptance()


class _Plugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="shutdown-ignored", config=SimulatedConfig,
                             factory=ShutdownIgnored, target=parse_target,
                             description="accepts shutdown, does nothing"))


@pytest.fixture
def shutdown_ignored() -> Iterator[None]:
    reg = registry()
    reg.add_module("conformance-shutdown-ignored", _Plugin(), "tests", "0")
    yield
    reg.remove("conformance-shutdown-ignored")


@pytest.mark.usefixtures("shutdown_ignored")
def test_no_check_passes_on_another_checks_failed_round(run: Run) -> None:
    """The shutdown rounds made as power-on preconditions fail: the power-on checks are
    NOT TESTED with why, the shutdown checks FAIL, and none of them passes."""
    summary = run(sim_target(type_name="shutdown-ignored", machines={"m1": "on"},
                             conformance={"settle_timeout_s": 0.3, "repeat": 3}))
    assert summary.exit_code == 1
    assert outcome(summary, "POWER_ON_READBACK") == {"not_tested"}
    assert "did not read off after shutdown" in messages(summary, "POWER_ON_READBACK")
    assert outcome(summary, "POWER_ON_REPEATED") == {"not_tested"}
    assert outcome(summary, "SHUTDOWN_READBACK") == {"fail"}
    assert outcome(summary, "SHUTDOWN_REPEATED") == {"fail"}
    assert "(SHUTDOWN_READBACK): on" in messages(summary, "SHUTDOWN_REPEATED")
    assert "pass" not in outcome(summary, "READBACK_NOT_STALE")
    assert outcome(summary, "REBOOT_REPEATED") == {"pass"}


# -- the network negatives ------------------------------------------------------------------
BUILT: list[tuple[str, str]] = []
"""``(address, password)`` of every ``lineproto-counted`` channel built, in order."""


def _counted(name: str, config: DeclaredLineConfig) -> LineChannel:
    BUILT.append((config.address, config.password.reveal()))
    return LineChannel(name, config)


class _Counted:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="lineproto-counted", config=DeclaredLineConfig,
                             factory=_counted, address=DECLARED_ADDRESS,
                             description="lineproto-declared, counting its instances"))


@pytest.fixture
def counted(lineproto_peer: tuple[int, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A two-node target on a real TCP peer whose channel type counts its instances."""
    port, password = lineproto_peer
    secret = tmp_path / "password"
    secret.write_text(password, encoding="utf-8")
    reg = registry()
    reg.add_module("conformance-counted", _Counted(), "tests", "0")
    BUILT.clear()
    try:
        yield {
            "channels": {"dev": {"type": "lineproto-counted", "address": f"127.0.0.1:{port}",
                                 "password": {"file": str(secret)}}},
            "nodes": {"n1": {"channels": [{"channel": "dev", "target": "m1"}]},
                      "n2": {"channels": [{"channel": "dev", "target": "m2"}]}},
            "conformance": {"allow_destructive": False},
        }
    finally:
        reg.remove("conformance-counted")
        BUILT.clear()


def _built(lineproto_peer: tuple[int, str]) -> tuple[int, int]:
    """(instances pointed elsewhere than the peer, instances given a wrong password)."""
    port, password = lineproto_peer
    elsewhere = sum(1 for address, _ in BUILT if address != f"127.0.0.1:{port}")
    wrong = sum(1 for address, given in BUILT
                if address == f"127.0.0.1:{port}" and given != password)
    return elsewhere, wrong


def test_the_derived_short_timeout_is_one_second() -> None:
    ctype = ChannelType(name="x", config=DeclaredLineConfig, factory=_counted,
                        address=DECLARED_ADDRESS)
    overrides, bound, _ = short_timeouts(ctype, NegativeHints())
    assert overrides == {"timeouts": {"connect_s": 1.0, "read_s": 1.0}}
    assert bound == 2.0


def test_network_negatives_probe_once_per_channel_and_secret_check_reuses_them(
    run: Run, counted: dict[str, Any], lineproto_peer: tuple[int, str]
) -> None:
    """Two nodes: one closed-port and one silent-server probe for the channel (not two
    each, and none again for SECRET_NOT_DISCLOSED), one wrong-secret channel per node
    (not two). The second node's closed-port and silent-server checks say whose probe
    it was; every check that probed passes."""
    summary = run(counted)
    assert summary.data["counts"]["fail"] == 0, summary.data["results"]
    assert _built(lineproto_peer) == (2, 2)  # before: (6, 4)
    by_node = {(r["id"], r["node"]): r for r in summary.data["results"]}
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT"):
        assert by_node[(ident, "n1")]["outcome"] == "pass"
        second = by_node[(ident, "n2")]
        assert second["outcome"] == "skip"
        assert f"made once per channel: made by {ident} on n1@dev" in second["message"]
    for ident in ("WRONG_CREDENTIALS_REJECTED", "SECRET_NOT_DISCLOSED"):
        assert outcome(summary, ident) == {"pass"}, messages(summary, ident)


def test_secret_check_alone_probes_what_did_not_run(
    run: Run, counted: dict[str, Any], lineproto_peer: tuple[int, str]
) -> None:
    """Under ``-k``: SECRET_NOT_DISCLOSED makes the wrong-secret probe of each node and
    the closed-port probe of the channel itself."""
    summary = run(counted, pytest_args=["-k", "secret_not_disclosed"])
    assert outcome(summary, "SECRET_NOT_DISCLOSED") == {"pass"}
    assert _built(lineproto_peer) == (1, 2)


def test_a_leaked_wrong_secret_is_caught_with_or_without_the_other_checks(run: Run) -> None:
    for args in ([], ["-k", "secret_not_disclosed"]):
        summary = run(sim_target(type_name="liar-leak", machines={"m1": "on"},
                                 conformance={"settle_timeout_s": 0.3}), pytest_args=args)
        assert outcome(summary, "SECRET_NOT_DISCLOSED") == {"fail"}, args
        assert "a wrong secret in the wrong-credentials error" in messages(
            summary, "SECRET_NOT_DISCLOSED")


STARTUP_S = 1.6
"""How long a ``slow-start`` channel takes to start each call (as a process would)."""


class SlowStart(LineChannel):
    """Starts each call for :data:`STARTUP_S` before it connects (as talosctl, a process
    per call), within its own bound of 1.5 x ``connect_s``: at the suite's short bound of
    1 s it times out before it reaches the port; with twice that it is refused."""

    async def _ask(self, target: str, command: str) -> str:
        bound = self.config.timeouts.connect_s * 1.5

        async def started() -> str:
            await asyncio.sleep(STARTUP_S)
            return await LineChannel._ask(self, target, command)

        try:
            return await asyncio.wait_for(started(), bound)
        except TimeoutError as exc:
            raise ChannelTimeout(f"did not finish within {bound:g} s (killed)",
                                 channel=self.name, target=target) from exc


class _SlowStart:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="slow-start", config=DeclaredLineConfig, factory=SlowStart,
                             address=DECLARED_ADDRESS, description="starts slowly"))


@pytest.mark.slow
def test_a_closed_port_probe_that_times_out_at_the_short_bound_is_probed_again(
    run: Run, counted: dict[str, Any]
) -> None:
    """A channel whose start-up eats the short bound is not failed for it: the closed
    port is probed again with twice the bound, and it is refused then (as the check
    asks); the result says both."""
    reg = registry()
    reg.add_module("conformance-slow-start", _SlowStart(), "tests", "0")
    try:
        counted["channels"]["dev"]["type"] = "slow-start"
        counted["nodes"].pop("n2")
        summary = run(counted, pytest_args=["-k", "closed_port_unreachable"])
    finally:
        reg.remove("conformance-slow-start")
    assert outcome(summary, "CLOSED_PORT_UNREACHABLE") == {"pass"}, messages(
        summary, "CLOSED_PORT_UNREACHABLE")
