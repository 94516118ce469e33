"""The ASGI application: the API under ``/api/v1``, its OpenAPI 3.1 document at
``/api/v1/openapi.json``, the page at ``/``, and the page's login at ``/auth/``.

FastAPI (on Starlette, served by uvicorn): the bodies are pydantic models, as core's are,
and the OpenAPI document is generated from the same models the handlers validate with.

Every API request that costs work is rate-limited per identity (:mod:`.ratelimit`): reads,
pre-flight and acts take from the caller's request bucket, acts from its act bucket too;
an unauthenticated caller's bucket is its address, taken from by each failed
authentication and checked before a bearer token is verified. A refusal is 429 with
``Retry-After``, audited (its repeats folded into one record with a count). In the
auth-proxy mode every unsafe request is checked for its ``Origin`` (:mod:`.origin`).
"""


import asyncio
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import resources
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from powerplane import Identity, PowerplaneError
from powerplane.lifecycle import Action, action_for_intent, action_for_request
from powerplane_servers import models
from powerplane_servers.auth import (
    OidcVerifier,
    Unauthenticated,
    kubernetes_identity,
    proxy_identity,
)
from powerplane_servers.guards import BodyLimit, SecurityHeaders
from powerplane_servers.origin import origin_refusal
from powerplane_servers.problems import PROBLEM_JSON, Problem, ProblemError, from_error
from powerplane_servers.ratelimit import RateLimiter
from powerplane_servers.session import CSRF_HEADER, SESSION_COOKIE, Sessions, auth_routes
from powerplane_servers.settings import ServeSettings
from powerplane_servers.surface import INTENTS, Surface, maintenance_doc

__all__ = ["create_app"]

log = logging.getLogger("powerplane.servers")

_ERRORS = {code: {"model": Problem, "content": {PROBLEM_JSON: {}},
                  "description": "a problem document (RFC 9457)"}
           for code in (400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503)}

_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


def create_app(
    settings: ServeSettings,
    opener: Callable[[], AbstractAsyncContextManager[Surface]],
    *,
    tls: bool = False,
) -> FastAPI:
    """The application; ``opener`` opens the deployment's :class:`Surface` for its life."""
    verifier = OidcVerifier(settings.oidc) if settings.oidc is not None else None
    sessions = Sessions(settings)
    limits = settings.limits
    acts = RateLimiter(limits.acts_per_minute, limits.act_burst,
                       max_keys=limits.max_identities)
    work = RateLimiter(limits.requests_per_minute, limits.request_burst,
                       max_keys=limits.max_identities)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with opener() as surface:
            app.state.surface = surface
            try:
                yield
            finally:
                if verifier is not None:
                    await verifier.close()

    app = FastAPI(
        title="powerplane Servers API", version="1.0.0",
        summary="Servers, their offers and the caller's actions, maintenances with their "
                "ceremony, and the audit trail, under the deployment's authority.",
        openapi_url="/api/v1/openapi.json", docs_url=None, redoc_url=None,
        lifespan=lifespan, responses=_ERRORS,  # type: ignore[arg-type]
    )
    app.state.sessions = sessions
    app.state.verifier = verifier
    app.state.settings = settings

    def surface_of(request: Request) -> Surface:
        found = request.app.state.surface
        assert isinstance(found, Surface)
        return found

    # -- errors as problem documents ---------------------------------------------------------
    @app.exception_handler(ProblemError)
    async def on_problem(request: Request, exc: ProblemError) -> Response:
        return _problem(exc, request)

    @app.exception_handler(PowerplaneError)
    async def on_powerplane(request: Request, exc: PowerplaneError) -> Response:
        return _problem(from_error(exc), request)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                    for e in exc.errors()]
        return _problem(ProblemError(422, "Invalid request", "; ".join(problems)[:2000],
                                     "usage", error="UsageError", problems=problems[:50]),
                        request)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        return _problem(ProblemError(exc.status_code, str(exc.detail), str(exc.detail),
                                     "usage", error="UsageError",
                                     headers=dict(exc.headers or {})), request)

    @app.exception_handler(Exception)
    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _problem(ProblemError(500, "Internal error",
                                     "the server failed; the error is in its log", "channel",
                                     error="InternalError", exit_code=1), request)

    # -- who is asking -----------------------------------------------------------------------
    def address(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    async def identity(request: Request) -> Identity:
        where = address(request)
        if request.headers.get("authorization") is not None:
            # a bearer token costs its verification: not for an address over its limit
            wait = work.wait(f"unauthenticated@{where}")
            if wait > 0:
                await _refuse_unauthenticated(request, wait)
        try:
            who = await _authenticate(request)
        except Unauthenticated as exc:
            wait = work.take(f"unauthenticated@{where}")
            if wait > 0:
                await _refuse_unauthenticated(request, wait)
            node, action = await _asked(request)
            surface_of(request).record_unauthenticated(where, node, action, exc.detail)
            raise
        gateway = surface_of(request).gateway
        return gateway.identity_seen(who) if gateway is not None else who

    async def _authenticate(request: Request) -> Identity:
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the Authorization header is not a Bearer token")
            gateway = surface_of(request).gateway
            if gateway is not None:  # Kubernetes mode: the API server reviews the token
                reviewed = await kubernetes_identity(gateway, verifier, token.strip())
                request.state.credential = token.strip()  # passed through, never logged
                return reviewed
            if verifier is None:
                raise Unauthenticated("bearer tokens are not accepted (no oidc: settings)")
            claims = await verifier.verify(token.strip())
            return verifier.identity(claims)
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:
            session = sessions.get(cookie)
            if session is None:
                raise Unauthenticated("the session has ended; log in again")
            if request.method in _UNSAFE and request.headers.get(CSRF_HEADER) != session.csrf:
                raise ProblemError(403, "CSRF check failed",
                                   f"an unsafe request needs the {CSRF_HEADER} header of "
                                   "its session", "policy", error="CsrfFailed", exit_code=3)
            return session.identity
        if settings.proxy is not None:
            who = proxy_identity(settings.proxy, request.client.host if request.client
                                 else None, request.headers)
            if who is not None:
                if request.method in _UNSAFE:
                    refused = origin_refusal(request.headers, settings.proxy.allowed_origins)
                    if refused is not None:
                        node, action = await _asked(request)
                        surface_of(request).record_denial(
                            who, action, node, f"auth proxy: {refused}")
                        raise ProblemError(403, "Cross-origin request refused", refused,
                                           "policy", error="CsrfFailed", exit_code=3)
                return who
        raise Unauthenticated("no credentials: a Bearer token, a session or the auth proxy's "
                              "identity is required")

    async def _asked(request: Request) -> tuple[str, Action]:
        """The node and action a request asks for, as far as it says (its body's node and
        intent, its path's request): what its refusal is recorded under."""
        node, action = "*", Action.READ
        if request.method in _UNSAFE:
            try:
                body = json.loads(await request.body() or b"{}")
            except (ValueError, UnicodeDecodeError, RecursionError):
                body = {}
            if isinstance(body, dict):
                node = str(body.get("node") or node)[:253]
                if body.get("intent") in INTENTS:
                    action = action_for_intent(str(body["intent"]))
            for what in ("return", "abandon", "resolve"):
                if request.url.path.endswith(f"/{what}"):
                    action = action_for_request(what)
        return node, action

    def _too_many(who: str, wait: float) -> ProblemError:
        return ProblemError(429, "Too many requests",
                            f"{who} has made too many requests; try again in "
                            f"{max(1, int(wait + 0.999))} s", "usage", error="RateLimited",
                            headers={"Retry-After": str(max(1, int(wait + 0.999)))})

    async def _refuse_unauthenticated(request: Request, wait: float) -> None:
        node, action = await _asked(request)
        where = address(request)
        surface_of(request).record_unauthenticated(where, node, action,
                                                   f"not tried: {work.describe()}")
        raise _too_many(f"address {where}", wait)

    async def _limited(request: Request, who: Identity, bucket: RateLimiter) -> Identity:
        wait = bucket.take(f"{who.via}:{who.user}")
        if wait > 0:
            node, action = await _asked(request)
            surface_of(request).record_denial(who, action, node, bucket.describe())
            raise _too_many(who.user, wait)
        return who

    async def read_limit(request: Request,
                         who: Annotated[Identity, Depends(identity)]) -> Identity:
        return await _limited(request, who, work)

    Who = Annotated[Identity, Depends(read_limit)]

    async def act_limit(request: Request, who: Who) -> Identity:
        return await _limited(request, who, acts)

    Actor = Annotated[Identity, Depends(act_limit)]

    # -- the API -----------------------------------------------------------------------------
    @app.get("/api/v1/whoami", response_model=models.Whoami, tags=["identity"])
    async def whoami(request: Request, who: Who) -> models.Whoami:
        """The authenticated identity (and the session's CSRF token, for the page)."""
        cookie = request.cookies.get(SESSION_COOKIE)
        session = sessions.get(cookie) if cookie else None
        return models.Whoami(user=who.user, groups=list(who.groups), via=who.via,
                             csrfToken=session.csrf if session is not None else None)

    @app.get("/api/v1/servers", response_model=models.ServerPage, tags=["servers"])
    async def servers(
        request: Request, who: Who,
        site: Annotated[str | None, Query(max_length=253)] = None,
        label: Annotated[list[str] | None, Query(
            description="key=value, repeatable (all must match)")] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> Response:
        """The servers this caller may read, with their offers and the caller's actions.
        Never reads power: offers come from discovery, phases from the store."""
        limit = min(limit, settings.limits.page_size_max)
        labels: dict[str, str] = {}
        for item in label or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ProblemError(422, "Invalid label filter",
                                   f"label filter {item!r} is not key=value", "usage",
                                   error="UsageError")
            labels[key] = value
        surface = surface_of(request)
        items, total = await surface.servers(who, site=site, labels=labels, offset=offset,
                                             limit=limit)
        if total == 0 and surface.host.nodes and not site and not labels:
            rule = f"{who.describe()} may read no server"
            surface.record_denial(who, Action.READ, "*", rule)
            raise ProblemError(403, "Forbidden by policy", f"denied: {rule}", "policy",
                               error="PolicyDenied", exit_code=3)
        # the page as built (its shape is ServerPage's, which the OpenAPI document names
        # and the schema tests check every answer against), without FastAPI's validation
        # of it again: on a list of many servers that was a quarter of the request's time
        return JSONResponse({"items": items, "total": total, "offset": offset,
                             "limit": limit})

    @app.get("/api/v1/servers/{node}", response_model=models.ServerDetail, tags=["servers"])
    async def server(request: Request, node: str, who: Who) -> dict[str, Any]:
        """One server: channels, offers, the caller's actions, its maintenances and the
        readings taken for them."""
        return await surface_of(request).server(who, node)

    @app.post("/api/v1/preflight", response_model=models.Preflight, tags=["maintenances"])
    async def preflight(request: Request, body: models.PreflightRequest,
                        who: Who) -> dict[str, Any]:
        """What a request would do and need: pods, budgets, quorum numbers, the ceremony's
        steps (each supplied or not), the hazard, or the refusal with its numbers.
        Records nothing (a policy denial is recorded)."""
        return await surface_of(request).preflight(who, body.node, body.intent, body)

    @app.post("/api/v1/maintenances", response_model=models.Maintenance, status_code=201,
              tags=["maintenances"])
    async def create(request: Request, body: models.MaintenanceCreate,
                     who: Actor) -> dict[str, Any]:
        """Request a maintenance with its ceremony; the caller is the requester."""
        m = await surface_of(request).request(who, body.node, body.intent, body,
                                              _credential(request))
        return maintenance_doc(m)

    @app.get("/api/v1/maintenances", response_model=models.MaintenancePage,
             tags=["maintenances"])
    async def maintenances(
        request: Request, who: Who,
        node: Annotated[str | None, Query(max_length=253)] = None,
        active: bool = False,
    ) -> dict[str, Any]:
        """Maintenances (of the nodes this caller may read), newest last."""
        surface = surface_of(request)
        found = [m for m in surface.lifecycle.store.all(active_only=active)
                 if (node is None or m.node == node) and m.node in surface.host.nodes]
        readable = set(await surface.readable(who, sorted({m.node for m in found})))
        items = [maintenance_doc(m) for m in found if m.node in readable][-500:]
        return {"items": items, "total": len(items)}

    @app.get("/api/v1/maintenances/{name}", response_model=models.Maintenance,
             tags=["maintenances"])
    async def maintenance(request: Request, name: str, who: Who) -> dict[str, Any]:
        """One maintenance: phase, conditions (PowerOffConfirmed with its meaning), history."""
        m = await surface_of(request).readable_maintenance(who, name)
        return maintenance_doc(m)

    @app.get("/api/v1/maintenances/{name}/events", tags=["maintenances"],
             response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "server-sent events: `maintenance` with the "
                                             "maintenance document at each change"}})
    async def events(request: Request, name: str, who: Who) -> StreamingResponse:
        """The maintenance as it changes (server-sent events) until it ends. Reads the
        store; the power readings are the lifecycle's own readback, never this stream's."""
        surface = surface_of(request)
        await surface.readable_maintenance(who, name)

        async def stream() -> AsyncIterator[bytes]:
            seen = -1
            quiet = 0.0
            yield b"retry: 2000\n\n"
            while True:
                m = surface.maintenance(name)
                if m.resource_version != seen:
                    seen = m.resource_version
                    data = json.dumps(maintenance_doc(m), separators=(",", ":"))
                    yield f"event: maintenance\nid: {seen}\ndata: {data}\n\n".encode()
                    quiet = 0.0
                    if m.phase.value in ("Complete", "Refused", "Failed"):
                        yield b"event: end\ndata: {}\n\n"
                        return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.25)
                quiet += 0.25
                if quiet >= 15:
                    quiet = 0.0
                    yield b": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    @app.post("/api/v1/maintenances/{name}/return", response_model=models.Maintenance,
              tags=["maintenances"])
    async def return_(request: Request, name: str, body: models.ReturnBody,
                      who: Actor) -> dict[str, Any]:
        """Ask a parked maintenance to return its node to service (servers:uncordon)."""
        return maintenance_doc(await surface_of(request).person(
            who, name, "return", body, _credential(request)))

    @app.post("/api/v1/maintenances/{name}/abandon", response_model=models.Maintenance,
              tags=["maintenances"])
    async def abandon(request: Request, name: str, body: models.CeremonyBody,
                      who: Actor) -> dict[str, Any]:
        """Abandon a maintenance; it returns the node through Returning."""
        return maintenance_doc(await surface_of(request).person(
            who, name, "abandon", body, _credential(request)))

    @app.post("/api/v1/maintenances/{name}/resolve", response_model=models.Maintenance,
              tags=["maintenances"])
    async def resolve(request: Request, name: str, body: models.ResolveBody,
                      who: Actor) -> dict[str, Any]:
        """Settle a dispatch evidence could not tell (servers:maintenance-resolve)."""
        return maintenance_doc(await surface_of(request).person(
            who, name, "resolve", body, _credential(request)))

    @app.get("/api/v1/audit", response_model=models.AuditPage, tags=["audit"])
    async def audit(
        request: Request, who: Who,
        node: Annotated[str | None, Query(max_length=253)] = None,
        actor: Annotated[str | None, Query(max_length=253)] = None,
        action: Annotated[str | None, Query(max_length=64)] = None,
        outcome: Annotated[str | None, Query(pattern="^(accepted|denied)$")] = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """The audit trail (accepted acts and denials) of the nodes this caller may read,
        filtered by node, actor, action, outcome and time; newest first; and whether the
        trail verifies (as `powerplane audit verify` checks it: intact, or the first bad
        entry and what is wrong)."""
        surface = surface_of(request)
        if node is not None:
            await surface.require_read(who, node)
        records = surface.audit(node)
        readable = set(await surface.readable(
            who, sorted({r.node for r in records} & set(surface.host.nodes))))
        out = []
        for r in reversed(records):
            if r.node not in readable:
                continue
            if actor is not None and r.actor != actor:
                continue
            if action is not None and r.action.value != action:
                continue
            if outcome is not None and r.outcome != outcome:
                continue
            at = r.at if r.at.tzinfo else r.at.replace(tzinfo=dt.UTC)
            if since is not None and at < (since if since.tzinfo
                                           else since.replace(tzinfo=dt.UTC)):
                continue
            if until is not None and at > (until if until.tzinfo
                                           else until.replace(tzinfo=dt.UTC)):
                continue
            out.append(r.as_dict())
        return {"items": out[offset: offset + limit], "total": len(out), "offset": offset,
                "limit": limit, "verification": await surface.verification(who)}

    # -- the page ----------------------------------------------------------------------------
    static = resources.files("powerplane_servers") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html")

    auth_routes(app, settings, verifier, sessions)

    # -- the outer layers (last added runs first) --------------------------------------------
    app.add_middleware(BodyLimit, limit=settings.limits.max_body_bytes)
    app.add_middleware(SecurityHeaders, tls=tls)
    return app


def _credential(request: Request) -> str | None:
    """The caller's bearer token where Kubernetes mode passes it through (else None)."""
    found = getattr(request.state, "credential", None)
    return found if isinstance(found, str) else None


def _problem(err: ProblemError, request: Request) -> JSONResponse:
    doc = err.document(request.url.path).model_dump(exclude_none=True)
    return JSONResponse(doc, status_code=err.status, media_type=PROBLEM_JSON,
                        headers=err.headers)
