"""HTTP outcomes of Keystone and the Compute API mapped into powerplane's error tree.

::

    Compute / Keystone HTTP status
    ├── 400                    -> RefusedByDevice (the API's message)
    ├── 401 (after one renewal), 403 -> AuthenticationFailed
    ├── 404                    -> RefusedByDevice naming the server id
    ├── 409                    -> RefusedByDevice with the API's message (the conflict)
    ├── 413, 429               -> RefusedByDevice (rate limited, after any retries)
    ├── 502, 503, 504          -> Unreachable
    ├── other 5xx              -> RefusedByDevice (the API failed)
    └── anything unexpected    -> ProtocolError
    httpx transport errors
    ├── ConnectTimeout, ConnectError, other NetworkError -> Unreachable
    ├── ConnectError from a failed certificate check   -> TLSVerificationFailed
    ├── ReadTimeout, WriteTimeout, PoolTimeout         -> ChannelTimeout
    └── RemoteProtocolError, DecodingError, ...        -> ProtocolError

Error bodies follow the API references: Nova answers ``{"conflictingRequest":
{"code": 409, "message": "..."}}`` (the key names the fault), Keystone answers
``{"error": {"code": 401, "title": "Unauthorized", "message": "..."}}``. Only the
message is quoted; request bodies (which hold secrets) never are.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from powerplane.errors import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)

__all__ = ["THROTTLE_STATUSES", "api_message", "map_status", "map_transport"]

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
    if status == 404:
        return RefusedByDevice(
            f"server {target} does not exist ({what}: {msg})", channel=channel, target=target
        )
    if status == 409:
        return RefusedByDevice(msg, channel=channel, target=target)
    if status == 400:
        return RefusedByDevice(f"{what} rejected as a bad request: {msg}", channel=channel,
                               target=target)
    if status == 401:
        return AuthenticationFailed(f"{what}: {msg}", channel=channel, target=target)
    if status == 403:
        return AuthenticationFailed(f"{what} forbidden by policy: {msg}", channel=channel,
                                    target=target)
    if status in THROTTLE_STATUSES:
        return RefusedByDevice(f"{what} rate limited ({status}): {msg}", channel=channel,
                               target=target)
    if status in (502, 503, 504):
        return Unreachable(f"{what}: the API is unavailable ({status}): {msg}",
                           channel=channel, target=target)
    if status >= 500:
        return RefusedByDevice(f"{what} failed in the API ({status}): {msg}", channel=channel,
                               target=target)
    return ProtocolError(f"{what}: unexpected HTTP {status}", channel=channel, target=target)


def map_transport(
    exc: httpx.HTTPError, *, channel: str, target: object, what: str
) -> ChannelError:
    """The powerplane error for an httpx failure below HTTP."""
    kind = type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return Unreachable(f"{what}: connecting timed out", channel=channel, target=target)
    if isinstance(exc, httpx.TimeoutException):
        return ChannelTimeout(f"{what}: no answer in time ({kind})", channel=channel,
                              target=target)
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return TLSVerificationFailed(f"{what}: the server's certificate did not verify",
                                     channel=channel, target=target)
    if isinstance(exc, httpx.NetworkError):
        return Unreachable(f"{what}: cannot reach the endpoint ({kind})", channel=channel,
                           target=target)
    return ProtocolError(f"{what}: {kind}", channel=channel, target=target)
