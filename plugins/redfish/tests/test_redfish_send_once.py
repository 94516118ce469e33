"""Reads survive a BMC that closes kept-alive connections; a reset leaves at most once.

Against the DMTF mockup server on loopback, with knobs that make it behave like the BMCs
seen in the field: it keeps connections alive although sushy asks for ``Connection: close``
and closes them (FIN or RST) when the next request arrives, it holds a reset's answer, it
holds the readbacks after a reset. Each test counts at the server what was sent.

- a GET on a connection the BMC closed is retried once on a fresh connection; a POST never;
- a reset written and then not answered (read timeout, connection closed) is
  ``OutcomeUnknown``, through the channel and through ``powerplane invoke`` (exit 1);
- once the host has given up on a call (its ``SendGate`` closed), no reset leaves, not even
  the ``ForceOff`` of ``graceful-then-force``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from powerplane import (
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    PowerState,
    Unreachable,
    parse_config,
)
from powerplane.channel import SendGate  # the host's per-call gate, as it sets it
from powerplane_redfish import RedfishChannel
from powerplane_redfish.testing.mockup import MockupServer

CfgFn = Callable[..., dict[str, Any]]
MockupFn = Callable[..., MockupServer]

RESET = "/Actions/ComputerSystem.Reset"
SESSIONS = "/redfish/v1/SessionService/Sessions"
CLI_BOUND = 60.0  # an explicit bound on each CLI run


def _read(seconds: float) -> dict[str, float]:
    """``timeouts`` with ``read_s`` set (``connect_s`` 5)."""
    return {"connect_s": 5, "read_s": seconds}


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    dep = parse_config({"channels": {"bmc": cfg}})
    configured = dep.channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


def posts(server: MockupServer, path: str) -> int:
    """How many POSTs of ``path`` the server received (answered or not)."""
    return server.requests.count(("POST", path))


# -- keep-alive ---------------------------------------------------------------------------------
@pytest.mark.parametrize("drop_with", ["close", "reset"])
async def test_reads_survive_a_bmc_that_closes_kept_alive_connections(
    drop_with: str, mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    # Every connection answers one request; the next request on it is read and the
    # connection closed unanswered (RemoteDisconnected, or ConnectionResetError with an RST).
    server = mockup("public-rackmount1", keep_alive=1, drop_with=drop_with)
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        for round_ in range(3):
            for _ in range(10):
                reading = await asyncio.to_thread(ch.read_power_state, target)
                assert reading.state is PowerState.ON
            await asyncio.to_thread(ch.reboot, target)
            assert posts(server, target + RESET) == round_ + 1
    finally:
        ch.close()
    assert server.dropped > 0  # the BMC did close kept-alive connections under the reads
    assert [r for _, r in server.reset_log()] == ["GracefulRestart"] * 3
    # no POST was ever sent twice: one reset POST per reboot, one login POST per session
    assert posts(server, target + RESET) == 3
    assert posts(server, SESSIONS) == server.sessions_created == 1
    assert server.sessions_deleted == 1


async def test_a_read_dropped_twice_fails_and_is_tried_only_twice(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        await asyncio.to_thread(ch.read_power_state, target)
        before = server.requests.count(("GET", target))
        server.drop_next(2)
        with pytest.raises(Unreachable, match="closed the connection without answering"):
            await asyncio.to_thread(ch.read_power_state, target)
        assert server.requests.count(("GET", target)) == before + 2
    finally:
        ch.close()


async def test_a_reset_on_a_keep_alive_bmc_goes_out_on_a_fresh_connection(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    # The reads leave a kept-alive connection in the pool; the reset must not reuse it
    # (it would be dropped: an outcome unknown for no reason).
    server = mockup("public-rackmount1", keep_alive=1)
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server, shutdown="force"))
    try:
        await asyncio.to_thread(ch.read_power_state, target)
        await asyncio.to_thread(ch.shutdown, target)
        reading = await asyncio.to_thread(ch.read_power_state, target)
    finally:
        ch.close()
    assert reading.state is PowerState.OFF
    assert posts(server, target + RESET) == 1
    assert server.reset_log() == [(target, "ForceOff")]


# -- a reset written and not answered ----------------------------------------------------------
async def test_a_reset_whose_answer_times_out_is_outcome_unknown_and_sent_once(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server, timeouts=_read(0.3)))
    try:
        await asyncio.to_thread(ch.capabilities, target)
        server.reset_delay_s = 1.5
        with pytest.raises(OutcomeUnknown) as err:
            await asyncio.to_thread(ch.reboot, target)
    finally:
        ch.close()
    text = str(err.value)
    assert "may have been applied" in text and "ResetType=GracefulRestart" in text
    assert not isinstance(err.value, ChannelTimeout)
    assert posts(server, target + RESET) == 1


async def test_a_reset_that_never_connected_is_not_outcome_unknown(
    mockup_cfg: CfgFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    from powerplane.testing import closed_port

    monkeypatch.setenv("PP_TEST_PASSWORD", "x")
    ch = channel_for({
        "type": "redfish", "endpoint": f"http://127.0.0.1:{closed_port()}",
        "username": "admin", "password": {"env": "PP_TEST_PASSWORD"},
        "reset_types": ["On", "ForceOff"], "shutdown": "force",
    })
    # discovery of a declared set still reads the system: refused before any reset left
    with pytest.raises(Unreachable, match="connection refused"):
        await asyncio.to_thread(ch.shutdown, "/redfish/v1/Systems/1")
    ch.close()


@pytest.mark.slow
async def test_graceful_then_force_whose_poll_times_out_is_outcome_unknown_without_force_off(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server, shutdown="graceful-then-force", shutdown_wait_s=0.5,
                                poll_interval_s=0.1, timeouts=_read(0.3)))
    try:
        await asyncio.to_thread(ch.capabilities, target)
        server.read_delay_after_reset_s = 1.0  # the readback after the reset never answers
        with pytest.raises(OutcomeUnknown) as err:
            await asyncio.to_thread(ch.shutdown, target)
    finally:
        ch.close()
    assert "GracefulShutdown was accepted" in str(err.value)
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown"]


# -- the host's gate -------------------------------------------------------------------------
def run_gated(fn: Callable[[], Any], gate: SendGate) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` in a thread whose context carries ``gate``, as the host runs a call."""
    with gate:  # the host's worker threads run in a copy of the call's context
        ctx = contextvars.copy_context()
    out: list[Any] = []

    def body() -> None:
        try:
            out.append(ctx.run(fn))
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def test_a_closed_gate_sends_no_reset(mockup: MockupFn, mockup_cfg: CfgFn) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        ch.capabilities(target)
        gate = SendGate()
        gate.close()  # the host gave up before the call got to send
        thread, out = run_gated(lambda: ch.reboot(target), gate)
        thread.join(10)
        assert isinstance(out[0], ChannelTimeout) and "not sent" in str(out[0])
    finally:
        ch.close()
    assert posts(server, target + RESET) == 0


def test_an_open_gate_is_passed_by_the_reset(mockup: MockupFn, mockup_cfg: CfgFn) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    gate = SendGate()
    try:
        thread, out = run_gated(lambda: ch.reboot(target), gate)
        thread.join(10)
    finally:
        ch.close()
    assert not isinstance(out[0], BaseException)
    assert gate.sent  # the host can tell the request left
    assert posts(server, target + RESET) == 1


@pytest.mark.slow
def test_graceful_then_force_sends_no_force_off_once_the_host_gave_up(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    wait = 1.0
    ch = channel_for(mockup_cfg(server, shutdown="graceful-then-force", shutdown_wait_s=wait,
                                poll_interval_s=0.1))
    gate = SendGate()
    try:
        ch.capabilities(target)
        thread, out = run_gated(lambda: ch.shutdown(target), gate)
        deadline = time.monotonic() + 10
        while not server.reset_log() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.reset_log() == [(target, "GracefulShutdown")]
        assert gate.close()  # the host gives up while the channel waits for Off
        thread.join(wait + 10)
        assert not thread.is_alive()
    finally:
        ch.close()
    assert isinstance(out[0], OutcomeUnknown)
    assert "not sent" in str(out[0])
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown"]
    assert posts(server, target + RESET) == 1


def test_nothing_is_sent_after_close(mockup: MockupFn, mockup_cfg: CfgFn) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    ch.capabilities(target)
    ch.close()
    before = list(server.requests)
    with pytest.raises(ChannelError, match="channel was closed; nothing was sent"):
        ch.reboot(target)
    assert server.requests == before
    assert server.sessions_created == server.sessions_deleted == 1


# -- through the CLI ---------------------------------------------------------------------------
def write_config(tmp_path: Path, channel: dict[str, Any], target: str,
                 timeout_s: float) -> Path:
    cfg = {
        "channels": {"bmc": channel},
        "nodes": {"n1": {"site": "lab", "channels": [{"channel": "bmc", "target": target}]}},
        "recovery": {"attendedRack": True},
        "limits": {"timeout_s": timeout_s},
    }
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), *args],
        capture_output=True, text=True, timeout=CLI_BOUND, check=False,
    )


def assert_outcome_unknown(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "outcome unknown" in run.stderr and "may have been applied" in run.stderr


@pytest.mark.slow
def test_invoke_of_a_reset_answered_after_the_read_timeout_is_outcome_unknown(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.reset_delay_s = 2.0
    config = write_config(tmp_path, mockup_cfg(server, timeouts=_read(0.5)), target, 30)
    run = cli(config, "invoke", "n1", "reboot", "--yes", "--reason", "read timeout test")
    assert_outcome_unknown(run)
    assert posts(server, target + RESET) == 1


@pytest.mark.slow
def test_invoke_graceful_then_force_whose_reset_is_held_sends_no_force_off(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    server.reset_delay_s = 2.0
    wait = 1.0
    channel = mockup_cfg(server, timeouts=_read(0.5), shutdown="graceful-then-force",
                         shutdown_wait_s=wait, poll_interval_s=0.1)
    config = write_config(tmp_path, channel, target, 30)
    run = cli(config, "invoke", "n1", "shutdown", "--yes", "--reason", "held reset test")
    assert_outcome_unknown(run)
    time.sleep(server.reset_delay_s + wait + 1)  # past the wait, had the channel gone on
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown"]
    assert posts(server, target + RESET) == 1


@pytest.mark.slow
def test_invoke_whose_reset_outlasts_limits_timeout_is_outcome_unknown(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    """Needs the host to run the call under a SendGate (limits.timeout_s after the send)."""
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.reset_delay_s = 3.0  # longer than limits.timeout_s, shorter than timeouts.read_s
    config = write_config(tmp_path, mockup_cfg(server, timeouts=_read(10)), target, 1)
    run = cli(config, "invoke", "n1", "reboot", "--yes", "--reason", "host timeout test")
    assert_outcome_unknown(run)
    assert posts(server, target + RESET) == 1
    assert server.reset_log() == [(target, "GracefulRestart")]


@pytest.mark.slow
def test_invoke_graceful_then_force_sends_no_force_off_after_limits_timeout(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    """Needs the host to run the call under a SendGate and close it at limits.timeout_s.

    The config passes check_limits (1 + 0.2 + 3 + 1 = 5.2 s); the BMC holds the reset and
    the readback after it just under timeouts.read_s, so the ForceOff would be due after
    5.8 s, past limits.timeout_s: the host gives up first, and no ForceOff may follow.
    """
    server = mockup("public-rackmount1", ignore_graceful=True)
    target = server.systems[0]
    wait = 1.0
    channel = mockup_cfg(server, timeouts={"connect_s": 0.2, "read_s": 3},
                         shutdown="graceful-then-force", shutdown_wait_s=wait,
                         poll_interval_s=0.2)
    config = write_config(tmp_path, channel, target, 5.2)
    server.reset_delay_s = 2.9
    server.read_delay_after_reset_s = 2.9
    run = cli(config, "invoke", "n1", "shutdown", "--yes", "--reason", "host gave up test")
    assert_outcome_unknown(run)
    time.sleep(2 * 2.9 + wait + 1)  # past the wait and the held requests
    assert [r for _, r in server.reset_log()] == ["GracefulShutdown"]
    assert posts(server, target + RESET) == 1


# -- withheld verbs: the channel's reason and the fix -----------------------------------------
def offers_json(config: Path) -> dict[str, Any]:
    run = cli(config, "offers", "-o", "json")
    assert run.returncode == 0, run.stderr
    verbs = json.loads(run.stdout)["nodes"][0]["verbs"]
    assert isinstance(verbs, dict)
    return verbs


def test_offers_say_why_reboot_is_withheld_and_how_to_fix_it(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    server = mockup("public-rackmount1", reset_types=[
        "On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "PowerCycle"])
    config = write_config(tmp_path, mockup_cfg(server, reboot="graceful"),
                          server.systems[0], 30)
    reboot = offers_json(config)["reboot"]
    assert not reboot["offered"]
    assert ("channel 'bmc' does not advertise reboot: GracefulRestart is not allowed by this "
            "BMC; it allows ForceRestart, PowerCycle: set reboot: force") in reboot["reason"]


def test_offers_say_why_shutdown_is_withheld_and_how_to_fix_it(
    mockup: MockupFn, mockup_cfg: CfgFn, tmp_path: Path
) -> None:
    server = mockup("public-rackmount1", reset_types=["On", "ForceOff"])
    config = write_config(tmp_path, mockup_cfg(server, shutdown="graceful"),
                          server.systems[0], 30)
    verbs = offers_json(config)
    assert not verbs["shutdown"]["offered"]
    assert ("channel 'bmc' does not advertise shutdown: GracefulShutdown is not allowed by "
            "this BMC; it allows ForceOff: set shutdown: force") in verbs["shutdown"]["reason"]
    assert verbs["power-on"]["offered"]
    # the fix works: with shutdown: force the same BMC offers a (hard) shutdown
    config = write_config(tmp_path, mockup_cfg(server, shutdown="force"),
                          server.systems[0], 30)
    shutdown = offers_json(config)["shutdown"]
    assert shutdown["offered"] and shutdown["graceful"] is False
