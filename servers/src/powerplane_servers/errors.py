"""Every error as a problem document (RFC 9457): the application's exception handlers,
:data:`EXCEPTION_HANDLERS`, keyed by the exception each answers."""

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from powerplane import PowerplaneError
from powerplane_servers.problems import ProblemError, from_error, problem_response

__all__ = ["EXCEPTION_HANDLERS"]

log = logging.getLogger("powerplane.servers")


async def on_problem(request: Request, exc: ProblemError) -> Response:
    return problem_response(exc, request.url.path)


async def on_powerplane(request: Request, exc: PowerplaneError) -> Response:
    return problem_response(from_error(exc), request.url.path)


async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
    problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                for e in exc.errors()]
    return problem_response(ProblemError(422, "Invalid request", "; ".join(problems)[:2000],
                                         "usage", error="UsageError",
                                         problems=problems[:50]), request.url.path)


async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
    return problem_response(ProblemError(exc.status_code, str(exc.detail), str(exc.detail),
                                         "usage", error="UsageError",
                                         headers=dict(exc.headers or {})), request.url.path)


async def on_crash(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return problem_response(ProblemError(500, "Internal error",
                                         "the server failed; the error is in its log",
                                         "channel", error="InternalError", exit_code=1),
                            request.url.path)


EXCEPTION_HANDLERS: dict[int | type[Exception],
                         Callable[[Request, Any], Coroutine[Any, Any, Response]]] = {
    ProblemError: on_problem,
    PowerplaneError: on_powerplane,
    RequestValidationError: on_invalid,
    StarletteHTTPException: on_http,
    Exception: on_crash,
}
"""Each exception the application answers, with its handler (FastAPI's
``exception_handlers``)."""
