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
