"""Mapping the Kubernetes API's answers and the transport's failures onto core's port errors.

One table, by HTTP status (the API server's ``Status.code``) or by transport failure::

    no connection, connect/read timeout, a dropped connection     -> TemporaryPortError
    408 Request Timeout, 409 Conflict, 429 Too Many Requests,
        500, 502, 503, 504 (and every other 5xx)                  -> TemporaryPortError
    400, 401, 403, 404, 405, 406, 410, 415, 422 (every other 4xx) -> PermanentPortError

A temporary error is tried again at the next reconcile pass; a permanent one fails the
maintenance with its message (``powerplane.lifecycle.reconciler``). Two answers are not
errors of the port and are read by the callers before this table applies: an eviction's
429 naming a PodDisruptionBudget (the drain reports "blocked by PDB <name>") and a 404 on
Longhorn's resources (nothing to evacuate).

Every message names what was attempted, the status and reason, and the API server's own
words where its body was read: a watch's answer is a stream, and the client raises on its
status before reading it (then closes it), so its status and reason phrase are the whole
answer (the body is never read here: reading an unread stream raises). The API server's
messages carry no credentials, and the transport's text is only the exception's class and
message (the URL of the API server at most, never a token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2
from lightkube import ApiError

from powerplane.lifecycle import PermanentPortError, PortError, TemporaryPortError

__all__ = [
    "TEMPORARY_STATUSES",
    "ApiAnswer",
    "answer_of",
    "is_not_found",
    "map_error",
]

TEMPORARY_STATUSES = frozenset({408, 409, 429})
"""The 4xx statuses that may pass by themselves; every 5xx may pass too."""


@dataclass(frozen=True)
class ApiAnswer:
    """An error answer of the API server, whether it came as a ``Status`` object or as text."""

    code: int
    reason: str = ""
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes``: each with ``reason`` (the cause type), ``message``, ``field``."""
        found = self.details.get("causes") or []
        return [c for c in found if isinstance(c, dict)]


def answer_of(exc: BaseException) -> ApiAnswer | None:
    """The API server's answer inside ``exc`` (None: no answer came, a transport failure)."""
    if isinstance(exc, ApiError):
        status = exc.status
        details: dict[str, Any] = {}
        body = _json_body(exc.response) if exc.response is not None else None
        if isinstance(body, dict) and isinstance(body.get("details"), dict):
            details = body["details"]
        code = status.code or (exc.response.status_code if exc.response is not None else 0)
        return ApiAnswer(
            code=int(code),
            reason=str(status.reason or ""),
            message=str(status.message or ""),
            details=details,
        )
    if isinstance(exc, httpx2.HTTPStatusError):
        # not JSON: the API server's mux answers an unknown path with "404 page not found"
        reason = exc.response.reason_phrase
        read = _text(exc.response)
        if read is None:  # a stream never read (a watch): its status is the answer
            return ApiAnswer(exc.response.status_code, reason)
        text = read.strip()
        try:
            body = json.loads(text)
        except ValueError:
            return ApiAnswer(exc.response.status_code, reason, text[:200])
        if isinstance(body, dict):
            found = body.get("details")
            return ApiAnswer(
                exc.response.status_code,
                str(body.get("reason") or reason),
                str(body.get("message") or "")[:500],
                found if isinstance(found, dict) else {},
            )
        return ApiAnswer(exc.response.status_code, reason, text[:200])
    return None


def _text(response: httpx2.Response) -> str | None:
    """The body of an answer that was read (None: a stream not read, or closed unread)."""
    try:
        return response.text
    except httpx2.StreamError:  # ResponseNotRead among them
        return None


def _json_body(response: httpx2.Response) -> Any:
    """The JSON body of an answer that was read (None: unread, or not JSON)."""
    text = _text(response)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def is_not_found(exc: BaseException) -> bool:
    """Whether the API server answered 404 (an object, a resource or a whole API group absent)."""
    answer = answer_of(exc)
    return answer is not None and answer.code == 404


def map_error(exc: BaseException, what: str) -> PortError:
    """The port error for ``exc``, raised while doing ``what`` (a phrase: "cordoning node n1")."""
    answer = answer_of(exc)
    if answer is not None:
        words = f": {answer.message}" if answer.message else ""
        text = f"{what}: HTTP {answer.code} {answer.reason}{words}".rstrip()
        if answer.code in TEMPORARY_STATUSES or answer.code >= 500:
            return TemporaryPortError(text)
        return PermanentPortError(text)
    if isinstance(exc, httpx2.TimeoutException):
        return TemporaryPortError(f"{what}: the Kubernetes API did not answer in time "
                                  f"({type(exc).__name__})")
    if isinstance(exc, (httpx2.TransportError, OSError)):
        return TemporaryPortError(f"{what}: the Kubernetes API cannot be reached "
                                  f"({type(exc).__name__}: {exc})")
    if isinstance(exc, ValueError):  # an answer that is not the JSON the API defines
        return TemporaryPortError(f"{what}: the Kubernetes API's answer could not be read "
                                  f"({type(exc).__name__}: {exc})")
    return PermanentPortError(f"{what}: {type(exc).__name__}: {exc}")
