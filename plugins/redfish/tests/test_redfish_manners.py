"""Manners a BMC can live with, counted at the peer: lock-out, pacing, already in that state.

- Lock-out: a fleet call to 50 nodes behind one BMC endpoint with a wrong password makes
  exactly one login attempt, counted at the sushy-tools emulator (basic authentication:
  every request is a login; the emulator logs each before it answers) and at the mockup
  server (session authentication: ``POST .../Sessions`` counted). The other 49 fail at once
  with the first error and the hint, and the host's second fleet call sends nothing.
- Pacing: 20 resets to one endpoint with ``manners: {min_interval_s: 0.5}`` arrive at the
  mockup server never closer than 0.5 s (its own ``time.monotonic()`` per reset POST).
- Already in that state: iDRAC answers ``On`` of a system that is on with HTTP 409
  (``IDRAC.1.6.PSU501``, the captured body): the power-on is read back and reported done,
  saying so; a shutdown refused the same way while the readback says ``on`` stays refused.
- Re-login after a 401: the mockup server (sushy-tools' emulator has no SessionService)
  deletes the session between calls. With the password changed meanwhile, sushy logs in
  again once, is refused, and every later call fails at once with that refusal; with the
  same password, one re-login is made and a session lost again right after it is not
  logged in again. ``POST .../Sessions`` counted at the peer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from powerplane import AuthenticationFailed, InvokeResult, PowerHost
from powerplane_redfish.testing.emulator import SushyEmulator
from powerplane_redfish.testing.mockup import MockupServer

FLEET = 50
WRONG_ENV = "PP_TEST_MANNERS_WRONG"
HostFor = Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]


@pytest.fixture(scope="module")
def emu50(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SushyEmulator]:
    with SushyEmulator(tmp_path_factory.mktemp("manners-emulator"), systems=FLEET) as server:
        yield server


def fleet(channel: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    return {"channels": {"bmc": channel},
            "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": t}]}
                      for i, t in enumerate(targets)}}


async def wrong_password_fleet(host_for: HostFor, cfg: dict[str, Any]) -> dict[str, Any]:
    nodes = list(cfg["nodes"])
    async with host_for(cfg) as host:
        first = await asyncio.wait_for(
            host.invoke_many(nodes, "power-on", reason="manners test"), 120)
        # the host's next fleet call (a runner's next pass): the remembered failure, no login
        again = await asyncio.wait_for(
            host.invoke_many(nodes, "power-on", reason="manners test"), 120)
    assert set(first) == set(nodes)
    for outcome in [*first.values(), *again.values()]:
        assert isinstance(outcome, AuthenticationFailed), outcome
    return first


def test_basic_auth_fleet_logs_in_once(emu50: SushyEmulator, host_for: HostFor,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRONG_ENV, "not-" + emu50.password)
    cfg = fleet({"type": "redfish", "endpoint": emu50.endpoint, "username": emu50.username,
                 "password": {"env": WRONG_ENV}, "verify": str(emu50.tls.ca),
                 "auth": "basic", "timeouts": {"connect_s": 5, "read_s": 10}},
                emu50.system_paths)
    emu50.reset_count()
    asyncio.run(wrong_password_fleet(host_for, cfg))
    requests = emu50.requests()
    # one request met the BMC's authentication (answered 401): one login attempt; the
    # service root, which the emulator serves to anyone, was read before it
    systems = [r for r in requests if r[1].startswith("/redfish/v1/Systems/")]
    assert len(systems) == 1, requests
    assert [r for r in requests if r not in systems] == [("GET", "/redfish/v1/")], requests


def test_session_auth_fleet_logs_in_once(mockup: Callable[..., MockupServer],
                                         host_for: HostFor,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    server = mockup()
    monkeypatch.setenv(WRONG_ENV, "not-" + server.password)
    cfg = fleet({"type": "redfish", "endpoint": server.endpoint, "username": server.username,
                 "password": {"env": WRONG_ENV}, "auth": "session",
                 "timeouts": {"connect_s": 5, "read_s": 10}}, [server.systems[0]] * FLEET)
    asyncio.run(wrong_password_fleet(host_for, cfg))
    logins = [r for r in server.requests
              if r == ("POST", "/redfish/v1/SessionService/Sessions")]
    assert len(logins) == 1, server.requests
    assert server.sessions_created == 0


def test_a_changed_password_tries_again(mockup: Callable[..., MockupServer],
                                        host_for: HostFor, mockup_cfg: Callable[..., Any],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    server = mockup()
    monkeypatch.setenv(WRONG_ENV, "not-" + server.password)
    wrong = fleet(mockup_cfg(server, password={"env": WRONG_ENV}), [server.systems[0]] * 3)
    right = fleet(mockup_cfg(server), [server.systems[0]] * 3)

    async def go() -> tuple[Any, Any]:
        async with host_for(wrong) as host:
            refused = await host.read_power_state("n0")
        async with host_for(right) as host:
            read = await host.read_power_state("n0")
        return refused, read

    _, read = asyncio.run(asyncio.wait_for(go(), 60))
    assert read.state.value == "on"
    assert server.sessions_created == 1


def test_twenty_commands_paced_at_the_peer(mockup: Callable[..., MockupServer],
                                           host_for: HostFor,
                                           mockup_cfg: Callable[..., Any]) -> None:
    server = mockup()
    cfg = fleet(mockup_cfg(server, manners={"min_interval_s": 0.5}),
                [server.systems[0]] * 20)

    async def go() -> dict[str, Any]:
        async with host_for(cfg) as host:
            return await host.invoke_many(list(cfg["nodes"]), "reboot", reason="pacing")

    results = asyncio.run(asyncio.wait_for(go(), 120))
    assert all(isinstance(r, InvokeResult) for r in results.values()), results
    times = server.reset_times
    assert len(times) == 20
    gaps = [b - a for a, b in itertools.pairwise(times)]
    print(f"20 resets, min_interval_s 0.5: smallest gap at the peer {min(gaps):.3f} s")
    assert min(gaps) >= 0.5, gaps


def test_a_cancelled_wait_was_not_sent(mockup: Callable[..., MockupServer],
                                       host_for: HostFor,
                                       mockup_cfg: Callable[..., Any]) -> None:
    from powerplane.channel import cut_calls

    server = mockup()
    cfg = fleet(mockup_cfg(server, manners={"min_interval_s": 30}), [server.systems[0]] * 2)

    async def go() -> list[Any]:
        with cut_calls() as cut:
            async with host_for(cfg) as host:
                await host.invoke("n0", "reboot", reason="first")
                task = asyncio.create_task(host.invoke("n1", "reboot", reason="second"))
                await asyncio.sleep(0.5)  # waiting for its interval
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
        return cut

    cut = asyncio.run(asyncio.wait_for(go(), 60))
    assert len(server.reset_times) == 1
    assert [(c.method, c.sent) for c in cut] == [("reboot", False)]


def test_already_on_is_read_back_and_done(mockup: Callable[..., MockupServer],
                                          host_for: HostFor,
                                          mockup_cfg: Callable[..., Any]) -> None:
    server = mockup()
    server.refuse_if_already = True
    cfg = fleet(mockup_cfg(server), [server.systems[0]] * 2)

    async def go() -> tuple[Any, dict[str, Any]]:
        async with host_for(cfg) as host:
            one = await host.invoke("n0", "power-on", reason="already on")
            many = await host.invoke_many(["n0", "n1"], "power-on", reason="already on")
            return one, many

    server.power[server.systems[0]] = "On"
    one, many = asyncio.run(asyncio.wait_for(go(), 60))
    for result in (one, *many.values()):
        assert isinstance(result, InvokeResult), result
        assert result.readback is not None and result.readback.value == "on"
        assert result.detail.startswith("already on: the device refused power-on")
        assert "Server is already powered ON." in result.detail
    assert server.resets == []  # every power-on refused: nothing applied


LOGIN = ("POST", "/redfish/v1/SessionService/Sessions")


def test_a_relogin_refused_after_a_401_locks_the_endpoint_out(
        mockup: Callable[..., MockupServer], host_for: HostFor,
        mockup_cfg: Callable[..., Any]) -> None:
    # the BMC deletes the session and the password is changed meanwhile: sushy logs in
    # again once (refused), and every later call fails at once with that refusal
    server = mockup()
    cfg = fleet(mockup_cfg(server), [server.systems[0]] * 10)
    nodes = list(cfg["nodes"])

    async def go() -> tuple[Any, Any, dict[str, Any], Any]:
        async with host_for(cfg) as host:
            before = await host.read_power_state("n0")
            server.sessions.clear()
            server.password = "changed-" + server.password
            refused = await host.read_power_state("n0")
            sent = len(server.requests)
            fleet_again = await host.invoke_many(nodes, "power-on", reason="after a 401")
            assert len(server.requests) == sent, "a call after the refused re-login was sent"
            return before, refused, fleet_again, host.channel("bmc")

    before, refused, again, channel = asyncio.run(asyncio.wait_for(go(), 60))
    assert before.state.value == "on"
    assert refused.state.value == "unknown"
    assert "The credentials supplied are not valid." in refused.detail, refused.detail
    assert server.requests.count(LOGIN) == 2, server.requests  # the login, one re-login
    assert server.sessions_created == 1
    assert channel.connection.relogins == 1
    for outcome in again.values():
        assert isinstance(outcome, AuthenticationFailed), outcome
        assert "not tried again" in outcome.message
        assert "The credentials supplied are not valid." in outcome.message


def test_a_session_lost_again_right_after_a_relogin_is_not_logged_in_again(
        mockup: Callable[..., MockupServer], host_for: HostFor,
        mockup_cfg: Callable[..., Any]) -> None:
    # a BMC that keeps ending sessions: one re-login, then the endpoint is locked out
    server = mockup()
    cfg = fleet(mockup_cfg(server), [server.systems[0]] * 3)

    async def go() -> tuple[list[Any], Any, Any]:
        async with host_for(cfg) as host:
            reads = [await host.read_power_state("n0")]
            server.sessions.clear()
            reads.append(await host.read_power_state("n0"))  # re-logs in once: on
            server.sessions.clear()
            reads.append(await host.read_power_state("n0"))  # not again: refused
            sent = len(server.requests)
            later = await host.read_power_state("n1")
            assert len(server.requests) == sent
            return reads, later, host.channel("bmc")

    reads, later, channel = asyncio.run(asyncio.wait_for(go(), 60))
    assert [r.state.value for r in reads] == ["on", "on", "unknown"]
    assert "ended the Redfish session again (HTTP 401)" in reads[2].detail
    assert "not tried again" in later.detail and "ended the Redfish session again" in later.detail
    assert server.requests.count(LOGIN) == 2, server.requests
    assert server.sessions_created == 2
    assert channel.connection.relogins == 1
