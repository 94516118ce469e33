"""Ctrl-C and SIGTERM stop a command at once, and no process outlives its answer.

Each test runs ``powerplane`` in a subprocess against a real peer that makes a plugin's
worker thread block -- a TCP listener that never accepts (Redfish), a UDP port that never
answers (IPMI), pyghmi's BMC simulator asked for a user it does not know, a DMTF mockup
holding a reset's answer -- and checks that the process is gone within an explicit wait
after its signal or its answer (before, the interpreter joined the blocked thread at exit:
20 s, the plugin's own timeout, or never). The devices' timeouts are set far above those
waits, so only a process that does not wait for them passes.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

GONE_S = 5.0
"""How long a process may take to be gone after its signal (the promise is 1 s)."""
DEVICE_S = 120
"""The devices' own connect/read timeouts: far beyond every wait here."""
START_S = 60.0
"""How long the command may take to reach the blocked call (imports, config, discovery)."""

pytestmark = pytest.mark.slow


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def start(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def stopped(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    """Send ``sig``; the exit code and output once the process is gone (within GONE_S)."""
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=GONE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {GONE_S:g} s after {sig.name}; stderr: {err[-2000:]}")
    return proc.returncode, out, err


@pytest.fixture
def never_accepts() -> Iterator[socket.socket]:
    """A TCP listener that never calls accept(): the kernel completes the client's
    handshake, and the client's request is never read."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock
    finally:
        sock.close()


def wait_for_client(listener: socket.socket, proc: subprocess.Popen[str]) -> None:
    """Until a connection waits in ``listener``'s queue (the client is now blocked on it)."""
    ready, _, _ = select.select([listener], [], [], START_S)
    if not ready:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the command never connected; stderr: {err[-2000:]}")


def redfish_config(tmp_path: Path, port: int) -> Path:
    return write(tmp_path, {
        "channels": {"bmc": {
            "type": "redfish", "endpoint": f"http://127.0.0.1:{port}", "username": "admin",
            "password": {"env": "PP_SIGNAL_TEST_PASSWORD"}, "auth": "basic",
            "timeouts": {"connect_s": DEVICE_S, "read_s": DEVICE_S}}},
        "nodes": {"r1": {"site": "lab", "channels": [
            {"channel": "bmc", "target": "/redfish/v1/Systems/1"}]}},
        "recovery": {"attendedRack": True},
        "limits": {"timeout_s": 3 * DEVICE_S},
    })


SECRET = {"PP_SIGNAL_TEST_PASSWORD": "not-a-real-password"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_invoke_blocked_on_a_listener_that_never_accepts_stops_at_once(
    tmp_path: Path, never_accepts: socket.socket, sig: signal.Signals
) -> None:
    config = redfish_config(tmp_path, never_accepts.getsockname()[1])
    proc = start(config, "invoke", "r1", "reboot", "--yes", "--reason", "signal test", env=SECRET)
    wait_for_client(never_accepts, proc)
    code, out, err = stopped(proc, sig)
    assert code == 130, err
    assert "interrupted" in err.splitlines(), err
    assert "Traceback" not in err and out == ""


def test_state_blocked_on_a_listener_that_never_accepts_stops_at_once(
    tmp_path: Path, never_accepts: socket.socket
) -> None:
    config = redfish_config(tmp_path, never_accepts.getsockname()[1])
    proc = start(config, "state", "r1", env=SECRET)
    wait_for_client(never_accepts, proc)
    code, _, err = stopped(proc, signal.SIGINT)
    assert code == 130, err
    assert "interrupted" in err.splitlines() and "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_invoke_blocked_on_a_silent_ipmi_port_stops_at_once(
    tmp_path: Path, sig: signal.Signals
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.settimeout(START_S)
        config = write(tmp_path, {
            "channels": {"bmc": {"type": "ipmi", "username": "oper",
                                 "password": {"env": "PP_SIGNAL_TEST_PASSWORD"},
                                 "timeouts": {"connect_s": DEVICE_S, "read_s": DEVICE_S}}},
            "nodes": {"i1": {"site": "lab", "channels": [
                {"channel": "bmc", "target": f"127.0.0.1:{silent.getsockname()[1]}"}]}},
            "recovery": {"attendedRack": True},
            "limits": {"timeout_s": 3 * DEVICE_S},
        })
        proc = start(config, "invoke", "i1", "reboot", "--yes", "--reason", "signal test",
                     env=SECRET)
        try:
            silent.recvfrom(4096)  # the plugin asked; it now waits for an answer
        except TimeoutError:
            proc.kill()
            pytest.fail(f"the command never sent a datagram; stderr: {proc.communicate()[1]}")
        code, _, err = stopped(proc, sig)
    assert code == 130, err
    assert "interrupted" in err.splitlines() and "Traceback" not in err


@pytest.mark.parametrize("command", [["offers"], ["invoke", "i1", "reboot", "--yes",
                                                  "--reason", "wrong user test"]])
def test_no_process_outlives_its_answer_for_an_unknown_ipmi_user(
    tmp_path: Path, command: list[str]
) -> None:
    """pyghmi's Session() for a user the BMC does not know may never return: the host
    answers ChannelTimeout at limits.timeout_s, and the process then exits."""
    from powerplane_ipmi.testing import PyghmiBmc

    with PyghmiBmc(tmp_path / "bmc") as bmc:
        config = write(tmp_path, {
            "channels": {"bmc": {"type": "ipmi", "username": "nosuchuser",
                                 "password": {"file": str(bmc.secret_file("oper"))},
                                 "timeouts": {"connect_s": 2, "read_s": 3}}},
            "nodes": {"i1": {"site": "lab", "channels": [
                {"channel": "bmc", "target": bmc.address}]}},
            "recovery": {"attendedRack": True},
            "limits": {"timeout_s": 8},
        })
        proc = start(config, *command)
        try:
            _, err = proc.communicate(timeout=START_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the process outlived its answer; stderr: {err[-2000:]}")
    assert proc.returncode == 1, err
    assert "Traceback" not in err


@pytest.fixture
def held_reset(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A DMTF mockup BMC that holds every reset POST's answer for a long time."""
    from powerplane_redfish.testing.dmtf import mockups_dir
    from powerplane_redfish.testing.mockup import MockupServer

    server = MockupServer(mockups_dir() / "public-rackmount1").start()
    server.reset_delay_s = DEVICE_S / 2
    monkeypatch.setenv("PP_SIGNAL_TEST_PASSWORD", server.password)
    try:
        yield server
    finally:
        server.stop()


def held_reset_config(tmp_path: Path, server: Any, timeout_s: float) -> Path:
    return write(tmp_path, {
        "channels": {"bmc": {
            "type": "redfish", "endpoint": server.endpoint, "username": server.username,
            "password": {"env": "PP_SIGNAL_TEST_PASSWORD"}, "auth": "session",
            "timeouts": {"connect_s": 5, "read_s": DEVICE_S}}},
        "nodes": {"r1": {"site": "lab", "channels": [
            {"channel": "bmc", "target": server.systems[0]}]}},
        "recovery": {"attendedRack": True},
        "limits": {"timeout_s": timeout_s},
    })


def test_a_host_timeout_returns_while_the_bmc_still_holds_the_reset(
    tmp_path: Path, held_reset: Any
) -> None:
    """limits.timeout_s 1 against a reset held for a minute: outcome unknown, and the
    process is gone long before the BMC answers (it used to wait for the worker)."""
    config = held_reset_config(tmp_path, held_reset, 1)
    run = subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config),
         "invoke", "r1", "reboot", "--yes", "--reason", "held reset test"],
        capture_output=True, text=True, timeout=DEVICE_S / 4, check=False)
    assert run.returncode == 1, run.stderr
    assert "outcome unknown" in run.stderr and "Traceback" not in run.stderr
    target = held_reset.systems[0]
    assert held_reset.requests.count(("POST", target + "/Actions/ComputerSystem.Reset")) == 1


def test_an_interrupt_after_the_reset_left_says_it_may_have_been_sent(
    tmp_path: Path, held_reset: Any
) -> None:
    config = held_reset_config(tmp_path, held_reset, 3 * DEVICE_S)
    reset = ("POST", held_reset.systems[0] + "/Actions/ComputerSystem.Reset")
    proc = start(config, "invoke", "r1", "reboot", "--yes", "--reason", "interrupt test")
    deadline = time.monotonic() + START_S
    while reset not in held_reset.requests:  # the reset arrived; its answer is held
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"the reset never arrived; stderr: {proc.communicate()[1]}")
        time.sleep(0.05)
    code, _, err = stopped(proc, signal.SIGINT)
    assert code == 130, err
    lines = err.splitlines()
    assert "interrupted" in lines, err
    assert "  reboot r1 via bmc: may have been sent: its outcome is unknown" in lines, err
    assert held_reset.requests.count(reset) == 1


STUBBORN_PLUGIN = '''
"""A plugin of this test whose discovery waits on a thread of its own that never ends."""
import concurrent.futures
import threading

from pydantic import BaseModel

from powerplane import hookimpl
from powerplane.channel import ChannelType


class Config(BaseModel):
    pass


class Stubborn:
    def __init__(self, name, config):
        pass

    def capabilities(self, target):
        # a library's own executor, whose threads the interpreter joins at exit
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(threading.Event().wait).result()

    reboot = shutdown = power_on = read_power_state = capabilities

    def close(self):
        pass


@hookimpl
def register_channel_types(register):
    register(ChannelType("stubborn", Config, Stubborn))
'''


def test_an_interrupt_does_not_wait_for_a_thread_a_plugin_started_itself(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    info = site / "pp_stubborn_test-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "pp_stubborn_test.py").write_text(STUBBORN_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pp-stubborn-test\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[powerplane]\nstubborn = pp_stubborn_test\n")
    config = write(tmp_path, {
        "channels": {"c": {"type": "stubborn"}},
        "nodes": {"n": {"channels": [{"channel": "c", "target": "t"}]}},
        "limits": {"timeout_s": 3 * DEVICE_S},
    })
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    proc = start(config, "state", "n", env={"PYTHONPATH": path})
    # the command is in discovery once the plugin's module is loaded and its thread runs:
    # seen from outside as the process's thread count (the helper is its own thread)
    deadline = time.monotonic() + START_S
    status = Path(f"/proc/{proc.pid}/status")
    while time.monotonic() < deadline and proc.poll() is None:
        threads = next((int(line.split()[1]) for line in status.read_text().splitlines()
                        if line.startswith("Threads:")), 0)
        if threads >= 3:  # main, the worker in capabilities(), its helper
            break
        time.sleep(0.05)
    code, _, err = stopped(proc, signal.SIGINT)
    assert code == 130, err
    assert "interrupted" in err.splitlines() and "Traceback" not in err
