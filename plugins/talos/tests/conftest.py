"""Fixtures for the Talos plugin's tests: the Talos mock as a subprocess, per algorithm.

Each mock runs ``python -m powerplane_talos.mock --port 0`` (it binds a free loopback
port and reports it in ``mock.json``) in a fresh temp dir, and is stopped by its own
process handle. Tests address distinct node names, so one mock per algorithm serves
the whole session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from powerplane_talos import TalosChannel, TalosConfig
from powerplane_talos.mock import MockControl

_names = count()


@dataclass
class MockPeer:
    """A running Talos mock."""

    algorithm: str
    port: int
    control: MockControl
    talosconfig: Path
    certs: Path
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_mock(directory: Path, algorithm: str, reboot_seconds: float = 0.3) -> MockPeer:
    """Start a mock in ``directory``; wait until it reports its ports."""
    directory.mkdir(parents=True, exist_ok=True)
    log = (directory / "mock.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerplane_talos.mock", "--port", "0", "--certs",
         str(directory), "--algorithm", algorithm, "--reboot-seconds", str(reboot_seconds)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    ready = directory / "mock.json"
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"mock exited {proc.returncode}: "
                               f"{(directory / 'mock.log').read_text()}")
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("mock did not start within 60 s")
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    return MockPeer(algorithm, info["port"], MockControl(info["control_port"]),
                    Path(info["talosconfig"]), directory, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill after a timeout."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="session", params=["ed25519", "ecdsa"])
def mock(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[MockPeer]:
    """A Talos mock with Ed25519 certificates, then one with ECDSA (P-256)."""
    peer = start_mock(tmp_path_factory.mktemp(f"talos-{request.param}"), request.param)
    yield peer
    stop(peer.proc)


@pytest.fixture(scope="session")
def ed_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockPeer]:
    """One Ed25519 mock (Talos's default), for tests that need only one."""
    peer = start_mock(tmp_path_factory.mktemp("talos-ed"), "ed25519")
    yield peer
    stop(peer.proc)


@pytest.fixture
def node() -> str:
    """A node name no other test uses (the mock creates it powered on)."""
    return f"10.0.{os.getpid() % 200}.{next(_names)}"


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that runs the talosctl stand-in (a test tool) with this interpreter."""
    path = tmp_path_factory.mktemp("bin") / "talosctl"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m powerplane_talos.mock.talosctl "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def channel_for() -> Iterator[Any]:
    """``channel_for(mock, **config)`` -> a TalosChannel on the mock's talosconfig; closed after."""
    made: list[TalosChannel] = []

    def make(peer: MockPeer, **config: Any) -> TalosChannel:
        config.setdefault("talosconfig", str(peer.talosconfig))
        config.setdefault("timeout_s", 10)
        ch = TalosChannel("talos", TalosConfig(**config))
        made.append(ch)
        return ch

    yield make
