"""The CLI's exit codes, readings and messages say no more than was observed (issue: boundaries)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelTimeout,
    ChannelType,
    OutcomeUnknown,
    PowerHost,
    Reading,
    Source,
    Verb,
    about_to_send,
    hookimpl,
    parse_config,
)
from powerplane.cli import cli
from powerplane.plugins import Registry, load_plugins


def write(tmp_path: Path, cfg: dict[str, Any]) -> str:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def run(config: str, *args: str, input: str | None = None,
        env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner(env=env).invoke(cli, ["--config", config, *args], input=input)
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def sim(machines: dict[str, str], **kw: Any) -> dict[str, Any]:
    return {"type": "simulated", "machines": machines, "timeout_s": 0.05, **kw}


# -- state -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["unreachable", "auth", "timeout"])
def test_state_exits_1_naming_each_channel_when_every_channel_failed(
    tmp_path: Path, fault: str
) -> None:
    cfg = {
        "channels": {"bmc": sim({"m": "on"}, faults={"m": fault}),
                     "pdu": sim({"o": "on"}, faults={"o": "unreachable"}, graceful=False)},
        "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"},
                                     {"channel": "pdu", "target": "o"}]}},
    }
    code, out, err = run(write(tmp_path, cfg), "state", "n", "-o", "json")
    assert code == 1
    data = json.loads(out)
    assert data["state"] == "unknown"
    assert [r["channel"] for r in data["readings"]] == ["bmc", "pdu"]
    assert all("error" in r for r in data["readings"])
    assert "bmc" in err and "pdu" in err and "Unreachable" in err


def test_state_exits_0_for_a_blind_channels_declared_unknown(tmp_path: Path) -> None:
    cfg = {"channels": {"talos": sim({"t": "off"}, readback="on-only")},
           "nodes": {"n": {"channels": [{"channel": "talos", "target": "t"}]}}}
    code, out, _ = run(write(tmp_path, cfg), "state", "n", "-o", "json")
    assert code == 0  # a reading was taken: the channel says it cannot tell
    assert json.loads(out)["state"] == "unknown"


def test_state_shows_every_channel_and_flags_disagreement(tmp_path: Path) -> None:
    cfg = {"channels": {"bmc": sim({"m": "on"}), "pdu": sim({"o": "off"}, graceful=False)},
           "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"},
                                        {"channel": "pdu", "target": "o"}]}}}
    path = write(tmp_path, cfg)
    code, out, _ = run(path, "state", "n", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert (data["state"], data["channel"]) == ("on", "bmc")
    assert [(r["channel"], r["state"]) for r in data["readings"]] == [("bmc", "on"),
                                                                        ("pdu", "off")]
    assert data["disagreement"] is True
    code, out, _ = run(path, "state", "n")
    assert "disagree" in out and "pdu: off" in out and "bmc: on" in out


# -- offers and invoke when discovery failed ---------------------------------------------------
def test_undiscoverable_channel_is_a_channel_failure_not_a_refusal(tmp_path: Path) -> None:
    cfg = {"channels": {"bmc": sim({"m": "on"}, faults={"m": "auth"})},
           "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}}}
    path = write(tmp_path, cfg)
    code, _, err = run(path, "invoke", "n", "reboot", "--yes", "--reason", "kernel update")
    assert code == 1
    assert "could not be discovered" in err and "credentials rejected" in err
    code, out, _ = run(path, "offers", "n", "-o", "json")
    assert code == 1
    node = json.loads(out)["nodes"][0]
    # a channel failure is the cause for every verb alike, terminate too (exit 1, not 3)
    assert {v["cause"] for v in node["verbs"].values()} == {"channel"}
    assert node["verbs"]["reboot"]["cause"] == "channel"
    assert node["verbs"]["terminate"]["cause"] == "channel"
    code, _, err = run(path, "invoke", "n", "terminate", "--yes", "--reason", "kernel update")
    assert code == 1 and "AuthenticationFailed" in err
    # the discovery error is stated once, for the channel, not once per verb
    assert out.count("credentials rejected") == 1
    assert node["channels"] == [{"channel": "bmc", "discovered": False,
                                 "error": "AuthenticationFailed",
                                 "message": "channel 'bmc', target m: credentials rejected"}]


def test_withheld_by_the_rule_stays_exit_3(tmp_path: Path) -> None:
    cfg = {"channels": {"talos": sim({"t": "on"}, verbs=["reboot", "shutdown"])},
           "nodes": {"n": {"site": "a", "channels": [{"channel": "talos", "target": "t"}]}}}
    code, _, err = run(write(tmp_path, cfg), "invoke", "n", "shutdown", "--yes", "--reason", "x")
    assert code == 3 and "cannot power on" in err


# -- invoke --wait -----------------------------------------------------------------------------
def test_wait_that_does_not_reach_the_state_exits_1_with_the_last_reading(
    tmp_path: Path,
) -> None:
    cfg = {"channels": {"bmc": sim({"m": "on"}, faults={"m": "silent"})},
           "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}}}
    code, out, _ = run(write(tmp_path, cfg), "invoke", "n", "shutdown", "--yes",
                         "--reason", "x", "--wait", "0.5", "-o", "json")
    assert code == 1
    data = json.loads(out)
    assert (data["readback"], data["expected"], data["reached"]) == ("on", "off", False)


def test_wait_runs_to_its_deadline_not_one_poll_short(tmp_path: Path) -> None:
    # reads at about 0, 0.2, 0.6 and 1.4 s; the machine settles off at 2 s; the wait
    # ends at 2.5 s. A wait that stops when the next backoff step would overshoot
    # gives up at 1.4 s and never sees the machine off.
    cfg = {"channels": {"bmc": sim({"m": "on"}, transition_ms=2000)},
           "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}}}
    code, out, _ = run(write(tmp_path, cfg), "invoke", "n", "shutdown", "--yes",
                       "--reason", "x", "--wait", "2.5", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["readback"] == "off"


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "1e9"])
def test_wait_rejects_nan_negative_and_infinite(tmp_path: Path, value: str) -> None:
    cfg = {"channels": {"bmc": sim({"m": "on"})},
           "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}}}
    code, _, err = run(write(tmp_path, cfg), "invoke", "n", "power-on", "--reason", "x",
                       "--wait", value)
    assert code == 2 and "--wait" in err


# -- several nodes, selectors, dry run ----------------------------------------------------------
FLEET = {
    "channels": {"lab": sim({"a": "on", "b": "on", "c": "off"}),
                 "down": sim({"d": "on"}, faults={"d": "refused"})},
    "nodes": {
        "a": {"site": "s1", "labels": {"rack": "r1"}, "channels": [{"channel": "lab",
                                                                   "target": "a"}]},
        "b": {"site": "s1", "labels": {"rack": "r2"}, "channels": [{"channel": "lab",
                                                                   "target": "b"}]},
        "c": {"site": "s2", "labels": {"rack": "r1"}, "channels": [{"channel": "lab",
                                                                   "target": "c"}]},
        "d": {"site": "s2", "labels": {"rack": "r1"}, "channels": [{"channel": "down",
                                                                   "target": "d"}]},
    },
}


def test_state_of_a_selection_is_one_json_document(tmp_path: Path) -> None:
    code, out, _ = run(write(tmp_path, FLEET), "state", "--selector", "rack=r1", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert [(n["node"], n["state"]) for n in data["nodes"]] == [("a", "on"), ("c", "off"),
                                                                 ("d", "on")]


def test_invoke_many_by_site_reports_each_node_and_the_worst_exit_code(tmp_path: Path) -> None:
    # a shutdown d's device refuses while d reads on (a refused power-on of d, which is on,
    # would read back on: done, the device already there)
    code, out, _ = run(write(tmp_path, FLEET), "invoke", "--site", "s2", "shutdown",
                       "--reason", "rack work", "--yes", "-o", "json")
    assert code == 1  # d's device refused
    rows = {r["node"]: r for r in json.loads(out)["nodes"]}
    assert rows["c"]["accepted"] is True
    assert rows["d"]["error"] == "RefusedByDevice" and rows["d"]["exit_code"] == 1


def test_invoke_many_confirms_with_the_node_count(tmp_path: Path) -> None:
    path = write(tmp_path, FLEET)
    code, _, err = run(path, "invoke", "a", "b", "reboot", "--reason", "kernel", input="a\n")
    assert code == 2 and "nothing was sent" in err
    code, out, _ = run(path, "invoke", "a", "b", "reboot", "--reason", "kernel", input="2\n")
    assert code == 0 and out.count("accepted") == 2


def test_dry_run_prints_the_plan_and_sends_nothing(tmp_path: Path) -> None:
    cfg = dict(FLEET)
    state = tmp_path / "sim.json"
    cfg["channels"] = {"lab": sim({"a": "on", "b": "on", "c": "off"}, state_file=str(state)),
                       "down": FLEET["channels"]["down"]}
    path = write(tmp_path, cfg)
    code, out, _ = run(path, "invoke", "a", "b", "reboot", "--reason", "kernel", "--dry-run",
                       "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["dry_run"] is True
    assert [(r["node"], r["channel"], r["sent"]) for r in data["nodes"]] == [
        ("a", "lab", False), ("b", "lab", False)]
    assert all(r["guard"] for r in data["nodes"])
    assert not state.exists() or json.loads(state.read_text())["dispatches"] == []
    code, out, _ = run(path, "invoke", "a", "reboot", "--reason", "kernel", "--dry-run")
    assert code == 0 and "would send reboot" in out and "nothing sent" in out


def test_unknown_node_in_a_list_is_bad_input_before_anything_is_sent(tmp_path: Path) -> None:
    code, _, err = run(write(tmp_path, FLEET), "invoke", "a", "zz", "power-on", "--reason", "x")
    assert code == 2 and "zz" in err


# -- untrusted text is never markup --------------------------------------------------------------
@pytest.mark.parametrize("name", ["db[/x]", "web[bold]", "n[red]x[/red]"])
def test_names_with_brackets_print_as_written(tmp_path: Path, name: str) -> None:
    cfg = {"channels": {"lab[1]": sim({"m": "off"}, state_file=str(tmp_path / "s.json"))},
           "nodes": {name: {"channels": [{"channel": "lab[1]", "target": "m"}]}}}
    path = write(tmp_path, cfg)
    code, out, _ = run(path, "invoke", name, "power-on", "--reason", "rack work")
    assert code == 0, out
    assert f"power-on accepted for {name} via channel lab[1]" in out
    code, out, _ = run(path, "state", name)
    assert code == 0 and out.startswith(f"{name}: on via lab[1]")
    code, out, _ = run(path, "offers", name)
    assert code == 0 and name in out


def test_a_pipe_is_never_hard_wrapped(tmp_path: Path) -> None:
    long_name = "node-" + "x" * 150
    cfg = {"channels": {"lab": sim({"m": "on"})},
           "nodes": {long_name: {"channels": [{"channel": "lab", "target": "m"}]}}}
    code, out, _ = run(write(tmp_path, cfg), "state", long_name)
    assert code == 0
    assert out.splitlines()[0] == f"{long_name}: on via lab"


def test_no_color_removes_all_styling(monkeypatch: pytest.MonkeyPatch) -> None:
    from powerplane.cli._common import console

    monkeypatch.setenv("NO_COLOR", "1")
    out = console()
    with out.capture() as cap:
        out.print("[bold red]styled[/bold red]")
    assert cap.get() == "styled\n"
    assert out.color_system is None


# -- a timeout is not a failure once the request may have left ---------------------------------
class _SlowConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    before_send_s: float = 0.0
    after_send_s: float = 0.0


class _SlowChannel:
    """A plain-def channel (run in a worker thread) that is slow before or after sending."""

    sent: list[str] = []
    finished = threading.Event()

    def __init__(self, name: str, config: _SlowConfig) -> None:
        self.config = config

    def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON], source=Source.DECLARED)

    def reboot(self, target: str) -> Acceptance:
        try:
            time.sleep(self.config.before_send_s)
            about_to_send()
            _SlowChannel.sent.append(target)
            time.sleep(self.config.after_send_s)
            return Acceptance()
        finally:
            _SlowChannel.finished.set()

    power_on = reboot

    def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    def close(self) -> None:
        pass


def _slow_registry(gated: bool) -> Registry:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("slow", _SlowConfig, _SlowChannel, gated_sends=gated))

    reg = load_plugins()
    reg.add_module("slow-test", Plugin())
    return reg


def _slow_host(reg: Registry, **cfg: float) -> PowerHost:
    return PowerHost(parse_config({
        "channels": {"bmc": {"type": "slow", **cfg}},
        "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}},
        "limits": {"timeout_s": 0.1},
    }, registry=reg))


async def test_timeout_before_the_request_left_guarantees_it_never_leaves() -> None:
    _SlowChannel.sent = []
    _SlowChannel.finished.clear()
    async with _slow_host(_slow_registry(gated=True), before_send_s=0.4) as host:
        with pytest.raises(ChannelTimeout, match="nothing was sent"):
            await host.invoke("n", Verb.REBOOT, reason="kernel")
        # the worker thread wakes after the host gave up: the gate keeps the request home
        await asyncio.to_thread(_join_workers)
    assert _SlowChannel.sent == []


async def test_timeout_after_the_request_left_is_outcome_unknown() -> None:
    _SlowChannel.sent = []
    _SlowChannel.finished.clear()
    async with _slow_host(_slow_registry(gated=True), after_send_s=0.4) as host:
        with pytest.raises(OutcomeUnknown, match="may have been applied"):
            await host.invoke("n", Verb.REBOOT, reason="kernel")
        await asyncio.to_thread(_join_workers)
    assert _SlowChannel.sent == ["m"]  # sent exactly once, never retried


async def test_timeout_of_an_ungated_channel_type_is_outcome_unknown() -> None:
    _SlowChannel.sent = []
    _SlowChannel.finished.clear()
    async with _slow_host(_slow_registry(gated=False), before_send_s=0.4) as host:
        with pytest.raises(OutcomeUnknown):
            await host.invoke("n", Verb.REBOOT, reason="kernel")
        await asyncio.to_thread(_join_workers)


async def test_invoke_many_reports_outcome_unknown_per_node() -> None:
    cfg = {"channels": {"lab": {"type": "simulated", "machines": {"a": "on", "b": "on"},
                                "faults": {"a": "lost-answer"}, "timeout_s": 1.0}},
           "nodes": {"a": {"channels": [{"channel": "lab", "target": "a"}]},
                     "b": {"channels": [{"channel": "lab", "target": "b"}]}},
           "limits": {"timeout_s": 0.2}}
    async with PowerHost(parse_config(cfg)) as host:
        results = await host.invoke_many(["a", "b"], Verb.REBOOT, reason="kernel")
        assert isinstance(results["a"], OutcomeUnknown)
        assert not isinstance(results["b"], Exception) and results["b"].accepted
        assert host.channel("lab").dispatches == [  # type: ignore[attr-defined]
            ("reboot", "a"), ("reboot", "b")]


def test_cli_says_outcome_unknown_for_a_lost_answer(tmp_path: Path) -> None:
    cfg = {"channels": {"lab": sim({"m": "on"}, faults={"m": "lost-answer"}, timeout_s=1.0)},
           "nodes": {"n": {"channels": [{"channel": "lab", "target": "m"}]}},
           "limits": {"timeout_s": 0.2}}
    code, _, err = run(write(tmp_path, cfg), "invoke", "n", "reboot", "--yes",
                       "--reason", "kernel")
    assert code == 1
    assert "outcome unknown: the request was sent and may have been applied" in err


def _join_workers() -> None:
    """Wait until the plugin's worker thread has finished the call the host gave up on."""
    assert _SlowChannel.finished.wait(timeout=5)


# -- boot evidence (groundwork for at-most-once) -----------------------------------------------
async def test_simulated_boot_marker_changes_on_every_boot_and_only_then(tmp_path: Path) -> None:
    state = tmp_path / "sim.json"
    cfg = {"channels": {"lab": sim({"m": "on"}, state_file=str(state))},
           "nodes": {"n": {"channels": [{"channel": "lab", "target": "m"}]}}}
    async with PowerHost(parse_config(cfg)) as host:
        first = await host.boot_marker("n")
        assert first is not None and first[0] == "lab"
        await host.invoke("n", Verb.POWER_ON, reason="already on")  # no boot
        assert await host.boot_marker("n") == first
        await host.invoke("n", Verb.REBOOT, reason="kernel")
        second = await host.boot_marker("n")
        assert second is not None and second != first
        await host.invoke("n", Verb.SHUTDOWN, reason="psu")
        assert await host.boot_marker("n") == second  # off is not a boot
        await host.invoke("n", Verb.POWER_ON, reason="psu done")
        third = await host.boot_marker("n")
    async with PowerHost(parse_config(cfg)) as host:  # kept across processes
        assert await host.boot_marker("n") == third != second


async def test_no_boot_marker_when_the_channel_publishes_none() -> None:
    cfg = {"channels": {"lab": sim({"m": "on"}, boot_marker=False)},
           "nodes": {"n": {"channels": [{"channel": "lab", "target": "m"}]}}}
    async with PowerHost(parse_config(cfg)) as host:
        assert await host.boot_marker("n") is None


async def test_a_config_error_revealed_at_discovery_stays_a_config_error() -> None:
    from powerplane import ConfigError

    class Picky(_SlowChannel):
        def capabilities(self, target: str) -> CapabilitySet:
            raise ConfigError("channels.bmc.profile: no profile drives this device")

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("picky", _SlowConfig, Picky, gated_sends=True))

    reg = load_plugins()
    reg.add_module("picky-test", Plugin())
    deployment = parse_config({
        "channels": {"bmc": {"type": "picky"}},
        "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}},
    }, registry=reg)
    async with PowerHost(deployment) as host:
        assert host.offer_for("n")[Verb.REBOOT].cause == "channel"
        with pytest.raises(ConfigError, match="no profile drives"):
            await host.invoke("n", Verb.REBOOT, reason="kernel")
        err = host.discovery_error("n")
        assert err is not None and err.exit_code == 2
