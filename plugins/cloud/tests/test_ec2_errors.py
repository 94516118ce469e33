"""Every botocore failure maps into powerplane's tree (httpx style: none left unmapped)."""

from __future__ import annotations

import inspect

import pytest
from botocore import exceptions as bce

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_cloud.ec2_errors import (
    AUTH_CODES,
    NOT_FOUND_CODES,
    SERVER_CODES,
    THROTTLE_CODES,
    map_botocore_error,
    map_client_error,
)


def client_error(code: str, message: str = "said by AWS") -> bce.ClientError:
    return bce.ClientError({"Error": {"Code": code, "Message": message}}, "StopInstances")


@pytest.mark.parametrize(
    ("codes", "mapped"),
    [
        (AUTH_CODES, AuthenticationFailed),
        (NOT_FOUND_CODES, RefusedByDevice),
        (THROTTLE_CODES, RefusedByDevice),
        (SERVER_CODES, Unreachable),
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
    return [c for _, c in inspect.getmembers(bce, inspect.isclass)
            if issubclass(c, bce.BotoCoreError)]


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
