"""botocore's exceptions mapped into powerplane's error tree.

::

    botocore ClientError, by error code
    ├── AuthFailure, UnauthorizedOperation, AccessDenied, ...  -> AuthenticationFailed
    ├── InvalidInstanceID.NotFound / .Malformed               -> RefusedByDevice (names the id)
    ├── RequestLimitExceeded, Throttling, ...                 -> RefusedByDevice (after retries)
    ├── InternalError, ServiceUnavailable, Unavailable        -> Unreachable
    └── any other code (IncorrectInstanceState, ...)          -> RefusedByDevice (code, message)
    botocore BotoCoreError
    ├── ReadTimeoutError                                      -> ChannelTimeout
    ├── SSLError                                              -> TLSVerificationFailed
    ├── EndpointConnectionError, ConnectTimeoutError, ...     -> Unreachable
    ├── NoCredentialsError, ProfileNotFound, ...              -> AuthenticationFailed
    └── anything else                                         -> ProtocolError

The mappers return the error; the caller raises it ``from`` the original. AWS error
messages never carry the secret key, and nothing here adds one.
"""

from __future__ import annotations

from typing import Any

from botocore import exceptions as bce

from powerplane.errors import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)

__all__ = [
    "AUTH_CODES",
    "NOT_FOUND_CODES",
    "THROTTLE_CODES",
    "error_code",
    "is_throttle",
    "map_botocore_error",
    "map_client_error",
]

AUTH_CODES = frozenset({
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "ExpiredToken",
    "RequestExpired",
    "InvalidAccessKeyId",
    "AccessDenied",
    "AccessDeniedException",
    "OptInRequired",
})
"""Codes that mean the credentials (or their permissions) were rejected."""

NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
"""Codes that mean an instance id does not exist (or cannot)."""

THROTTLE_CODES = frozenset({
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "EC2ThrottledException",
    "SlowDown",
    "PriorRequestNotComplete",
})
"""Codes that mean the request was throttled and not carried out."""

SERVER_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"})
"""Codes that mean the service failed on its side."""


def error_code(exc: bce.ClientError) -> str:
    """The AWS error code of a ``ClientError`` (``""`` when absent)."""
    err: Any = exc.response.get("Error", {})
    return str(err.get("Code", "")) if isinstance(err, dict) else ""


def _message(exc: bce.ClientError) -> str:
    err: Any = exc.response.get("Error", {})
    return str(err.get("Message", "")).strip() if isinstance(err, dict) else ""


def is_throttle(exc: BaseException) -> bool:
    """Whether ``exc`` is a throttled request (safe to repeat where the call is idempotent)."""
    return isinstance(exc, bce.ClientError) and error_code(exc) in THROTTLE_CODES


def map_client_error(
    exc: bce.ClientError, *, channel: str, target: object, operation: str
) -> ChannelError:
    """The powerplane error for an AWS error response to ``operation``."""
    code = error_code(exc)
    message = _message(exc)
    said = f"{code}: {message}" if message else code or "no error code"
    if code in AUTH_CODES:
        return AuthenticationFailed(
            f"{operation} rejected the credentials ({said})", channel=channel, target=target
        )
    if code in NOT_FOUND_CODES:
        return RefusedByDevice(
            f"instance {target} does not exist ({said})", channel=channel, target=target
        )
    if code in THROTTLE_CODES:
        return RefusedByDevice(
            f"{operation} throttled by the API ({said})", channel=channel, target=target
        )
    if code in SERVER_CODES:
        return Unreachable(
            f"{operation} failed on the service side ({said})", channel=channel, target=target
        )
    return RefusedByDevice(f"{operation} refused ({said})", channel=channel, target=target)


def map_botocore_error(
    exc: bce.BotoCoreError, *, channel: str, target: object, operation: str
) -> ChannelError:
    """The powerplane error for a botocore failure that is not an AWS error response."""
    kind = type(exc).__name__
    if isinstance(exc, bce.ReadTimeoutError):
        return ChannelTimeout(
            f"{operation}: the endpoint did not answer in time", channel=channel, target=target
        )
    if isinstance(exc, bce.SSLError):
        return TLSVerificationFailed(
            f"{operation}: TLS verification of the endpoint failed", channel=channel, target=target
        )
    if isinstance(exc, bce.ConnectTimeoutError):
        return Unreachable(
            f"{operation}: connecting to the endpoint timed out", channel=channel, target=target
        )
    if isinstance(exc, (bce.ConnectionError, bce.HTTPClientError)):
        where = getattr(exc, "kwargs", {}).get("endpoint_url", "")
        at = f" {where}" if where else ""
        return Unreachable(
            f"{operation}: cannot reach the endpoint{at} ({kind})", channel=channel, target=target
        )
    if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError,
                        bce.CredentialRetrievalError, bce.ProfileNotFound)):
        return AuthenticationFailed(
            f"{operation}: no usable credentials ({kind})", channel=channel, target=target
        )
    return ProtocolError(f"{operation}: {kind}", channel=channel, target=target)
