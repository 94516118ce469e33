"""Fixtures for the lifecycle tests: a deployment of simulated machines, a fresh store."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import make_config

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.lifecycle import Lifecycle

LifecycleFactory = Callable[..., Any]


@pytest.fixture
async def open_lifecycle(tmp_path: Path) -> AsyncIterator[LifecycleFactory]:
    """``await open_lifecycle(**make_config kwargs, clock=...)`` -> a started Lifecycle."""
    opened: list[tuple[PowerHost, Lifecycle]] = []

    async def factory(clock: Callable[[], dt.datetime] | None = None, **kw: Any) -> Lifecycle:
        cfg = make_config(tmp_path, **kw)
        host = PowerHost(parse_config(cfg))
        await host.start()
        lc = Lifecycle.for_host(host, clock=clock) if clock else Lifecycle.for_host(host)
        opened.append((host, lc))
        return lc

    yield factory
    for host, lc in opened:
        lc.close()
        await host.close()
