"""Failures against real loopback peers map to powerplane's errors, with no secret in sight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    PowerHost,
    TLSVerificationFailed,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane.testing import SilentServer, closed_port, make_ca
from powerplane_redfish import RedfishChannel
from powerplane_redfish.testing.emulator import SushyEmulator

HostFor = Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]
CfgFn = Callable[..., dict[str, Any]]


BOUND = 20.0  # an explicit bound on each failing operation
WRONG = "Wr0ng-Passw0rd-9f3a"
TARGET = "/redfish/v1/Systems/1"


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    """A channel built through the registry, as a deployment builds it."""
    dep = parse_config({"channels": {"bmc": cfg}})
    configured = dep.channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


async def call(ch: RedfishChannel, method: str, target: str | None) -> Any:
    """Run a channel method in a worker thread, as the host does, under an explicit bound."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(getattr(ch, method), target), BOUND)
    finally:
        ch.close()


@pytest.mark.parametrize("auth", ["basic", "auto"])
async def test_wrong_password_is_an_authentication_error_without_the_password(
    auth: str,
    emu_cfg: Callable[..., dict[str, Any]],
    emu_system: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PP_TEST_WRONG_PASSWORD", WRONG)
    caplog.set_level(logging.DEBUG)
    ch = channel_for(emu_cfg(auth=auth, password={"env": "PP_TEST_WRONG_PASSWORD"}))
    with pytest.raises(AuthenticationFailed) as err:
        await call(ch, "capabilities", emu_system)
    out, errout = capsys.readouterr()
    for text in (str(err.value), repr(err.value), caplog.text, out, errout):
        assert WRONG not in text
    assert "401" in str(err.value)


async def test_closed_port_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_PASSWORD", "x")
    ch = channel_for({
        "type": "redfish", "endpoint": f"https://127.0.0.1:{closed_port()}",
        "username": "admin", "password": {"env": "PP_TEST_PASSWORD"},
    })
    with pytest.raises(Unreachable, match="connection refused"):
        await call(ch, "read_power_state", TARGET)


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_server_that_never_answers_times_out_within_the_read_timeout(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PP_TEST_PASSWORD", "x")
    with SilentServer() as silent:
        ch = channel_for({
            "type": "redfish", "endpoint": f"{scheme}://127.0.0.1:{silent.port}",
            "username": "admin", "password": {"env": "PP_TEST_PASSWORD"},
            "timeouts": {"connect_s": 0.5, "read_s": 0.5},
        })
        # The channel's own bound fires (the explicit BOUND above would raise TimeoutError).
        with pytest.raises(ChannelTimeout, match="did not answer in time"):
            await call(ch, "capabilities", TARGET)


async def test_wrong_ca_is_a_tls_verification_error(
    emu_cfg: Callable[..., dict[str, Any]], emu_system: str, tmp_path: Path
) -> None:
    other = make_ca(tmp_path, "other")
    ch = channel_for(emu_cfg(verify=str(other.ca)))
    with pytest.raises(TLSVerificationFailed, match="did not verify against the CA bundle"):
        await call(ch, "capabilities", emu_system)


async def test_system_cas_do_not_trust_the_emulator(
    emu_cfg: Callable[..., dict[str, Any]], emu_system: str
) -> None:
    ch = channel_for(emu_cfg(verify=True))
    with pytest.raises(TLSVerificationFailed, match="system CAs"):
        await call(ch, "capabilities", emu_system)


async def test_verify_false_reaches_the_emulator(
    emu_cfg: Callable[..., dict[str, Any]], emu_system: str
) -> None:
    ch = channel_for(emu_cfg(verify=False))
    reading = await call(ch, "read_power_state", emu_system)
    assert reading.state.value in ("on", "off")


async def test_unreachable_bmc_has_its_verbs_withheld_with_the_reason(
    host_for: HostFor, one_node: CfgFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PP_TEST_PASSWORD", "x")
    cfg = {
        "type": "redfish", "endpoint": f"https://127.0.0.1:{closed_port()}",
        "username": "admin", "password": {"env": "PP_TEST_PASSWORD"},
    }
    async with host_for(one_node(cfg, TARGET)) as host:
        offer = host.offer_for("n1")
    assert not offer.verbs[Verb.REBOOT].offered
    assert "connection refused" in offer.verbs[Verb.REBOOT].reason


def test_emulator_fixture_is_tls_and_basic_auth(emulator: SushyEmulator) -> None:
    import requests

    root = requests.get(f"{emulator.endpoint}/redfish/v1/", verify=str(emulator.tls.ca), timeout=5)
    assert root.ok
    denied = requests.get(
        f"{emulator.endpoint}/redfish/v1/Systems", verify=str(emulator.tls.ca), timeout=5
    )
    assert denied.status_code == 401
