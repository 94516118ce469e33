"""Every botocore failure maps into powerplane's tree (httpx style: none left unmapped).

The HTTP status rule of core (401/403 authentication, every other 4xx and every 5xx
refused by the device in its own words) and the verb rule (a timeout or a dropped
connection after the request may have been written is OutcomeUnknown) are checked for
every status class and every botocore class.
"""

from __future__ import annotations

import inspect

import pytest
from botocore import exceptions as bce

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_cloud.errors import (
    AUTH_CODES,
    NOT_FOUND_CODES,
    SERVER_CODES,
    THROTTLE_CODES,
    map_botocore_error,
    map_client_error,
    map_error,
)


def client_error(code: str, message: str = "said by AWS",
                 status: int | None = None) -> bce.ClientError:
    response: dict = {"Error": {"Code": code, "Message": message}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return bce.ClientError(response, "StopInstances")


@pytest.mark.parametrize(
    ("codes", "mapped"),
    [
        (AUTH_CODES, AuthenticationFailed),
        (NOT_FOUND_CODES, RefusedByDevice),
        (THROTTLE_CODES, RefusedByDevice),
        # core's 5xx rule: the service answered that it did not complete the request
        # (this channel mapped these to Unreachable before)
        (SERVER_CODES, RefusedByDevice),
        ({"IncorrectInstanceState", "OperationNotPermitted", "SomethingNew"}, RefusedByDevice),
    ],
)
def test_client_error_codes_map_to_their_class(codes: frozenset[str], mapped: type) -> None:
    for code in codes:
        err = map_client_error(client_error(code), channel="aws", target="i-1",
                               operation="stop_instances")
        assert type(err) is mapped, code
        assert code in str(err) and "said by AWS" in str(err)


def test_a_not_found_names_the_instance() -> None:
    err = map_client_error(client_error("InvalidInstanceID.NotFound"), channel="aws",
                           target="i-0123456789abcdef0", operation="stop_instances")
    assert "instance i-0123456789abcdef0 does not exist" in str(err)


def _all_botocore_errors() -> list[type[bce.BotoCoreError]]:
    found = {c for _, c in inspect.getmembers(bce, inspect.isclass)
             if issubclass(c, bce.BotoCoreError)}
    todo = list(found)
    while todo:  # subclasses defined elsewhere in botocore too
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize(
    ("cls", "mapped"),
    [
        (bce.ReadTimeoutError, ChannelTimeout),
        (bce.ConnectTimeoutError, Unreachable),
        (bce.EndpointConnectionError, Unreachable),
        (bce.ConnectionClosedError, Unreachable),
        (bce.SSLError, TLSVerificationFailed),
        (bce.NoCredentialsError, AuthenticationFailed),
        (bce.PartialCredentialsError, AuthenticationFailed),
        (bce.CredentialRetrievalError, AuthenticationFailed),
        (bce.ParamValidationError, ProtocolError),
    ],
)
def test_botocore_errors_map_to_their_class(cls: type[bce.BotoCoreError], mapped: type) -> None:
    exc = cls.__new__(cls)
    err = map_botocore_error(exc, channel="aws", target="i-1", operation="describe")
    assert type(err) is mapped


def test_no_botocore_error_is_left_unmapped() -> None:
    classes = _all_botocore_errors()
    assert len(classes) > 50
    for cls in classes:
        exc = cls.__new__(cls)
        err = map_botocore_error(exc, channel="aws", target="i-1", operation="describe")
        assert isinstance(err, ChannelError), cls


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 412, 429, 500, 501, 502, 503, 504,
                                    599])
def test_the_http_status_rule_for_a_code_this_channel_does_not_know(status: int) -> None:
    err = map_client_error(client_error("SomethingNew", "the words of AWS", status),
                           channel="aws", target="i-1", operation="stop_instances")
    want = AuthenticationFailed if status in (401, 403) else RefusedByDevice
    assert type(err) is want, status
    assert "SomethingNew: the words of AWS" in str(err)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
@pytest.mark.parametrize("code", sorted(SERVER_CODES))
def test_a_5xx_is_refused_by_the_device_with_its_words_never_unreachable(
        code: str, status: int) -> None:
    err = map_client_error(client_error(code, "We encountered an internal error.", status),
                           channel="aws", target="i-1", operation="stop_instances")
    assert type(err) is RefusedByDevice
    assert f"HTTP {status}" in str(err) and "We encountered an internal error." in str(err)


@pytest.mark.parametrize(
    ("cls", "mapped"),
    [
        (bce.ReadTimeoutError, OutcomeUnknown),
        (bce.ConnectionClosedError, OutcomeUnknown),
        (bce.ResponseStreamingError, OutcomeUnknown),
        (bce.HTTPClientError, OutcomeUnknown),
        (bce.ConnectTimeoutError, Unreachable),
        (bce.EndpointConnectionError, Unreachable),
        (bce.ProxyConnectionError, Unreachable),
        (bce.SSLError, TLSVerificationFailed),
        (bce.NoCredentialsError, AuthenticationFailed),
        (bce.ParamValidationError, ProtocolError),
    ],
)
def test_a_verb_request_that_may_have_left_is_outcome_unknown(
        cls: type[bce.BotoCoreError], mapped: type) -> None:
    exc = cls.__new__(cls)
    err = map_botocore_error(exc, channel="aws", target="i-1", operation="stop_instances",
                             sent=True)
    assert type(err) is mapped
    if mapped is OutcomeUnknown:
        assert "may have been applied" in str(err)


def test_every_botocore_class_maps_precisely_for_a_verb() -> None:
    """Connection-stage classes: nothing left. Everything raised once connected: unknown."""
    for cls in _all_botocore_errors():
        exc = cls.__new__(cls)
        err = map_botocore_error(exc, channel="aws", target="i-1", operation="x", sent=True)
        assert isinstance(err, ChannelError), cls
        if issubclass(cls, bce.HTTPClientError):
            assert type(err) is OutcomeUnknown, cls
        else:
            assert not isinstance(err, OutcomeUnknown), cls
        if issubclass(cls, bce.ConnectionError):
            assert type(err) in (Unreachable, TLSVerificationFailed), cls


def test_map_error_takes_either_kind_and_keeps_a_powerplane_error() -> None:
    assert type(map_error(client_error("AuthFailure"), channel="aws", target="i-1",
                          operation="x")) is AuthenticationFailed
    timeout = bce.ReadTimeoutError(endpoint_url="http://x")
    assert type(map_error(timeout, channel="aws", target="i-1", operation="x")) is \
        ChannelTimeout
    assert type(map_error(timeout, channel="aws", target="i-1", operation="x", sent=True)) is \
        OutcomeUnknown
    mine = RefusedByDevice("no", channel="aws")
    assert map_error(mine, channel="aws", target="i-1", operation="x") is mine
    other = map_error(KeyError("s3cr3t"), channel="aws", target="i-1", operation="x")
    assert type(other) is ProtocolError and "s3cr3t" not in str(other)
