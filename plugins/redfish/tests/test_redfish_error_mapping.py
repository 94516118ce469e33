"""Every sushy and requests exception the channel handles maps to a powerplane ChannelError.

The classes are enumerated from the libraries themselves (every subclass of what
``powerplane_redfish.errors.HANDLED`` names), so a new exception class in sushy or
requests is covered the day it appears, and none escapes a channel call unmapped.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from sushy import exceptions as sushy_exc

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_redfish import RedfishConfig
from powerplane_redfish.connection import Connection
from powerplane_redfish.errors import map_error

SECRET = "Sup3r-Secret-Value"


def subclasses(base: type[BaseException]) -> Iterator[type[BaseException]]:
    yield base
    for sub in base.__subclasses__():
        yield from subclasses(sub)


def library_classes() -> list[type[BaseException]]:
    found = {
        cls
        for base in (sushy_exc.SushyError, requests.exceptions.RequestException)
        for cls in subclasses(base)
        if cls.__module__.split(".")[0] in ("sushy", "requests")
    }
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def response(status: int, message: str = f"bad thing {SECRET}") -> requests.Response:
    resp = requests.Response()
    resp.status_code = status
    resp._content = json.dumps({"error": {
        "code": "Base.1.0.GeneralError", "message": "see extended info",
        "@Message.ExtendedInfo": [{"MessageId": "Base.1.0.X", "Message": message,
                                   "Severity": "Warning"}],
    }}).encode()
    return resp


def instance(cls: type[BaseException]) -> BaseException:
    if issubclass(cls, sushy_exc.HTTPError):
        status = 401 if issubclass(cls, sushy_exc.AccessError) else 400
        return cls("POST", "https://bmc/x", response(status))
    if issubclass(cls, sushy_exc.SushyError):
        made: BaseException = cls(message=f"sushy says {SECRET}")  # type: ignore[call-arg]
        return made
    if issubclass(cls, json.JSONDecodeError):
        return cls(f"requests says {SECRET}", "doc", 0)
    return cls(f"requests says {SECRET}")


@pytest.mark.parametrize("cls", library_classes(), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_library_exception_maps_to_a_channel_error(cls: type[BaseException]) -> None:
    mapped = map_error(instance(cls), channel="bmc", target="/s/1", secrets=[SECRET])
    assert isinstance(mapped, ChannelError)
    assert SECRET not in str(mapped)
    assert mapped.channel == "bmc"


def test_the_enumeration_is_not_empty() -> None:
    names = {c.__name__ for c in library_classes()}
    assert {"AccessError", "ConnectionError", "SSLError", "ReadTimeout", "HTTPError"} <= names


def wrapped(cause: BaseException) -> sushy_exc.ConnectionError:
    """A sushy ConnectionError raised while handling ``cause``, as sushy's connector does."""
    try:
        try:
            raise cause
        except BaseException as exc:
            raise sushy_exc.ConnectionError(url="https://bmc/x", error=exc) from None
    except sushy_exc.ConnectionError as outer:
        outer.__context__ = cause
        return outer


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (requests.exceptions.SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] x"), TLSVerificationFailed),
        (requests.exceptions.SSLError("handshake failure"), TLSVerificationFailed),
        (requests.exceptions.ConnectTimeout("x"), Unreachable),
        (requests.exceptions.ReadTimeout("x"), ChannelTimeout),
        (requests.exceptions.ConnectionError("Connection refused"), Unreachable),
        (requests.exceptions.ChunkedEncodingError("x"), ProtocolError),
        (requests.exceptions.InvalidURL("x"), ProtocolError),
    ],
)
def test_sushy_connection_errors_map_by_their_cause(
    cause: BaseException, expected: type[ChannelError]
) -> None:
    assert type(map_error(wrapped(cause), channel="bmc", target=None)) is expected


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (sushy_exc.AccessError("GET", "u", response(403)), AuthenticationFailed),
        (sushy_exc.BadRequestError("POST", "u", response(400)), RefusedByDevice),
        (sushy_exc.ServerSideError("POST", "u", response(500)), RefusedByDevice),
        (sushy_exc.ResourceNotFoundError("GET", "u", response(404)), RefusedByDevice),
        (sushy_exc.MissingXAuthToken("POST", "u", response(201)), ProtocolError),
        (sushy_exc.MissingAttributeError(attribute="a", resource="r"), ProtocolError),
        (json.JSONDecodeError("x", "doc", 0), ProtocolError),
        (ValueError("x"), ProtocolError),
        (ssl.SSLCertVerificationError("certificate verify failed"), TLSVerificationFailed),
        (ConnectionRefusedError(111, "Connection refused"), Unreachable),
        (TimeoutError("timed out"), ChannelTimeout),
        (OSError(5, "I/O"), Unreachable),
    ],
)
def test_specific_classes_map_to_the_expected_error(
    exc: BaseException, expected: type[ChannelError]
) -> None:
    assert type(map_error(exc, channel="bmc", target=None)) is expected


def test_refusal_carries_the_bmcs_extended_info() -> None:
    exc = sushy_exc.BadRequestError("POST", "u", response(400, "ResetType PowerCycle not allowed"))
    mapped = map_error(exc, channel="bmc", target="/s/1", action="ResetType=PowerCycle")
    assert "ResetType PowerCycle not allowed" in str(mapped)
    assert "ResetType=PowerCycle" in str(mapped)
    assert "HTTP 400" in str(mapped)


@pytest.mark.parametrize("cls", library_classes(), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_no_library_exception_escapes_a_channel_call(
    cls: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raised inside a channel call, each class comes out a ChannelError, chained."""
    monkeypatch.setenv("PP_TEST_PASSWORD", SECRET)
    conn = Connection("bmc", RedfishConfig(
        endpoint="https://127.0.0.1:9", username="u", password={"env": "PP_TEST_PASSWORD"},
    ))
    monkeypatch.setattr(conn, "_current", lambda: (None, None))
    exc = instance(cls)
    with pytest.raises(ChannelError) as err:
        with conn.use("/s/1"):
            raise exc
    assert err.value.__cause__ is exc
    assert SECRET not in str(err.value)


# -- core's HTTP status rule, for every status a BMC can answer -------------------------------
def _answer(status: int, message: str) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps({"error": {
        "code": "Base.1.0.GeneralError", "message": "see ExtendedInfo",
        "@Message.ExtendedInfo": [{"MessageId": "Test.1.0.Status", "Message": message}]}}
    ).encode()
    return response


@pytest.mark.parametrize("status", range(400, 600))
def test_every_4xx_and_5xx_follows_the_http_status_rule(status: int) -> None:
    """401/403 -> AuthenticationFailed; every other 4xx and every 5xx -> RefusedByDevice
    with the BMC's words (the BMC answered: never Unreachable), through the class sushy
    itself raises for that status."""
    words = f"the BMC says {status}"
    with pytest.raises(sushy_exc.HTTPError) as raised:
        sushy_exc.raise_for_response("POST", "https://bmc/x", _answer(status, words))
    mapped = map_error(raised.value, channel="bmc", target="/redfish/v1/Systems/1",
                       action="ResetType=On")
    want = AuthenticationFailed if status in (401, 403) else RefusedByDevice
    assert type(mapped) is want, (status, type(raised.value).__name__, mapped)
    assert words in mapped.message and f"HTTP {status}" in mapped.message


def test_a_reset_dropped_after_it_was_written_is_outcome_unknown_not_a_refusal(
    mockup: Any, mockup_cfg: Any,
) -> None:
    """The last clause of the rule, end to end: the BMC reads the reset POST and closes the
    connection without an answer (no status at all) -> OutcomeUnknown."""
    from powerplane import OutcomeUnknown, parse_config

    server = mockup("public-rackmount1")
    target = server.systems[0]
    cfg = parse_config({"channels": {"bmc": mockup_cfg(server)}}).channels["bmc"].config
    from powerplane_redfish import RedfishChannel

    channel = RedfishChannel("bmc", cfg)
    try:
        channel.capabilities(target)
        before = len(server.reset_log())
        server.drop_next()
        with pytest.raises(OutcomeUnknown):
            channel.power_on(target)
        assert len(server.reset_log()) == before  # read, then dropped unanswered
        posts = [r for r in server.requests if r[0] == "POST" and r[1].endswith(".Reset")]
        assert posts == [("POST", f"{target}/Actions/ComputerSystem.Reset")]  # sent once
        assert server.dropped == 1
    finally:
        channel.close()
