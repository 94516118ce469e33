"""What the cloud APIs and their libraries raise, mapped into powerplane's error tree.

Both channel types apply core's one rule for HTTP status codes (``powerplane.status_error``;
certificates: ``powerplane.is_tls_failure``) (401, 403 ->
``AuthenticationFailed``; every other 4xx and every 5xx -> ``RefusedByDevice`` with the
API's own words: something answered, so it is not ``Unreachable``); a state-changing
request ("a verb": EC2 ``RebootInstances``/``StopInstances``/``StartInstances``/
``TerminateInstances``, a Compute action or ``DELETE``) whose connection dropped, or whose
answer did not come in time, after it may have been written is ``OutcomeUnknown``. The
same failure on a read is ``ChannelTimeout`` / ``Unreachable``: nothing was changed.

EC2 (botocore), an AWS error response (``ClientError``), by error code, then by status::

    AuthFailure, UnauthorizedOperation, AccessDenied, ... (AUTH_CODES) -> AuthenticationFailed
    InvalidInstanceID.NotFound / .Malformed (NOT_FOUND_CODES)  -> RefusedByDevice (names the id)
    RequestLimitExceeded, Throttling, ... (THROTTLE_CODES)     -> RefusedByDevice (after retries)
    any other code with HTTP 401 or 403                        -> AuthenticationFailed
    InternalError, ServiceUnavailable, ... (SERVER_CODES), 5xx -> RefusedByDevice (the 5xx rule;
                                                                  was Unreachable before)
    any other code (IncorrectInstanceState, ...), other 4xx    -> RefusedByDevice (code, message)

EC2 (botocore), a failure below the API (``BotoCoreError``; where botocore's
``httpsession`` raises each)::

                                                               read            verb
    ConnectTimeoutError       (urllib3 ConnectTimeoutError)    Unreachable     Unreachable
    EndpointConnectionError   (NewConnectionError, gaierror)   Unreachable     Unreachable
    ProxyConnectionError      (the proxy refused)              Unreachable     Unreachable
    SSLError                  (the TLS handshake failed)       TLSVerification TLSVerification
    other ConnectionError                                      Unreachable     Unreachable
    ReadTimeoutError          (sent; no answer in read_s)      ChannelTimeout  OutcomeUnknown
    ConnectionClosedError     (urllib3 ProtocolError: dropped) Unreachable     OutcomeUnknown
    ResponseStreamingError    (the answer broke off)           Unreachable     OutcomeUnknown
    HTTPClientError           (anything else in the send)      Unreachable     OutcomeUnknown
    NoCredentialsError, PartialCredentialsError,               AuthenticationFailed (no request)
      CredentialRetrievalError, ProfileNotFound
    anything else (ParamValidationError, ...)                  ProtocolError (no request)

OpenStack, a Compute or Keystone HTTP status (after one token renewal on a 401, and the
retries of a rate-limited GET or DELETE)::

    401, 403                   -> AuthenticationFailed (Keystone's / Nova's message)
    404                        -> RefusedByDevice naming the server id
    409                        -> RefusedByDevice with the API's message (the conflict)
    413, 429                   -> RefusedByDevice (rate limited)
    400, any other 4xx         -> RefusedByDevice (the API's message; 418 was ProtocolError)
    500, 502, 503, 504, any 5xx -> RefusedByDevice (the 5xx rule; 502-504 were Unreachable)
    anything below 400 unasked -> ProtocolError

OpenStack, an httpx failure below HTTP (httpx's ``HTTPError`` tree)::

                                                               read            verb
    ConnectTimeout            (connecting: nothing written)    Unreachable     Unreachable
    ConnectError              (refused, DNS, TLS handshake)    Unreachable     Unreachable
      ... with CERTIFICATE_VERIFY_FAILED                       TLSVerification TLSVerification
    ProxyError                (the proxy refused)              Unreachable     Unreachable
    PoolTimeout               (no connection free: not sent)   ChannelTimeout  ChannelTimeout
    UnsupportedProtocol, LocalProtocolError (not sent)         ProtocolError   ProtocolError
    ReadTimeout               (sent; no answer in read_s)      ChannelTimeout  OutcomeUnknown
    WriteTimeout, WriteError  (part of it may have left)       ChannelTimeout/ OutcomeUnknown
                                                               Unreachable
    ReadError, CloseError     (the connection dropped)         Unreachable     OutcomeUnknown
    RemoteProtocolError       (disconnected, bad answer)       ProtocolError   OutcomeUnknown
    DecodingError             (an answer we cannot read)       ProtocolError   OutcomeUnknown
    TooManyRedirects, HTTPStatusError (not raised: no redirects ProtocolError  ProtocolError
      followed, no raise_for_status)
    other TimeoutException / NetworkError / TransportError /   ChannelTimeout/ OutcomeUnknown
      RequestError / HTTPError (a base class: stage unknown)   Unreachable/
                                                               ProtocolError

Error bodies follow the API references: Nova answers ``{"conflictingRequest":
{"code": 409, "message": "..."}}`` (the key names the fault), Keystone answers
``{"error": {"code": 401, "title": "Unauthorized", "message": "..."}}``; AWS answers
``<Code>`` and ``<Message>``. Only those messages are quoted; request bodies (which hold
secrets) never are, and AWS messages never carry the secret key.

:func:`map_error` takes any exception of either library; the mappers return the error and
the caller raises it ``from`` the original. botocore and httpx are imported only where
their exceptions are inspected, so the ``ec2`` channel never imports httpx for this module,
nor the ``openstack`` channel botocore.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    is_tls_failure,
    status_error,
)

if TYPE_CHECKING:
    import httpx
    from botocore import exceptions as bce

__all__ = [
    "AUTH_CODES",
    "NOT_FOUND_CODES",
    "SERVER_CODES",
    "THROTTLE_CODES",
    "THROTTLE_STATUSES",
    "api_message",
    "error_code",
    "http_status",
    "is_throttle",
    "map_botocore_error",
    "map_client_error",
    "map_error",
    "map_status",
    "map_transport",
]

# -- EC2 -------------------------------------------------------------------------------------

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
"""Codes that mean the service failed on its side (answered 5xx): ``RefusedByDevice``."""


def _error(exc: bce.ClientError) -> dict[str, Any]:
    err: Any = exc.response.get("Error", {})
    return err if isinstance(err, dict) else {}


def error_code(exc: bce.ClientError) -> str:
    """The AWS error code of a ``ClientError`` (``""`` when absent)."""
    return str(_error(exc).get("Code", ""))


def http_status(exc: bce.ClientError) -> int | None:
    """The HTTP status of the answer behind a ``ClientError``, when botocore recorded it."""
    meta: Any = exc.response.get("ResponseMetadata", {})
    status = meta.get("HTTPStatusCode") if isinstance(meta, dict) else None
    return status if isinstance(status, int) else None


def is_throttle(exc: BaseException) -> bool:
    """Whether ``exc`` is a throttled request (safe to repeat where the call is idempotent)."""
    from botocore import exceptions as bce

    return isinstance(exc, bce.ClientError) and error_code(exc) in THROTTLE_CODES


def map_client_error(
    exc: bce.ClientError, *, channel: str, target: object, operation: str
) -> ChannelError:
    """The powerplane error for an AWS error response to ``operation`` (an answer came)."""
    code = error_code(exc)
    message = str(_error(exc).get("Message", "")).strip()
    said = f"{code}: {message}" if message else code or "no error code"
    status = http_status(exc)
    if code in AUTH_CODES or (code not in NOT_FOUND_CODES | THROTTLE_CODES
                              and status is not None and 400 <= status <= 599
                              and status_error(status) is AuthenticationFailed):
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
    if code in SERVER_CODES or (status is not None and status >= 500):
        shown = f"HTTP {status}, " if status is not None else ""
        return RefusedByDevice(
            f"{operation} failed on the service side ({shown}{said})", channel=channel,
            target=target,
        )
    return RefusedByDevice(f"{operation} refused ({said})", channel=channel, target=target)


def map_botocore_error(
    exc: bce.BotoCoreError, *, channel: str, target: object, operation: str,
    sent: bool = False,
) -> ChannelError:
    """The powerplane error for a botocore failure that is not an AWS error response.

    ``sent``: ``operation`` is a verb whose request passed :func:`powerplane.about_to_send`,
    so a failure after the connection was open may have left it applied.
    """
    from botocore import exceptions as bce

    kind = type(exc).__name__
    if isinstance(exc, bce.SSLError):
        return TLSVerificationFailed(
            f"{operation}: TLS verification of the endpoint failed", channel=channel, target=target
        )
    if isinstance(exc, bce.ConnectTimeoutError):
        return Unreachable(
            f"{operation}: connecting to the endpoint timed out", channel=channel, target=target
        )
    if isinstance(exc, bce.ConnectionError):  # before any byte of the request left
        return Unreachable(
            f"{operation}: cannot reach the endpoint{_at(exc)} ({kind})", channel=channel,
            target=target,
        )
    if isinstance(exc, bce.HTTPClientError):  # connected: the request may have left
        if sent:
            return OutcomeUnknown(
                f"{operation}: {_what_happened(exc)} ({kind}); read the state before "
                "sending it again", channel=channel, target=target,
            )
        if isinstance(exc, bce.ReadTimeoutError):
            return ChannelTimeout(
                f"{operation}: the endpoint did not answer in time", channel=channel,
                target=target,
            )
        return Unreachable(
            f"{operation}: the connection to the endpoint{_at(exc)} failed ({kind})",
            channel=channel, target=target,
        )
    if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError,
                        bce.CredentialRetrievalError, bce.ProfileNotFound)):
        return AuthenticationFailed(
            f"{operation}: no usable credentials ({kind})", channel=channel, target=target
        )
    return ProtocolError(f"{operation}: {kind}", channel=channel, target=target)


def _at(exc: BaseException) -> str:
    kwargs = getattr(exc, "kwargs", None)
    where = kwargs.get("endpoint_url", "") if isinstance(kwargs, dict) else ""
    return f" {where}" if where else ""


def _what_happened(exc: BaseException) -> str:
    from botocore import exceptions as bce

    if isinstance(exc, bce.ReadTimeoutError):
        return "no answer came in time after the request was sent"
    if isinstance(exc, bce.ResponseStreamingError):
        return "the answer broke off"
    return "the connection dropped after the request may have been written"


# -- OpenStack -------------------------------------------------------------------------------

THROTTLE_STATUSES = frozenset({413, 429})
"""Statuses that mean the request was rate limited and not carried out."""


def api_message(response: httpx.Response) -> str:
    """The message of an OpenStack error body, else the reason phrase."""
    try:
        body: Any = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        body = None
    if isinstance(body, dict):
        for value in body.values():
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
    return response.reason_phrase or f"HTTP {response.status_code}"


def map_status(
    response: httpx.Response, *, channel: str, target: object, what: str
) -> ChannelError:
    """The powerplane error for an error status answering ``what`` (``os-stop``, ...)."""
    status = response.status_code
    msg = api_message(response)
    if not 400 <= status <= 599:
        return ProtocolError(f"{what}: unexpected HTTP {status}", channel=channel,
                             target=target)
    if status_error(status) is AuthenticationFailed:  # core's one rule; Nova's words
        said = f"{what}: {msg}" if status == 401 else f"{what} forbidden by policy: {msg}"
        return AuthenticationFailed(said, channel=channel, target=target)
    if status == 404:
        return RefusedByDevice(
            f"server {target} does not exist ({what}: {msg})", channel=channel, target=target
        )
    if status == 409:
        return RefusedByDevice(msg, channel=channel, target=target)
    if status == 400:
        return RefusedByDevice(f"{what} rejected as a bad request: {msg}", channel=channel,
                               target=target)
    if status in THROTTLE_STATUSES:
        return RefusedByDevice(f"{what} rate limited ({status}): {msg}", channel=channel,
                               target=target)
    if status < 500:
        return RefusedByDevice(f"{what} refused ({status}): {msg}", channel=channel,
                               target=target)
    return RefusedByDevice(f"{what} failed in the API ({status}): {msg}", channel=channel,
                           target=target)


def map_transport(
    exc: httpx.HTTPError, *, channel: str, target: object, what: str, sent: bool = False
) -> ChannelError:
    """The powerplane error for an httpx failure below HTTP.

    ``sent``: ``what`` is a verb whose request passed :func:`powerplane.about_to_send`.
    """
    import httpx

    kind = type(exc).__name__
    # nothing of the request left: the same for a read and a verb
    if isinstance(exc, httpx.ConnectTimeout):
        return Unreachable(f"{what}: connecting timed out", channel=channel, target=target)
    if isinstance(exc, httpx.ConnectError):
        if is_tls_failure(exc):
            return TLSVerificationFailed(f"{what}: the server's certificate did not verify",
                                         channel=channel, target=target)
        return Unreachable(f"{what}: cannot reach the endpoint ({kind})", channel=channel,
                           target=target)
    if isinstance(exc, httpx.ProxyError):
        return Unreachable(f"{what}: the proxy refused ({kind})", channel=channel,
                           target=target)
    if isinstance(exc, httpx.PoolTimeout):
        return ChannelTimeout(f"{what}: no connection free in time; nothing was sent",
                              channel=channel, target=target)
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError,
                        httpx.TooManyRedirects, httpx.HTTPStatusError)):
        return ProtocolError(f"{what}: {kind}", channel=channel, target=target)
    # the request may have left (all or part of it)
    if sent:
        return OutcomeUnknown(f"{what}: {_httpx_happened(exc)} ({kind}); read the state "
                              "before sending it again", channel=channel, target=target)
    if isinstance(exc, httpx.TimeoutException):
        return ChannelTimeout(f"{what}: no answer in time ({kind})", channel=channel,
                              target=target)
    if isinstance(exc, httpx.NetworkError):
        return Unreachable(f"{what}: the connection to the endpoint failed ({kind})",
                           channel=channel, target=target)
    return ProtocolError(f"{what}: {kind}", channel=channel, target=target)


def _httpx_happened(exc: BaseException) -> str:
    import httpx

    if isinstance(exc, httpx.ReadTimeout):
        return "no answer came in time after the request was sent"
    if isinstance(exc, (httpx.WriteTimeout, httpx.WriteError)):
        return "writing the request failed part-way"
    if isinstance(exc, httpx.DecodingError):
        return "the answer could not be read"
    return "the connection dropped after the request may have been written"


# -- both ------------------------------------------------------------------------------------


def map_error(
    exc: BaseException, *, channel: str, target: object, operation: str, sent: bool = False
) -> ChannelError:
    """The powerplane error for any failure of either library during ``operation``.

    ``sent``: the operation is a verb whose request passed :func:`powerplane.about_to_send`.
    A :class:`~powerplane.ChannelError` is returned as it is; an exception of neither library
    is a :class:`~powerplane.ProtocolError` naming its class (never its text, which might
    hold a value from the request).
    """
    if isinstance(exc, ChannelError):
        return exc
    if "botocore.exceptions" in sys.modules:
        from botocore import exceptions as bce

        if isinstance(exc, bce.ClientError):
            return map_client_error(exc, channel=channel, target=target, operation=operation)
        if isinstance(exc, bce.BotoCoreError):
            return map_botocore_error(exc, channel=channel, target=target,
                                      operation=operation, sent=sent)
    if "httpx" in sys.modules:
        import httpx

        if isinstance(exc, httpx.HTTPError):
            return map_transport(exc, channel=channel, target=target, what=operation,
                                 sent=sent)
    return ProtocolError(f"{operation}: {type(exc).__name__}", channel=channel, target=target)
