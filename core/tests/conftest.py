"""Fixtures for core's tests: deployments built from dicts, hosts on the simulated channel."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from powerplane import PowerHost, parse_config


def sim(machines: dict[str, str], **kw: Any) -> dict[str, Any]:
    """A simulated channel config."""
    return {"type": "simulated", "machines": machines, **kw}


@pytest.fixture
def host_for() -> Callable[[dict[str, Any]], Any]:
    """``async with host_for(cfg) as host``: a started host for a config dict."""

    def make(cfg: dict[str, Any]) -> PowerHost:
        return PowerHost(parse_config(cfg))

    return make


@pytest.fixture
async def lab_host() -> AsyncIterator[PowerHost]:
    cfg = {
        "channels": {
            "bmc": sim({"m1": "on", "m2": "off"}),
            "talos": sim({"t1": "on"}, verbs=["reboot", "shutdown"], readback="on-only"),
        },
        "nodes": {
            "n1": {"site": "plant-a", "channels": [{"channel": "bmc", "target": "m1"}]},
            "n2": {"site": "plant-a", "channels": [{"channel": "bmc", "target": "m2"}]},
            "t1": {"site": "plant-a", "channels": [{"channel": "talos", "target": "t1"}]},
        },
    }
    async with PowerHost(parse_config(cfg)) as host:
        yield host


class LoopTimers:
    """How many timers the running loop armed (``loop.call_at``) while counting."""

    def __init__(self) -> None:
        self.armed = 0


@pytest.fixture
async def loop_timers() -> AsyncIterator[LoopTimers]:
    """Count the running loop's ``call_at`` (every timer ``asyncio.sleep`` or
    ``asyncio.timeout`` arms goes through it) for the rest of the test."""
    import asyncio

    loop = asyncio.get_running_loop()
    timers = LoopTimers()
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kw: Any) -> Any:
        timers.armed += 1
        return call_at(when, callback, *args, **kw)

    loop.call_at = counting  # type: ignore[method-assign,assignment]
    try:
        yield timers
    finally:
        loop.call_at = call_at  # type: ignore[method-assign]
