"""The ASGI application: the API under ``/api/v1``, its OpenAPI 3.1 document at
``/api/v1/openapi.json``, the page at ``/``, and the page's login at ``/auth/``.

FastAPI (on Starlette, served by uvicorn): the bodies are pydantic models, as core's are,
and the OpenAPI document is generated from the same models the handlers validate with.

FastAPI's "bigger applications" shape: :func:`create_app` only assembles. The routes are a
router per resource (:mod:`.routes`); who is asking — authentication, the identity, the
per-identity rate limits, the auth-proxy mode's ``Origin`` check — is dependencies at
module level (:mod:`.deps`), reaching what they need through ``request.app.state``; every
error is a problem document (:mod:`.errors`).
"""


from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from powerplane_servers.auth import OidcVerifier
from powerplane_servers.deps import Limits
from powerplane_servers.errors import EXCEPTION_HANDLERS
from powerplane_servers.guards import BodyLimit, SecurityHeaders
from powerplane_servers.problems import PROBLEM_JSON, Problem
from powerplane_servers.routes import audit, maintenances, servers, session
from powerplane_servers.session import Sessions
from powerplane_servers.settings import ServeSettings
from powerplane_servers.surface import Surface

__all__ = ["create_app"]

_ERRORS = {code: {"model": Problem, "content": {PROBLEM_JSON: {}},
                  "description": "a problem document (RFC 9457)"}
           for code in (400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503)}


def create_app(
    settings: ServeSettings,
    opener: Callable[[], AbstractAsyncContextManager[Surface]],
    *,
    tls: bool = False,
) -> FastAPI:
    """The application; ``opener`` opens the deployment's :class:`Surface` for its life."""
    verifier = OidcVerifier(settings.oidc) if settings.oidc is not None else None

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
        exception_handlers=EXCEPTION_HANDLERS,
    )
    login = session.Login.of(settings, verifier)
    app.state.settings = settings
    app.state.sessions = Sessions(settings)
    app.state.verifier = verifier
    app.state.limits = Limits.of(settings)
    app.state.login = login

    app.include_router(session.router)
    app.include_router(servers.router)
    app.include_router(maintenances.router)
    app.include_router(audit.router)
    app.mount("/static", StaticFiles(directory=str(session.STATIC)), name="static")
    app.include_router(session.page)
    if login is not None:
        app.include_router(session.login)

    # the outer layers (last added runs first)
    app.add_middleware(BodyLimit, limit=settings.limits.max_body_bytes)
    app.add_middleware(SecurityHeaders, tls=tls)
    return app
