"""RFC 9457 problem details: every error of the API is one, with the CLI's cause.

``cause`` is the word the CLI's JSON carries beside its exit code: ``rule`` (the power rule
withholds the verb), ``guard`` (a safety rule: below quorum, virtual node, node under
maintenance), ``policy`` (the caller may not take the action, or is not authenticated),
``channel`` (a channel or the store failed, or the outcome is unknown), ``usage`` (bad
input: an unknown node, a ceremony incomplete, a body too large, too many requests).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from powerplane import (
    AuditNotRecorded,
    ChannelError,
    ConfigError,
    NotOffered,
    NotSupported,
    PolicyDenied,
    PowerplaneError,
    UnknownNode,
)
from powerplane.lifecycle import (
    AlreadyActive,
    CeremonyRequired,
    GuardRefused,
    MaintenanceRefused,
    NotFound,
)

__all__ = ["PROBLEM_JSON", "Problem", "ProblemError", "from_error", "problem_response"]

PROBLEM_JSON = "application/problem+json"


class Problem(BaseModel):
    """A problem document (RFC 9457) with powerplane's members."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str = ""
    instance: str | None = None
    cause: str = Field(description="rule | guard | policy | channel | usage")
    error: str = Field("", description="the error class (as the CLI's JSON names it)")
    exitCode: int = Field(2, description="the CLI's exit code for the same error")
    problems: list[str] | None = None
    quorum: dict[str, Any] | None = Field(
        None, description="members, ready, quorum, margin of a quorum refusal")


class ProblemError(Exception):
    """An error the API answers with a problem document."""

    def __init__(self, status: int, title: str, detail: str, cause: str, *,
                 error: str = "", exit_code: int = 2, headers: dict[str, str] | None = None,
                 problems: list[str] | None = None, quorum: dict[str, Any] | None = None,
                 ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.cause = cause
        self.error = error
        self.exit_code = exit_code
        self.headers = headers or {}
        self.problems = problems
        self.quorum = quorum

    def document(self, instance: str | None = None) -> Problem:
        return Problem(title=self.title, status=self.status, detail=self.detail,
                       instance=instance, cause=self.cause, error=self.error,
                       exitCode=self.exit_code, problems=self.problems, quorum=self.quorum)


def _quorum_of(exc: BaseException) -> dict[str, Any] | None:
    numbers = getattr(exc, "numbers", None)
    dump = getattr(numbers, "model_dump", None)
    if callable(dump):
        found = dump()
        return found if isinstance(found, dict) else None
    return None


def from_error(exc: PowerplaneError) -> ProblemError:
    """The problem a powerplane error is, by its class (the CLI's exit code and cause)."""
    name = type(exc).__name__
    code = int(getattr(exc, "exit_code", 1))
    text = str(exc)
    if isinstance(exc, PolicyDenied):
        return ProblemError(403, "Forbidden by policy", text, "policy", error=name,
                            exit_code=code)
    if isinstance(exc, MaintenanceRefused | GuardRefused):
        return ProblemError(409, "Refused by a safety rule", text, "guard", error=name,
                            exit_code=code, quorum=_quorum_of(exc))
    if isinstance(exc, NotOffered | NotSupported):
        return ProblemError(409, "Withheld by the power rule", text, "rule", error=name,
                            exit_code=code)
    if isinstance(exc, CeremonyRequired):
        return ProblemError(422, "Ceremony incomplete", text, "usage", error=name,
                            exit_code=code, problems=list(exc.problems))
    if isinstance(exc, UnknownNode):  # the name asked for, never the deployment's names
        return ProblemError(404, "Not found", f"no server named {exc.node[:253]!r}", "usage",
                            error="NotFound", exit_code=code)
    if isinstance(exc, AlreadyActive):
        return ProblemError(409, "Node under maintenance", text, "guard", error=name,
                            exit_code=code)
    if isinstance(exc, NotFound):
        return ProblemError(404, "Not found", text, "usage", error=name, exit_code=code)
    if isinstance(exc, ConfigError):
        return ProblemError(500, "Deployment configuration problem", text, "usage",
                            error=name, exit_code=code)
    if isinstance(exc, AuditNotRecorded):
        return ProblemError(503, "Audit record not made durable: nothing was done", text,
                            "channel", error=name, exit_code=code)
    if isinstance(exc, ChannelError):
        return ProblemError(502, "Channel failure", text, "channel", error=name,
                            exit_code=code)
    cause = getattr(exc, "cause", None)
    if cause in ("rule", "guard", "policy"):
        return ProblemError(409, "Refused", text, str(cause), error=name, exit_code=code)
    if code == 2:
        return ProblemError(400, "Bad request", text, "usage", error=name, exit_code=code)
    return ProblemError(503, "Could not be done now", text, "channel", error=name,
                        exit_code=code)


def problem_response(err: ProblemError, instance: str | None = None) -> JSONResponse:
    doc = err.document(instance).model_dump(exclude_none=True)
    return JSONResponse(doc, status_code=err.status, media_type=PROBLEM_JSON,
                        headers=err.headers)
