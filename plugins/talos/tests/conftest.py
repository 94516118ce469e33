"""Fixtures for the Talos plugin's tests: the Talos mock as a subprocess, per algorithm.

Each mock is the plugin's loopback peer (:func:`powerplane_talos.peer.start_mock`: ``python
-m powerplane_talos.testing --port 0``, which binds a free loopback port and reports it in
``mock.json``) in a fresh temp dir, stopped by its own process handle. Tests address
distinct node names, so one mock per algorithm serves the whole session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from powerplane.testing import SilentServer
from powerplane.testing import closed_port as a_closed_port
from powerplane_talos import TalosChannel, TalosConfig
from powerplane_talos.peer import RunningMock, start_mock

_names = count()

MockPeer = RunningMock
"""A running Talos mock (the name the tests use)."""


@pytest.fixture(scope="session", params=["ed25519", "ecdsa"])
def mock(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[MockPeer]:
    """A Talos mock with Ed25519 certificates, then one with ECDSA (P-256)."""
    peer = start_mock(tmp_path_factory.mktemp(f"talos-{request.param}"), request.param)
    yield peer
    peer.stop()


@pytest.fixture(scope="session")
def ed_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockPeer]:
    """One Ed25519 mock (Talos's default), for tests that need only one."""
    peer = start_mock(tmp_path_factory.mktemp("talos-ed"), "ed25519")
    yield peer
    peer.stop()


@pytest.fixture
def node() -> str:
    """A node name no other test uses (the mock creates it powered on)."""
    return f"10.0.{os.getpid() % 200}.{next(_names)}"


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    with SilentServer() as server:
        yield server.port


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    return a_closed_port()


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that runs the talosctl stand-in (a test tool) with this interpreter."""
    path = tmp_path_factory.mktemp("bin") / "talosctl"
    path.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m powerplane_talos.testing.talosctl "$@"\n'
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def channel_for() -> Iterator[Any]:
    """``channel_for(mock, **config)`` -> a TalosChannel on the mock's talosconfig; closed after."""
    made: list[TalosChannel] = []

    def make(peer: MockPeer, **config: Any) -> TalosChannel:
        config.setdefault("talosconfig", str(peer.talosconfig))
        config.setdefault("timeouts", {"connect_s": 5, "read_s": 5})
        ch = TalosChannel("talos", TalosConfig(**config))
        made.append(ch)
        return ch

    yield make
