"""Mapping the transports' exceptions into powerplane's hierarchy.

Two transports raise here: the direct client of :mod:`powerplane_redfish.connection`
(basic authentication over the standard library's ``http.client``), whose own classes are
defined below, and sushy (session and auto authentication), which raises sushy's and
requests' classes. sushy, requests and urllib3 are never imported by this module: a class
of theirs is matched only once its module is loaded (an exception of a library that was
never imported cannot occur), so a process that uses the direct client imports neither.

HTTP status codes follow core's one rule (``powerplane.status_error``): 401 and 403 are
``AuthenticationFailed``; every other 4xx and every 5xx is ``RefusedByDevice`` with the
BMC's own words (the BMC answered, so it is not ``Unreachable``); a reset POST dropped or
timed out after it was written is ``OutcomeUnknown``. sushy raises one ``HTTPError``
subclass per status (``BadRequestError`` 400, ``AccessError`` 401/403,
``ResourceNotFoundError`` 404, ``NotAcceptableError`` 406, ``ServerSideError`` 5xx,
``HTTPError`` for the rest); the table below maps them by their base class.

::

    sushy.exceptions.AccessError (401/403)       -> AuthenticationFailed
    sushy.exceptions.MissingXAuthToken           -> ProtocolError
    sushy.exceptions.HTTPError (other 4xx/5xx)   -> RefusedByDevice (with @Message.ExtendedInfo)
    sushy.exceptions.ConnectionError, caused by
        requests SSLError                        -> TLSVerificationFailed
        requests ConnectTimeout                  -> Unreachable (no answer from the network)
        requests ReadTimeout / Timeout           -> ChannelTimeout
        requests ConnectionError                 -> Unreachable
        anything else                            -> ProtocolError
    requests exceptions met directly             -> as above
    other sushy.exceptions.SushyError            -> ProtocolError
    ValueError (a body that is not JSON, or not
        the declared resource: InvalidResource)  -> ProtocolError
    OSError (socket, file)                       -> Unreachable (ssl errors: TLS, as above)

    the direct client's own classes:
    HTTPStatusError 401/403                      -> AuthenticationFailed
    HTTPStatusError (other non-2xx)              -> RefusedByDevice (with @Message.ExtendedInfo)
    ConnectFailed (TCP connect; an OSError)      -> Unreachable (a timeout: no answer from
                                                    the network within the connect timeout)
    HandshakeFailed (TLS setup; an OSError)      -> TLSVerificationFailed (a timeout:
                                                    ChannelTimeout)
    http.client.HTTPException (a malformed
        answer: bad status line, short body)     -> ProtocolError

A reset POST that failed after it may have left (anything but no connection, a connect
timeout or a failed TLS handshake: ``ConnectFailed``, ``HandshakeFailed``, see
:func:`request_may_have_left`) is
:class:`~powerplane.OutcomeUnknown` instead: the BMC may have applied it.
:func:`connection_dropped` tells a connection the BMC closed or reset (``RemoteDisconnected``,
``ConnectionResetError``, ``BrokenPipeError``), after which a GET is retried once.

:func:`handled` lists the base classes :func:`map_error` accepts (sushy's ``SushyError``
among them once sushy is loaded); a test proves every subclass of them maps to a
:class:`~powerplane.ChannelError`. No message carries a secret:
the password is scrubbed from every text taken from the device or a library.
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
from collections.abc import Callable, Iterable
from typing import Any

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

__all__ = [
    "ConnectFailed",
    "HTTPStatusError",
    "HandshakeFailed",
    "connection_dropped",
    "handled",
    "map_error",
    "request_may_have_left",
]


class ConnectFailed(OSError):
    """The direct client could not open the TCP connection (refused, unreachable, a name
    that does not resolve, no answer within ``timeouts.connect_s``): nothing was sent.
    The socket's error is its ``__cause__``."""


class HandshakeFailed(OSError):
    """The TCP connection opened but TLS could not be set up (a certificate that does not
    verify, a failed or timed-out handshake, a CA bundle that cannot be loaded): nothing
    was sent. The ssl or socket error is its ``__cause__``."""


class HTTPStatusError(Exception):
    """The BMC answered a request of the direct client with a status other than 2xx.

    ``detail`` and ``extended_info`` are the Redfish error body's ``error.message`` and
    ``error.@Message.ExtendedInfo``, where the body has them (the device's words; the text
    of the exception itself never carries them).
    """

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        self.method = method
        self.path = path
        self.status_code = status
        self.detail: str | None = None
        self.extended_info: Any = None
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict):
            message = error.get("message")
            self.detail = message if isinstance(message, str) else None
            self.extended_info = error.get("@Message.ExtendedInfo")
        super().__init__(f"HTTP {method} {path} answered {status}")


_OURS: tuple[type[BaseException], ...] = (
    OSError,  # requests' RequestException is an OSError too
    ValueError,
    http.client.HTTPException,
    HTTPStatusError,
)


def _classes(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """Those classes of ``module`` if it is loaded, else none (nothing of it can be raised)."""
    found = sys.modules.get(module)
    return tuple(getattr(found, name) for name in names) if found is not None else ()


def handled() -> tuple[type[BaseException], ...]:
    """The exception classes (and their subclasses) a channel call maps; others escape to
    the host: OSError, ValueError, ``http.client.HTTPException``, :class:`HTTPStatusError`,
    and sushy's ``SushyError`` once sushy is loaded."""
    return _OURS + _classes("sushy.exceptions", "SushyError")


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _links(exc: BaseException) -> list[BaseException]:
    """:func:`_chain`, plus the exceptions carried in their ``args`` (urllib3 and requests
    wrap the socket error as an argument: ``ProtocolError('Connection aborted.', err)``)."""
    found: list[BaseException] = []
    todo = [exc]
    while todo and len(found) < 64:
        for link in _chain(todo.pop()):
            if link in found:
                continue
            found.append(link)
            todo.extend(a for a in link.args if isinstance(a, BaseException))
            reason = getattr(link, "reason", None)
            if isinstance(reason, BaseException):
                todo.append(reason)
    return found


_DROPPED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
"""The BMC closed or reset the connection (``http.client.RemoteDisconnected`` is a
``ConnectionResetError``)."""

def _never_left_classes() -> tuple[type[BaseException], ...]:
    """Failures before a request is written: no connection."""
    return (
        ConnectFailed,
        HandshakeFailed,
        ConnectionRefusedError,
        # refused, unreachable, DNS (NameResolutionError)
        *_classes("urllib3.exceptions", "NewConnectionError", "ConnectTimeoutError"),
        *_classes("requests.exceptions", "ConnectTimeout"),
    )

_HANDSHAKE_WORDS = ("handshake", "WRONG_VERSION_NUMBER", "wrong version number")
"""Words of a TLS error that can only happen while the TLS session is set up (beside a
certificate that did not verify: :func:`powerplane.is_tls_failure`)."""


def _never_left(link: BaseException) -> bool:
    if isinstance(link, _never_left_classes()):
        return True
    if isinstance(link, (ssl.SSLError, *_classes("requests.exceptions", "SSLError"))):
        text = str(link)
        return is_tls_failure(link) or any(word in text for word in _HANDSHAKE_WORDS)
    return False


def connection_dropped(exc: BaseException) -> bool:
    """Whether ``exc`` says the BMC closed or reset the connection without answering."""
    return any(isinstance(link, _DROPPED) for link in _links(exc))


def request_may_have_left(exc: BaseException) -> bool:
    """Whether a request that failed with ``exc`` may have reached the BMC.

    False only for failures that happen before a request is written (the connection was
    refused or timed out, the name did not resolve, the TLS certificate or handshake
    failed) and for an
    answer of the BMC (an HTTP error is the device's word that it refused). Everything
    else (a read timeout, a connection closed or reset after the request was written)
    may have left.
    """
    links = _links(exc)
    answered: tuple[type[BaseException], ...] = (
        HTTPStatusError, *_classes("sushy.exceptions", "HTTPError"))
    if any(isinstance(link, answered) for link in links):
        return False
    return not any(_never_left(link) for link in links)


def _device_words(exc: Any) -> str:
    """The BMC's own words: every ``@Message.ExtendedInfo`` message, else its error message."""
    info = exc.extended_info
    messages: list[str] = []
    if isinstance(info, dict):
        info = [info]
    if isinstance(info, list):
        for item in info:
            if isinstance(item, dict):
                text = item.get("Message") or item.get("MessageId")
                if isinstance(text, str) and text:
                    messages.append(text)
    if not messages and isinstance(exc.detail, str) and exc.detail:
        messages.append(exc.detail)
    return "; ".join(messages) or "no message"


def _transport(
    exc: BaseException, verify: bool | str
) -> tuple[type[ChannelError], str] | None:
    """Classify a transport failure found anywhere in ``exc``'s chain."""
    req_ssl = _classes("requests.exceptions", "SSLError")
    req_connect_timeout = _classes("requests.exceptions", "ConnectTimeout")
    req_timeout = _classes("requests.exceptions", "Timeout")
    req_connection = _classes("requests.exceptions", "ConnectionError")
    for link in _chain(exc):
        if isinstance(link, ConnectFailed):
            if isinstance(link.__cause__, TimeoutError):
                return Unreachable, "no answer from the network within the connect timeout"
            return Unreachable, _connection_words(link.__cause__ or link)
        if isinstance(link, HandshakeFailed) and not isinstance(link.__cause__, ssl.SSLError):
            if isinstance(link.__cause__, TimeoutError):
                return ChannelTimeout, "the BMC did not complete the TLS handshake in time"
            return TLSVerificationFailed, "TLS handshake with the BMC failed"
        if isinstance(link, (ssl.SSLError, *req_ssl)):
            text = str(link)
            if is_tls_failure(link):
                where = f"the CA bundle {verify}" if isinstance(verify, str) else "the system CAs"
                return TLSVerificationFailed, (
                    f"the BMC's TLS certificate did not verify against {where}"
                )
            if "timed out" in text:
                return ChannelTimeout, "the BMC did not complete the TLS handshake in time"
            return TLSVerificationFailed, "TLS handshake with the BMC failed"
        if isinstance(link, req_connect_timeout):
            return Unreachable, "no answer from the network within the connect timeout"
        if isinstance(link, (TimeoutError, *req_timeout)):
            return ChannelTimeout, "the BMC accepted the connection but did not answer in time"
        if isinstance(link, (ConnectionError, *req_connection)):
            return Unreachable, _connection_words(link)
    return None


def _connection_words(exc: BaseException) -> str:
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the BMC closed the connection without answering"
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "NameResolution" in text or "getaddrinfo" in text:
        return "the BMC's host name does not resolve"
    if "RemoteDisconnected" in text or "Connection aborted" in text or "reset by peer" in text:
        return "the BMC closed the connection without answering"
    return "cannot connect to the BMC"


def _sushy_status(
    exc: BaseException, make: Callable[[type[ChannelError], str], ChannelError]
) -> ChannelError | None:
    """sushy's answers of the BMC (its HTTPError classes, its missing session token)."""
    sushy_exc = sys.modules.get("sushy.exceptions")
    if sushy_exc is None:
        return None
    if isinstance(exc, sushy_exc.AccessError):
        return make(
            AuthenticationFailed,
            f"the BMC rejected the credentials (HTTP {exc.status_code}): {_device_words(exc)}",
        )
    if isinstance(exc, sushy_exc.MissingXAuthToken):
        return make(ProtocolError, "the BMC created a session but returned no X-Auth-Token")
    if isinstance(exc, sushy_exc.HTTPError):
        return make(
            RefusedByDevice,
            f"the BMC refused the request (HTTP {exc.status_code}): {_device_words(exc)}",
        )
    return None


def map_error(
    exc: BaseException,
    *,
    channel: str,
    target: object,
    action: str | None = None,
    verify: bool | str = True,
    secrets: Iterable[str] = (),
) -> ChannelError:
    """The :class:`~powerplane.ChannelError` for ``exc`` (raise it ``from exc``).

    ``action`` names the request when it was a reset (``ResetType=ForceOff``), so a refusal
    says what was refused.
    """
    secrets = tuple(secrets)
    what = f"{action}: " if action else ""

    def make(cls: type[ChannelError], message: str) -> ChannelError:
        return cls(_scrub(f"{what}{message}", secrets), channel=channel, target=target)

    if isinstance(exc, ChannelError):
        return exc
    if isinstance(exc, HTTPStatusError):
        code = exc.status_code  # core's one rule; any other non-2xx the BMC's refusal
        cls = status_error(code) if 400 <= code <= 599 else RefusedByDevice
        words = ("the BMC rejected the credentials" if cls is AuthenticationFailed
                 else "the BMC refused the request")
        return make(cls, f"{words} (HTTP {exc.status_code}): {_device_words(exc)}")
    sushy_mapped = _sushy_status(exc, make)
    if sushy_mapped is not None:
        return sushy_mapped
    found = _transport(exc, verify)
    if found is not None:
        return make(*found)
    if isinstance(exc, (json.JSONDecodeError,
                        *_classes("requests.exceptions", "JSONDecodeError"))):
        return make(ProtocolError, "the BMC answered with a body that is not valid JSON")
    if isinstance(exc, ValueError):
        return make(ProtocolError, f"unexpected answer from the BMC: {exc}")
    if isinstance(exc, http.client.HTTPException):
        return make(ProtocolError, f"malformed HTTP answer from the BMC: {type(exc).__name__}")
    if isinstance(exc, _classes("sushy.exceptions", "SushyError")):
        return make(ProtocolError, f"unexpected answer from the BMC: {exc}")
    if isinstance(exc, _classes("requests.exceptions", "RequestException")):
        return make(ProtocolError, f"HTTP request failed: {type(exc).__name__}")
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        return make(Unreachable, f"I/O error talking to the BMC: {reason}")
    return make(ProtocolError, f"unexpected {type(exc).__name__}")
