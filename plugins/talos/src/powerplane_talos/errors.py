"""How the talos channel maps grpclib, ssl and socket failures into powerplane's errors.

The mapping table (:func:`map_error`; the talosctl transport reads the same gRPC codes
from talosctl's stderr, :func:`powerplane_talos.talosctl_transport.map_stderr`)::

    grpclib GRPCError UNAVAILABLE             -> Unreachable
    grpclib GRPCError UNAUTHENTICATED         -> AuthenticationFailed
    grpclib GRPCError PERMISSION_DENIED       -> AuthenticationFailed ("permission denied")
    grpclib GRPCError DEADLINE_EXCEEDED       -> ChannelTimeout
    grpclib GRPCError (any other status)      -> RefusedByDevice (with Talos's words)
    HTTP :status other than 200 (grpclib's    -> core's HTTP status rule (status_error):
      "Received :status = 'N'", a proxy or       401, 403 -> AuthenticationFailed;
      a server in front of Talos answered)       other 4xx, 5xx -> RefusedByDevice
    TimeoutError (the call's deadline)        -> ChannelTimeout
    a certificate that did not verify         -> TLSVerificationFailed
      (core's test, powerplane.is_tls_failure)
    ssl.SSLError, alert from the server       -> AuthenticationFailed (client cert rejected)
    ssl.SSLError (other)                      -> TLSVerificationFailed
    ConnectionRefusedError, OSError           -> Unreachable
    connection lost                           -> Unreachable (the transport first probes the
                                                 handshake: a TLS alert found that way maps
                                                 as ssl.SSLError above)
    HTTP/2 protocol error                     -> ProtocolError
    anything else                             -> ProtocolError

    a verb whose request message may have     -> OutcomeUnknown (the transport decides:
      left, then a deadline or a lost            an answer from Talos, any status but
      connection                                 DEADLINE_EXCEEDED, is not unknown)

The HTTP status rule is core's (:mod:`powerplane` errors): grpclib turns a non-200
``:status`` into a gRPC status of its own choosing (``503`` into ``UNAVAILABLE``), but
something answered, so it is never ``Unreachable``: the status decides.

Messages name the endpoint and the cause; they never hold key material.
"""

from __future__ import annotations

import re
import ssl

import h2.exceptions
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.exceptions import ProtocolError as GrpclibProtocolError

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    is_tls_failure,
    status_error,
)

__all__ = ["CERT_ALERTS", "map_error"]

CERT_ALERTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "certificate required: no client certificate was "
    "presented",
    "TLSV1_ALERT_UNKNOWN_CA": "unknown certificate authority: the client certificate was not "
    "issued by the endpoint's CA",
    "SSLV3_ALERT_BAD_CERTIFICATE": "bad certificate: the endpoint rejected the client "
    "certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "certificate unknown: the endpoint rejected the client "
    "certificate",
    "TLSV1_ALERT_DECRYPT_ERROR": "decrypt error: the client certificate's signature did not "
    "verify",
}
"""TLS alerts a server sends when it rejects the client certificate, in words."""


_HTTP_STATUS = re.compile(r"Received :status = '(\d{3})'")
"""grpclib's message for an HTTP response that was not gRPC's ``200``."""


def _http_status(status: int, endpoint: str, kw: dict[str, str]) -> ChannelError:
    """Core's HTTP status rule for an answer with HTTP status ``status`` (any other than
    400 to 599 refused too: something answered, and not in gRPC)."""
    words = f"{endpoint} answered HTTP {status} instead of a gRPC response"
    cls = status_error(status) if 400 <= status <= 599 else RefusedByDevice
    return cls(words, **kw)


def map_error(
    exc: BaseException,
    *,
    channel: str,
    target: str,
    endpoint: str,
    timeout: float,
) -> ChannelError:
    """The powerplane error for ``exc`` (raise it ``from exc``)."""
    kw = {"channel": channel, "target": target}
    if isinstance(exc, ChannelError):
        return exc
    if isinstance(exc, GRPCError):
        words = exc.message or exc.status.name
        http = _HTTP_STATUS.fullmatch(exc.message or "")
        if http is not None:
            return _http_status(int(http.group(1)), endpoint, kw)
        if exc.status is Status.UNAVAILABLE:
            return Unreachable(f"node unavailable via {endpoint}: {words}", **kw)
        if exc.status is Status.UNAUTHENTICATED:
            return AuthenticationFailed(f"unauthenticated: {words}", **kw)
        if exc.status is Status.PERMISSION_DENIED:
            return AuthenticationFailed(
                f"permission denied: {words} (the client certificate's role may not do this)",
                **kw,
            )
        if exc.status is Status.DEADLINE_EXCEEDED:
            return ChannelTimeout(f"deadline exceeded at {endpoint}: {words}", **kw)
        return RefusedByDevice(f"Talos answered {exc.status.name}: {words}", **kw)
    if isinstance(exc, TimeoutError):
        return ChannelTimeout(f"no answer from {endpoint} within {timeout:g} s", **kw)
    if isinstance(exc, ssl.SSLError) and is_tls_failure(exc):
        return TLSVerificationFailed(
            f"the certificate of {endpoint} did not verify against the configured CA "
            f"({getattr(exc, 'verify_message', None) or getattr(exc, 'reason', None) or exc})",
            **kw,
        )
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "reason", None) or ""
        alert = CERT_ALERTS.get(reason)
        if alert is not None:
            return AuthenticationFailed(
                f"{endpoint} rejected the client certificate (remote error: tls: {alert})", **kw
            )
        return TLSVerificationFailed(
            f"TLS handshake with {endpoint} failed ({reason or exc})", **kw
        )
    if isinstance(exc, ConnectionRefusedError):
        return Unreachable(f"connection refused by {endpoint}", **kw)
    if isinstance(exc, ConnectionResetError | StreamTerminatedError | BrokenPipeError):
        return Unreachable(f"the connection to {endpoint} was lost ({exc})", **kw)
    if isinstance(exc, OSError):
        return Unreachable(f"cannot reach {endpoint}: {exc.strerror or type(exc).__name__}", **kw)
    if isinstance(exc, GrpclibProtocolError | h2.exceptions.ProtocolError):
        return ProtocolError(f"HTTP/2 protocol error from {endpoint}: {exc}", **kw)
    return ProtocolError(
        f"unexpected {type(exc).__module__}.{type(exc).__name__} from {endpoint}", **kw
    )
