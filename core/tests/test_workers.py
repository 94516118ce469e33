"""Worker threads for plain-def channel methods: daemon, bounded, and the gate kept.

- a process whose host gave up on a call that never returns exits (no join at exit);
- the pool never holds more than ``max_workers + max_abandoned`` threads, however many
  calls a long-running process abandons; once full, calls wait and end as a timeout with
  nothing sent;
- a call cancelled (Ctrl-C) is recorded with what its send gate knew: not sent, or may
  have been sent; after the host gave up, nothing leaves.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelTimeout,
    PowerHost,
    Reading,
    Source,
    Verb,
    about_to_send,
    hookimpl,
    parse_config,
)
from powerplane import workers as workers_mod
from powerplane.channel import ChannelType, cut_calls
from powerplane.plugins import Registry, load_plugins
from powerplane.workers import WorkerPool

WAIT_S = 10.0
"""An explicit bound on every wait of these tests."""


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    send_first: bool = False


class _Stuck:
    """A plain-def channel whose reboot blocks until released (before or after sending)."""

    release = threading.Event()
    entered = threading.Semaphore(0)
    sent: list[str] = []

    def __init__(self, name: str, config: _Config) -> None:
        self.config = config

    def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON], source=Source.DECLARED)

    def reboot(self, target: str) -> Acceptance:
        if self.config.send_first:
            about_to_send()
            _Stuck.sent.append(target)
        _Stuck.entered.release()
        _Stuck.release.wait(WAIT_S * 6)
        if not self.config.send_first:
            about_to_send()  # raises once the host gave up: nothing leaves
            _Stuck.sent.append(target)
        return Acceptance()

    power_on = reboot

    def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    def close(self) -> None:
        pass


def _registry() -> Registry:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("stuck", _Config, _Stuck, gated_sends=True))

    reg = load_plugins()
    reg.add_module("stuck-test", Plugin())
    return reg


def _host(reg: Registry, timeout_s: float = 0.05, **cfg: Any) -> PowerHost:
    return PowerHost(parse_config({
        "channels": {"bmc": {"type": "stuck", **cfg}},
        "nodes": {"n": {"channels": [{"channel": "bmc", "target": "m"}]}},
        "recovery": {"attendedRack": True},
        "limits": {"timeout_s": timeout_s},
    }, registry=reg))


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerPool]:
    """The process's pool replaced by one of 2 workers and 3 abandoned threads; every
    stuck call released afterwards."""
    pool = WorkerPool(max_workers=2, max_abandoned=3, name="test-worker")
    monkeypatch.setattr(workers_mod, "_POOL", pool)
    _Stuck.release.clear()
    _Stuck.sent = []
    _Stuck.entered = threading.Semaphore(0)
    try:
        yield pool
    finally:
        _Stuck.release.set()
        pool.shutdown(wait=True)


def test_a_process_whose_call_never_returns_exits_after_its_answer() -> None:
    """The host gives up at limits.timeout_s on a plain-def call that never returns; the
    script prints its answer and the process exits (a ThreadPoolExecutor worker was joined
    at exit: never)."""
    script = textwrap.dedent("""
        import asyncio, threading
        from pydantic import BaseModel
        from powerplane import (CapabilitySet, ChannelTimeout, PowerHost, Reading, Source,
                                Verb, hookimpl, parse_config)
        from powerplane.channel import ChannelType
        from powerplane.plugins import load_plugins

        class Config(BaseModel):
            pass

        class Never:
            def __init__(self, name, config):
                pass
            def capabilities(self, target):
                return CapabilitySet.of(hard=[Verb.REBOOT], source=Source.DECLARED)
            def reboot(self, target):
                threading.Event().wait()  # a library call that never returns
            power_on = shutdown = reboot
            def read_power_state(self, target):
                threading.Event().wait()
            def close(self):
                threading.Event().wait()

        class Plugin:
            @hookimpl
            def register_channel_types(self, register):
                register(ChannelType("never", Config, Never, gated_sends=True))

        reg = load_plugins()
        reg.add_module("never-test", Plugin())

        async def main():
            dep = parse_config({"channels": {"c": {"type": "never"}},
                                "nodes": {"n": {"channels": [{"channel": "c", "target": "t"}]}},
                                "recovery": {"attendedRack": True},
                                "limits": {"timeout_s": 0.2}}, registry=reg)
            async with PowerHost(dep) as host:
                try:
                    await host.invoke("n", Verb.REBOOT, reason="never returns")
                except ChannelTimeout as exc:
                    print("answer:", type(exc).__name__, flush=True)

        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=WAIT_S * 3)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the process outlived its answer: {out!r} {err[-2000:]}")
    assert proc.returncode == 0, err
    assert out == "answer: ChannelTimeout\n"


def test_the_pool_is_bounded_however_many_calls_are_abandoned() -> None:
    pool = WorkerPool(max_workers=2, max_abandoned=3)
    release = threading.Event()
    entered = threading.Semaphore(0)

    def stuck() -> None:
        entered.release()
        release.wait(WAIT_S * 6)

    def running() -> Any:
        future = pool.submit(stuck)
        assert entered.acquire(timeout=WAIT_S)  # it runs in a thread now
        return future

    try:
        first = [running() for _ in range(2)]
        queued = pool.submit(lambda: "ran")
        assert pool.threads == 2  # two calls run at once; the third waits
        for future in first:
            pool.abandon(future)  # their callers gave up: the threads stay, set apart
        assert queued.result(timeout=WAIT_S) == "ran"
        # a long-running process abandoning call after call: at most 2 + 3 threads
        for _ in range(3):
            pool.abandon(running())
        assert pool.threads == 5 and pool.abandoned == 5
        waiting = [pool.submit(stuck) for _ in range(20)]
        assert pool.threads == 5  # every thread is held: these wait for one
        for future in waiting:
            pool.abandon(future)  # given up before it started: it never runs
        assert all(f.cancelled() for f in waiting) and pool.threads == 5
        late = pool.submit(lambda: "late")
        assert not late.done()
        release.set()
        assert late.result(timeout=WAIT_S) == "late"
    finally:
        release.set()
        pool.shutdown(wait=True)
    assert pool.abandoned == 0 and pool.threads == 0


def test_pool_threads_are_daemon_threads() -> None:
    pool = WorkerPool(max_workers=1, max_abandoned=0, name="daemon-check")
    try:
        name = pool.submit(lambda: threading.current_thread()).result(timeout=WAIT_S)
        assert name.daemon
    finally:
        pool.shutdown(wait=True)


async def test_a_runner_retrying_a_call_that_never_returns_holds_a_bounded_number_of_threads(
    small_pool: WorkerPool,
) -> None:
    reg = _registry()
    outcomes: list[str] = []
    for _ in range(12):  # one host per attempt, as a runner's pass may open
        async with _host(reg) as host:
            with pytest.raises(ChannelTimeout) as err:
                await host.invoke("n", Verb.REBOOT, reason="retry")
            outcomes.append(str(err.value))
        assert small_pool.threads <= 2 + 3
    assert small_pool.abandoned == 5
    # the first attempts each left a thread inside the call; once every thread is held,
    # the later ones wait for a thread (discovery included) and time out all the same
    assert sum("nothing was sent" in o for o in outcomes) >= 5, outcomes
    _Stuck.release.set()
    for _ in range(5):
        assert _Stuck.entered.acquire(timeout=WAIT_S)
    await asyncio.to_thread(small_pool.shutdown, True)
    assert _Stuck.sent == []  # the host had given up on every one: the gate held


@pytest.mark.parametrize("send_first", [False, True], ids=["before-send", "after-send"])
async def test_a_cancelled_verb_says_whether_it_may_have_left(
    small_pool: WorkerPool, send_first: bool
) -> None:
    reg = _registry()
    with cut_calls() as cut:
        async with _host(reg, timeout_s=60, send_first=send_first) as host:
            task = asyncio.create_task(host.invoke("n", Verb.REBOOT, reason="interrupt"))
            assert await asyncio.to_thread(_Stuck.entered.acquire, True, WAIT_S)
            task.cancel()  # what Ctrl-C does to the command's task
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, WAIT_S)
    assert [(c.channel, c.method, c.nodes, c.sent) for c in cut] == [
        ("bmc", "reboot", ("n",), send_first)]
    assert cut[0].words() == ("reboot n via bmc: may have been sent: its outcome is unknown"
                              if send_first else "reboot n via bmc: not sent (it never will be)")
    _Stuck.release.set()
    await asyncio.to_thread(small_pool.shutdown, True)
    assert _Stuck.sent == (["m"] if send_first else [])  # cancelled first: never sent


async def test_a_cancelled_fleet_call_names_its_node(small_pool: WorkerPool) -> None:
    reg = _registry()
    with cut_calls() as cut:
        async with _host(reg, timeout_s=60, send_first=True) as host:
            task = asyncio.create_task(host.invoke_many(["n"], Verb.REBOOT, reason="fleet"))
            assert await asyncio.to_thread(_Stuck.entered.acquire, True, WAIT_S)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, WAIT_S)
    assert [(c.method, c.nodes, c.sent) for c in cut] == [("reboot", ("n",), True)]
    _Stuck.release.set()
    await asyncio.to_thread(small_pool.shutdown, True)
    assert _Stuck.sent == ["m"]  # sent once, before the cancel; never again
