"""Redfish PowerDistribution against DMTF's public-pdu mockup served by a small test PDU
(``powerplane_pdu.testing.RedfishPduServer``, on core's ``JsonHttpServer``).

respx stands in only for the failures the mockup cannot give (busy, timeouts, garbage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pdu_peers import RedfishPduServer

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    PowerHost,
    PowerState,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane.testing import TLSFiles, issue_cert, make_ca
from powerplane_pdu import PduChannel, map_error, parse_target

PASSWORD = "pdu-Pa55word-zz"
A1 = parse_target({"outlets": ["A1"]})
A12 = parse_target({"outlets": ["A1", "A2"]})
OUTLET = "/redfish/v1/PowerEquipment/RackPDUs/1/Outlets"


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "pdu-password"
    path.write_text(PASSWORD + "\n")
    return path


@pytest.fixture
def redfish_pdu(public_pdu: Path) -> Iterator[RedfishPduServer]:
    with RedfishPduServer(public_pdu, "admin", PASSWORD) as server:
        yield server


def _cfg(url: str, password_file: Path, **keys: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "protocol": "redfish",
        "endpoint": url,
        "username": "admin",
        "password": {"file": str(password_file)},
        "timeouts": {"connect_s": 5, "read_s": 5},
        "reboot_delay_s": 0,
    }
    cfg.update(keys)
    return cfg


def _patch(server: RedfishPduServer, outlet: str, body: dict[str, Any]) -> None:
    httpx.patch(f"{server.url}{OUTLET}/{outlet}", json=body,
                auth=("admin", PASSWORD)).raise_for_status()


def _counts(server: RedfishPduServer) -> dict[str, int]:
    return server.counts()


@pytest.mark.parametrize("auth", ["session", "basic"])
async def test_outlets_switch_off_on_and_cycle_with_metered_readback(
    auth: str,
    redfish_pdu: RedfishPduServer,
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(_cfg(redfish_pdu.url, password_file, auth=auth))
    caps = await ch.capabilities(A12)
    assert caps.as_dict() == {"reboot": "hard", "shutdown": "hard", "power-on": "hard"}
    reading = await ch.read_power_state(A12)
    assert reading.state is PowerState.ON, reading  # the mockup meters: 197.4 W on A1
    await ch.shutdown(A12)
    off = await ch.read_power_state(A12)
    assert off.state is PowerState.OFF
    await ch.power_on(A12)
    assert (await ch.read_power_state(A12)).state is PowerState.ON
    posts = _counts(redfish_pdu).get("POST", 0)
    done = await ch.reboot(A12)
    assert done.detail.count("switched off and on again") == 2
    # explicit Off then On per outlet, never a PowerCycle
    assert _counts(redfish_pdu)["POST"] - posts == 4
    assert (await ch.read_power_state(A12)).state is PowerState.ON
    await ch.close()
    if auth == "session":
        assert _counts(redfish_pdu).get("DELETE") == 1, "the session is logged out on close"


async def test_through_power_host(redfish_pdu: RedfishPduServer, password_file: Path) -> None:
    cfg = {
        "channels": {"pdu-r": {"type": "pdu", **_cfg(redfish_pdu.url, password_file)}},
        "nodes": {"n1": {"channels": [{"channel": "pdu-r", "target": {"outlets": ["B1"]}}]}},
    }
    async with PowerHost(parse_config(cfg)) as host:
        assert host.offer_for("n1")[Verb.SHUTDOWN].offered
        await host.invoke("n1", Verb.SHUTDOWN, reason="test")
        assert (await host.read_power_state("n1")).state is PowerState.OFF


async def test_locked_outlet_is_refused_with_the_reason(
    redfish_pdu: RedfishPduServer, password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    _patch(redfish_pdu, "A2", {"PowerControlLocked": True})
    ch = channel_for(_cfg(redfish_pdu.url, password_file))
    with pytest.raises(RefusedByDevice, match="PowerControlLocked") as info:
        await ch.shutdown(A12)
    assert "rack/A1: switched off" in str(info.value)
    assert "rack/A2: FAILED (RefusedByDevice" in str(info.value)
    assert _counts(redfish_pdu).get("POST", 0) <= 2  # session login + A1 only
    reading = await ch.read_power_state(parse_target({"outlets": ["A2"]}))
    assert reading.state is PowerState.ON


async def test_outlet_in_transition_reads_unknown(
    redfish_pdu: RedfishPduServer, password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    _patch(redfish_pdu, "A3", {"PowerStateInTransition": True})
    ch = channel_for(_cfg(redfish_pdu.url, password_file))
    reading = await ch.read_power_state(parse_target({"outlets": ["A3"]}))
    assert reading.state is PowerState.UNKNOWN
    assert "in transition" in reading.detail


@pytest.mark.parametrize("auth", ["session", "basic"])
async def test_wrong_password_fails_authentication_without_the_password(
    auth: str,
    redfish_pdu: RedfishPduServer,
    tmp_path: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-Pa55word")
    ch = channel_for(_cfg(redfish_pdu.url, wrong, auth=auth))
    with pytest.raises(AuthenticationFailed) as info:
        await ch.capabilities(A1)
    assert "not-the-Pa55word" not in str(info.value)
    assert PASSWORD not in str(info.value)


async def test_unknown_outlet_is_refused_by_the_device(
    redfish_pdu: RedfishPduServer, password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    ch = channel_for(_cfg(redfish_pdu.url, password_file))
    with pytest.raises(RefusedByDevice, match="HTTP 404"):
        await ch.read_power_state(parse_target({"outlets": ["Z9"]}))
    # beside a good outlet, the missing one makes the reading unknown, by name
    reading = await ch.read_power_state(parse_target({"outlets": ["C1", "Z9"]}))
    assert reading.state is PowerState.UNKNOWN
    assert "rack/Z9" in reading.detail and "HTTP 404" in reading.detail
    with pytest.raises(RefusedByDevice, match="rack/Z9: FAILED") as info:
        await ch.power_on(parse_target({"outlets": ["C1", "Z9"]}))
    assert "not switched on: reading it failed" in str(info.value)


# -- TLS --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    """A throwaway CA and the test PDU's certificate for 127.0.0.1, signed by it."""
    d = tmp_path_factory.mktemp("tls")
    return issue_cert(make_ca(d, "test-pdu"), d, stem="test-pdu-server")


@pytest.fixture
def tls_pdu(public_pdu: Path, tls_files: TLSFiles) -> Iterator[RedfishPduServer]:
    with RedfishPduServer(public_pdu, "admin", PASSWORD, tls=tls_files) as server:
        yield server


async def test_tls_verified_against_the_configured_ca(
    tls_pdu: RedfishPduServer,
    tls_files: TLSFiles,
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    ch = channel_for(_cfg(tls_pdu.url, password_file, verify=str(tls_files.ca)))
    assert (await ch.read_power_state(A1)).state is PowerState.ON
    untrusted = channel_for(_cfg(tls_pdu.url, password_file, verify=True))
    with pytest.raises(TLSVerificationFailed):
        await untrusted.capabilities(A1)


# -- failures the mockup cannot give (respx) --------------------------------------------------
BASE = "https://pdu.invalid"


def _mocked_outlet() -> dict[str, Any]:
    return {
        "Id": "A1", "PowerState": "On",
        "Actions": {"#Outlet.PowerControl": {"target": f"{OUTLET}/A1/Outlet.PowerControl"}},
    }


@respx.mock
async def test_busy_pdu_refusal_carries_the_devices_words(
    password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    respx.get(f"{BASE}{OUTLET}/A1").respond(200, json=_mocked_outlet())
    respx.post(f"{BASE}{OUTLET}/A1/Outlet.PowerControl").respond(503, json={"error": {
        "code": "Base.1.0.ServiceTemporarilyUnavailable",
        "@Message.ExtendedInfo": [{"Message": "The relay board is busy; retry later."}]}})
    ch = channel_for(_cfg(BASE, password_file, auth="basic"))
    with pytest.raises(RefusedByDevice, match="HTTP 503 The relay board is busy"):
        await ch.shutdown(A1)


@pytest.mark.parametrize(
    ("raised", "mapped"),
    [
        (httpx.ConnectError("refused"), Unreachable),
        (httpx.ConnectTimeout("slow"), ChannelTimeout),
        (httpx.ReadTimeout("slow"), ChannelTimeout),
        (httpx.WriteTimeout("slow"), ChannelTimeout),
        (httpx.PoolTimeout("slow"), ChannelTimeout),
        (httpx.ReadError("reset"), ProtocolError),
        (httpx.RemoteProtocolError("garbage"), ProtocolError),
        (httpx.UnsupportedProtocol("gopher"), ProtocolError),
        (httpx.TooManyRedirects("loop"), ProtocolError),
    ],
)
async def test_every_httpx_failure_maps_into_the_channel_error_tree(
    raised: Exception,
    mapped: type[ChannelError],
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    with respx.mock:
        respx.get(f"{BASE}{OUTLET}/A1").mock(side_effect=raised)
        ch = channel_for(_cfg(BASE, password_file, auth="basic"))
        with pytest.raises(mapped) as info:
            await ch.capabilities(A1)
    assert info.value.__cause__ is raised


# -- core's one HTTP status rule, for every status class the PDU can answer ------------------
STATUSES = [
    (400, RefusedByDevice), (401, AuthenticationFailed), (403, AuthenticationFailed),
    (404, RefusedByDevice), (405, RefusedByDevice), (409, RefusedByDevice),
    (412, RefusedByDevice), (429, RefusedByDevice), (500, RefusedByDevice),
    (501, RefusedByDevice), (502, RefusedByDevice), (503, RefusedByDevice),
    (504, RefusedByDevice),
]


@pytest.mark.parametrize(("status", "mapped"), STATUSES)
def test_map_error_follows_the_http_status_rule(status: int, mapped: type) -> None:
    assert map_error(status) is mapped
    # an answer came: the switching request's status is the device's word, not unknown
    assert map_error(status, switching=True) is mapped


@pytest.mark.parametrize("status", [200, 204, 302, 399, 600])
def test_map_error_refuses_a_status_that_is_no_error(status: int) -> None:
    with pytest.raises(ValueError, match="not an error status"):
        map_error(status)


@pytest.mark.parametrize(("status", "mapped"), STATUSES)
async def test_every_status_on_a_read_and_on_the_switching_post_maps_by_the_rule(
    status: int,
    mapped: type[ChannelError],
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    words = f"the PDU says {status}"
    body = {"error": {"code": "Base.1.0.GeneralError",
                      "@Message.ExtendedInfo": [{"Message": words}]}}
    with respx.mock:
        respx.get(f"{BASE}{OUTLET}/B1").respond(status, json=body)
        ch = channel_for(_cfg(BASE, password_file, auth="basic"))
        with pytest.raises(mapped) as info:
            await ch.read_power_state(parse_target({"outlets": ["B1"]}))
    assert type(info.value) is mapped
    assert f"HTTP {status}" in str(info.value) and words in str(info.value)
    assert PASSWORD not in str(info.value)

    with respx.mock:
        respx.get(f"{BASE}{OUTLET}/A1").respond(200, json=_mocked_outlet())
        post = respx.post(f"{BASE}{OUTLET}/A1/Outlet.PowerControl").respond(status, json=body)
        ch = channel_for(_cfg(BASE, password_file, auth="basic"))
        with pytest.raises(mapped) as info:
            await ch.shutdown(A1)
    assert type(info.value) is mapped  # never OutcomeUnknown: the PDU answered
    assert f"HTTP {status}" in str(info.value) and words in str(info.value)
    assert post.call_count == 1, "a refused switching POST is not sent again"


@pytest.mark.parametrize(("status", "mapped"), [(403, AuthenticationFailed),
                                                (500, RefusedByDevice)])
async def test_the_session_login_status_maps_by_the_rule(
    status: int,
    mapped: type[ChannelError],
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    with respx.mock:
        respx.post(f"{BASE}/redfish/v1/SessionService/Sessions").respond(status, json={})
        ch = channel_for(_cfg(BASE, password_file, auth="session"))
        with pytest.raises(mapped) as info:
            await ch.read_power_state(A1)
    assert type(info.value) is mapped
    assert PASSWORD not in str(info.value)


def _httpx_errors() -> list[type[httpx.HTTPError]]:
    found: list[type[httpx.HTTPError]] = []
    todo: list[type[httpx.HTTPError]] = [httpx.HTTPError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _httpx_errors(), ids=lambda c: c.__name__)
def test_every_httpx_error_class_maps_into_the_channel_error_tree(
    cls: type[httpx.HTTPError],
) -> None:
    request = httpx.Request("GET", BASE)
    if issubclass(cls, httpx.HTTPStatusError):
        error: httpx.HTTPError = cls("x", request=request, response=httpx.Response(500))
    else:
        error = cls("x")
    for switching in (False, True):
        mapped = map_error(error, switching=switching)
        assert issubclass(mapped, ChannelError) and mapped is not ChannelError, (cls, mapped)
    if issubclass(cls, httpx.ConnectTimeout | httpx.PoolTimeout):
        assert map_error(error, switching=True) is ChannelTimeout  # nothing left
    elif issubclass(cls, httpx.ConnectError):
        assert map_error(error, switching=True) is Unreachable  # nothing left
    else:
        assert map_error(error, switching=True) is OutcomeUnknown  # it may have left


@respx.mock
async def test_a_body_that_is_not_json_is_a_protocol_error(
    password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    respx.get(f"{BASE}{OUTLET}/A1").respond(200, text="<html>login</html>")
    ch = channel_for(_cfg(BASE, password_file, auth="basic"))
    with pytest.raises(ProtocolError, match="not JSON"):
        await ch.capabilities(A1)


# -- the switching POST: gated, and never a plain failure once it may have left --------------
@pytest.mark.parametrize(
    ("raised", "mapped"),
    [
        (httpx.ConnectError("refused"), Unreachable),  # nothing left
        (httpx.ConnectTimeout("slow"), ChannelTimeout),  # nothing left
        (httpx.PoolTimeout("busy"), ChannelTimeout),  # nothing left
        (httpx.ReadTimeout("slow"), OutcomeUnknown),  # sent; no answer
        (httpx.WriteTimeout("slow"), OutcomeUnknown),  # may be partly sent
        (httpx.ReadError("reset"), OutcomeUnknown),
        (httpx.RemoteProtocolError("dropped"), OutcomeUnknown),
    ],
)
async def test_a_failed_switching_post_is_outcome_unknown_once_it_may_have_left(
    raised: Exception,
    mapped: type[ChannelError],
    password_file: Path,
    channel_for: Callable[..., PduChannel],
) -> None:
    with respx.mock:
        respx.get(f"{BASE}{OUTLET}/A1").respond(200, json=_mocked_outlet())
        respx.post(f"{BASE}{OUTLET}/A1/Outlet.PowerControl").mock(side_effect=raised)
        ch = channel_for(_cfg(BASE, password_file, auth="basic"))
        with pytest.raises(mapped) as info:
            await ch.shutdown(A1)
    assert type(info.value) is mapped


@respx.mock
async def test_an_outlet_that_still_reads_on_after_the_post_is_not_reported_off(
    password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    respx.get(f"{BASE}{OUTLET}/A1").respond(200, json=_mocked_outlet())  # always On
    respx.post(f"{BASE}{OUTLET}/A1/Outlet.PowerControl").respond(204)
    ch = channel_for(_cfg(BASE, password_file, auth="basic", settle_s=0))
    with pytest.raises(OutcomeUnknown, match="rack/A1 was switched off but reads on"):
        await ch.shutdown(A1)


@respx.mock
async def test_no_post_leaves_once_the_host_gave_up_on_the_call(
    password_file: Path, channel_for: Callable[..., PduChannel]
) -> None:
    from powerplane.testing import send_gate

    respx.get(f"{BASE}{OUTLET}/A1").respond(200, json=_mocked_outlet())
    post = respx.post(f"{BASE}{OUTLET}/A1/Outlet.PowerControl").respond(204)
    ch = channel_for(_cfg(BASE, password_file, auth="basic"))
    with send_gate() as gate:
        gate.close()
        with pytest.raises(ChannelTimeout, match="it was not sent"):
            await ch.shutdown(A1)
    assert not gate.sent
    assert post.call_count == 0
