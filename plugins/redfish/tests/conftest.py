"""Peers for the redfish plugin's tests: the sushy-tools emulator and a DMTF mockup server.

- ``emulator``: one sushy-tools emulator per session (fake driver, TLS from a CA generated
  here, bcrypt-4 htpasswd, power changes applied at the next GET), with several systems;
  ``emu_system`` hands each test a system of its own.
- ``mockup``: a factory of mockup servers over the DMTF mockups this distribution ships
  (``powerplane_redfish.testing.dmtf.mockups_dir()``).
- ``host_for``: a started :class:`powerplane.PowerHost` for a config dict, through the
  ``redfish`` entry point like any deployment.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from powerplane import PowerHost, parse_config
from powerplane_redfish.testing.dmtf import mockups_dir
from powerplane_redfish.testing.emulator import SushyEmulator
from powerplane_redfish.testing.mockup import MockupServer

MOCKUPS = mockups_dir()
EMU_PASSWORD_ENV = "PP_TEST_EMU_PASSWORD"
MOCKUP_PASSWORD_ENV = "PP_TEST_MOCKUP_PASSWORD"
EMULATED_SYSTEMS = 32


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SushyEmulator]:
    """A zero-delay sushy-tools emulator over TLS with basic auth, for the whole session."""
    emu = SushyEmulator(tmp_path_factory.mktemp("emulator"), systems=EMULATED_SYSTEMS)
    with emu:
        yield emu


_next_system = itertools.count()


@pytest.fixture
def emu_system(emulator: SushyEmulator) -> str:
    """A system path of the session emulator that no other test uses."""
    index = next(_next_system)
    if index >= EMULATED_SYSTEMS:
        pytest.fail("more emulator tests than emulated systems: raise EMULATED_SYSTEMS")
    return emulator.system_paths[index]


@pytest.fixture
def emu_env(emulator: SushyEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator's password in the environment variable its configs reference."""
    monkeypatch.setenv(EMU_PASSWORD_ENV, emulator.password)


@pytest.fixture
def emu_cfg(emulator: SushyEmulator, emu_env: None) -> Callable[..., dict[str, Any]]:
    """``emu_cfg(**overrides)``: a redfish channel config for the emulator (TLS verified)."""
    return lambda **kw: _emu_channel(emulator, **kw)


def _emu_channel(emulator: SushyEmulator, **kw: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "type": "redfish",
        "endpoint": emulator.endpoint,
        "username": emulator.username,
        "password": {"env": EMU_PASSWORD_ENV},
        "verify": str(emulator.tls.ca),
        "auth": "basic",
        "timeouts": {"connect_s": 5, "read_s": 10},
    }
    cfg.update(kw)
    return cfg


@pytest.fixture
def one_node() -> Callable[..., dict[str, Any]]:
    """``one_node(channel_cfg, target, **node_keys)``: channel ``bmc``, node ``n1``."""
    return _one_node


def _one_node(channel: dict[str, Any], target: str | None, **node: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"channel": "bmc"}
    if target is not None:
        ref["target"] = target
    return {"channels": {"bmc": channel}, "nodes": {"n1": {"channels": [ref], **node}}}


@pytest.fixture
def host_for() -> Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]:
    """``async with host_for(cfg) as host``: a started host for a config dict."""

    @asynccontextmanager
    async def make(cfg: dict[str, Any]) -> AsyncIterator[PowerHost]:
        async with PowerHost(parse_config(cfg)) as host:
            yield host

    return make


@pytest.fixture
def mockup(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., MockupServer]]:
    """``mockup("public-bladed", advertise=..., ignore_graceful=...)``: a started server."""
    started: list[MockupServer] = []

    def make(name: str = "public-rackmount1", **kw: Any) -> MockupServer:
        server = MockupServer(MOCKUPS / name, **kw).start()
        monkeypatch.setenv(MOCKUP_PASSWORD_ENV, server.password)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def mockup_cfg() -> Callable[..., dict[str, Any]]:
    """``mockup_cfg(server, **overrides)``: a redfish channel config (session auth)."""
    return _mockup_channel


def _mockup_channel(server: MockupServer, **kw: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "type": "redfish",
        "endpoint": server.endpoint,
        "username": server.username,
        "password": {"env": MOCKUP_PASSWORD_ENV},
        "auth": "session",
        "timeouts": {"connect_s": 5, "read_s": 10},
    }
    cfg.update(kw)
    return cfg
