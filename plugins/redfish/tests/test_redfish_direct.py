"""The direct client (``auth: basic``): the same promises as the sushy path, on real peers.

With basic authentication the channel talks to the BMC through its own small HTTP client
(:class:`powerplane_redfish.connection.DirectSession`), not sushy. These tests hold it to
the rules the sushy path is held to elsewhere: a read survives a BMC that closes kept-alive
connections and is tried at most twice, a reset goes out once on a fresh connection, a
reset whose answer times out is an outcome unknown, failures before anything left are
never one, and every exception it can raise maps to a ChannelError without the password.
No session is ever created (nothing to log in or out).
"""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    PowerState,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    parse_config,
)
from powerplane.testing import SilentServer, closed_port
from powerplane_redfish import RedfishChannel
from powerplane_redfish.connection import DirectSession
from powerplane_redfish.errors import (
    ConnectFailed,
    HandshakeFailed,
    HTTPStatusError,
    handled,
    map_error,
    request_may_have_left,
)
from powerplane_redfish.testing.mockup import MockupServer

CfgFn = Callable[..., dict[str, Any]]
MockupFn = Callable[..., MockupServer]

RESET = "/Actions/ComputerSystem.Reset"
SECRET = "Sup3r-Secret-Value"
BOUND = 20.0  # an explicit bound on each failing operation


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    configured = parse_config({"channels": {"bmc": cfg}}).channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


def basic(mockup_cfg: CfgFn, server: MockupServer, **kw: Any) -> RedfishChannel:
    ch = channel_for(mockup_cfg(server, auth="basic", **kw))
    return ch


def posts(server: MockupServer, path: str) -> int:
    return server.requests.count(("POST", path))


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.wait_for(asyncio.to_thread(fn, *args), BOUND)


# -- against the DMTF mockup server, basic credentials ---------------------------------------
def test_basic_auth_uses_the_direct_client_and_creates_no_session(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = basic(mockup_cfg, server)
    try:
        ch.read_power_state(target)
        with ch.connection.use(target) as session:
            assert isinstance(session, DirectSession)
            assert SECRET not in repr(session) and server.password not in repr(session)
    finally:
        ch.close()
    assert server.sessions_created == server.sessions_deleted == 0
    # a named system needs no service root
    assert not [r for r in server.requests if r[1].rstrip("/") == "/redfish/v1"]


@pytest.mark.parametrize("drop_with", ["close", "reset"])
async def test_direct_reads_survive_a_bmc_that_closes_kept_alive_connections(
    drop_with: str, mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", keep_alive=1, drop_with=drop_with)
    target = server.systems[0]
    ch = basic(mockup_cfg, server)
    try:
        for round_ in range(3):
            for _ in range(10):
                reading = await run(ch.read_power_state, target)
                assert reading.state is PowerState.ON
            await run(ch.reboot, target)
            assert posts(server, target + RESET) == round_ + 1
    finally:
        ch.close()
    assert server.dropped > 0  # kept-alive connections were reused, and dropped
    assert [r for _, r in server.reset_log()] == ["GracefulRestart"] * 3


async def test_a_direct_read_dropped_twice_fails_and_is_tried_only_twice(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = basic(mockup_cfg, server)
    try:
        await run(ch.read_power_state, target)
        before = server.requests.count(("GET", target))
        server.drop_next(2)
        with pytest.raises(Unreachable, match="closed the connection without answering"):
            await run(ch.read_power_state, target)
        assert server.requests.count(("GET", target)) == before + 2
    finally:
        ch.close()


async def test_a_direct_reset_on_a_keep_alive_bmc_goes_out_once_on_a_fresh_connection(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    # The reads leave a kept-alive connection idle; the reset must not reuse it (the BMC
    # drops the second request on a connection: an outcome unknown for no reason).
    server = mockup("public-rackmount1", keep_alive=1)
    target = server.systems[0]
    ch = basic(mockup_cfg, server, shutdown="force")
    try:
        await run(ch.read_power_state, target)
        await run(ch.shutdown, target)
        reading = await run(ch.read_power_state, target)
    finally:
        ch.close()
    assert reading.state is PowerState.OFF
    assert posts(server, target + RESET) == 1
    assert server.reset_log() == [(target, "ForceOff")]


async def test_a_direct_reset_whose_answer_times_out_is_outcome_unknown_and_sent_once(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = basic(mockup_cfg, server, timeouts={"connect_s": 5, "read_s": 0.3})
    try:
        await run(ch.capabilities, target)
        server.reset_delay_s = 1.5
        with pytest.raises(OutcomeUnknown) as err:
            await run(ch.reboot, target)
    finally:
        ch.close()
    assert "may have been applied" in str(err.value)
    assert "ResetType=GracefulRestart" in str(err.value)
    assert posts(server, target + RESET) == 1


async def test_a_direct_reset_the_bmc_refuses_carries_its_words_and_is_no_outcome_unknown(
    mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    # reset_types declared in config: the channel sends PowerCycle, the mockup refuses it
    server = mockup("public-rackmount1", reset_types=["On", "ForceOff", "GracefulRestart"])
    target = server.systems[0]
    ch = basic(mockup_cfg, server, reboot="force", reset_types=["PowerCycle", "On"])
    try:
        with pytest.raises(RefusedByDevice) as err:
            await run(ch.reboot, target)
    finally:
        ch.close()
    assert "HTTP 400" in str(err.value) and "ResetType=PowerCycle" in str(err.value)
    assert posts(server, target + RESET) == 1


async def test_a_direct_wrong_password_is_an_authentication_error_without_it(
    mockup: MockupFn, mockup_cfg: CfgFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = mockup("public-rackmount1")
    monkeypatch.setenv("PP_TEST_WRONG", SECRET)
    ch = basic(mockup_cfg, server, password={"env": "PP_TEST_WRONG"})
    try:
        with pytest.raises(AuthenticationFailed, match="HTTP 401") as err:
            await run(ch.read_power_state, server.systems[0])
    finally:
        ch.close()
    assert SECRET not in str(err.value) and SECRET not in repr(err.value)


# -- network failures ------------------------------------------------------------------------
def _basic_channel(endpoint: str, monkeypatch: pytest.MonkeyPatch,
                   **kw: Any) -> RedfishChannel:
    monkeypatch.setenv("PP_TEST_PASSWORD", SECRET)
    return channel_for({"type": "redfish", "endpoint": endpoint, "username": "admin",
                        "password": {"env": "PP_TEST_PASSWORD"}, "auth": "basic", **kw})


async def test_a_direct_reset_to_a_closed_port_is_unreachable_not_outcome_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ch = _basic_channel(f"https://127.0.0.1:{closed_port()}", monkeypatch,
                        reset_types=["On", "ForceOff"], shutdown="force")
    try:
        with pytest.raises(Unreachable, match="connection refused"):
            await run(ch.shutdown, "/redfish/v1/Systems/1")
    finally:
        ch.close()


@pytest.mark.parametrize(("scheme", "words"), [("http", "did not answer in time"),
                                               ("https", "TLS handshake in time")])
async def test_a_silent_bmc_times_out_within_the_direct_clients_bounds(
    scheme: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SilentServer() as silent:
        ch = _basic_channel(f"{scheme}://127.0.0.1:{silent.port}", monkeypatch,
                            timeouts={"connect_s": 0.5, "read_s": 0.5})
        try:
            with pytest.raises(ChannelTimeout, match=words):
                await run(ch.capabilities, "/redfish/v1/Systems/1")
        finally:
            ch.close()


async def test_direct_tls_to_a_plain_http_bmc_fails_as_tls_before_anything_left(
    mockup: MockupFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = mockup("public-rackmount1")  # plain HTTP
    ch = _basic_channel(server.endpoint.replace("http://", "https://"), monkeypatch,
                        reset_types=["On", "ForceOff"], shutdown="force")
    try:
        with pytest.raises(TLSVerificationFailed):
            await run(ch.shutdown, server.systems[0])
    finally:
        ch.close()
    assert posts(server, server.systems[0] + RESET) == 0


# -- the mapping of the direct client's own exceptions ---------------------------------------
def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"code": "Base.1.0.GeneralError", "message": "see info",
                                 "@Message.ExtendedInfo": [{"Message": message}]}}).encode()


@pytest.mark.parametrize("status", [*range(300, 400, 7), *range(400, 600)])
def test_every_non_2xx_answer_follows_the_http_status_rule(status: int) -> None:
    words = f"the BMC says {status} {SECRET}"
    exc = HTTPStatusError("POST", "/x", status, _error_body(words))
    mapped = map_error(exc, channel="bmc", target="/s/1", action="ResetType=On",
                       secrets=[SECRET])
    want = AuthenticationFailed if status in (401, 403) else RefusedByDevice
    assert type(mapped) is want
    assert f"HTTP {status}" in mapped.message and "the BMC says" in mapped.message
    assert SECRET not in mapped.message
    assert not request_may_have_left(exc)  # the BMC answered: its word, not an unknown


def _subclasses(base: type[BaseException]) -> Iterator[type[BaseException]]:
    yield base
    for sub in base.__subclasses__():
        yield from _subclasses(sub)


def _instance(cls: type[BaseException]) -> BaseException:
    if issubclass(cls, HTTPStatusError):
        return cls("GET", "/x", 500, b"not json")
    if issubclass(cls, ConnectFailed | HandshakeFailed):
        try:
            try:
                raise TimeoutError("timed out")
            except TimeoutError as cause:
                raise cls(f"failed {SECRET}") from cause
        except cls as made:
            return made
    if cls is http.client.IncompleteRead:
        return cls(b"partial")
    if cls is http.client.UnknownProtocol:
        return cls(f"HTTP/9 {SECRET}")
    return cls(f"http.client says {SECRET}")


DIRECT_CLASSES = sorted(
    {c for base in (ConnectFailed, HandshakeFailed, HTTPStatusError, http.client.HTTPException)
     for c in _subclasses(base)
     if c.__module__ in ("http.client", "powerplane_redfish.errors")},  # not urllib3's
    key=lambda c: f"{c.__module__}.{c.__qualname__}",
)


@pytest.mark.parametrize("cls", DIRECT_CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_direct_client_exception_is_handled_and_maps_without_the_secret(
    cls: type[BaseException],
) -> None:
    exc = _instance(cls)
    assert isinstance(exc, handled())
    mapped = map_error(exc, channel="bmc", target="/s/1", secrets=[SECRET])
    assert isinstance(mapped, ChannelError) and mapped.channel == "bmc"
    assert SECRET not in str(mapped)


@pytest.mark.parametrize(("cls", "expected"), [(ConnectFailed, Unreachable),
                                               (HandshakeFailed, ChannelTimeout)])
def test_a_timeout_before_the_request_was_written_never_left(
    cls: type[BaseException], expected: type[ChannelError]
) -> None:
    exc = _instance(cls)
    assert type(map_error(exc, channel="bmc", target=None)) is expected
    assert not request_may_have_left(exc)
