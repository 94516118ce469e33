"""The OpenAPI 3.1 document at /api/v1/openapi.json: valid (openapi-spec-validator), every
route under /api/v1, every error a problem document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openapi_spec_validator import validate
from servers_support import client, make_app, write_fleet

PATHS = {
    "/api/v1/whoami", "/api/v1/servers", "/api/v1/servers/{node}", "/api/v1/preflight",
    "/api/v1/maintenances", "/api/v1/maintenances/{name}",
    "/api/v1/maintenances/{name}/events", "/api/v1/maintenances/{name}/return",
    "/api/v1/maintenances/{name}/abandon", "/api/v1/maintenances/{name}/resolve",
    "/api/v1/audit",
}


async def test_the_document_is_valid_openapi_3_1(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path), runner=False)
    async with client(app) as c:
        r = await c.get("/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1.")
    validate(doc)
    assert set(doc["paths"]) == PATHS
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code in ("401", "403", "422"):
                content = op["responses"][code]["content"]
                assert "application/problem+json" in content, (path, method, code)
    problem = doc["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "cause"} <= set(problem["properties"])


def test_every_route_maps_to_one_action(tmp_path: Path) -> None:
    from fastapi.routing import APIRoute
    from servers_support import oidc_settings_for_routes
    from starlette.routing import Mount, Route

    from powerplane.authority.actions import Action
    from powerplane_servers.actions import ENTRY_POINTS

    app = make_app(write_fleet(tmp_path), oidc_settings_for_routes(), runner=False)
    found = {"cli: serve"}
    for route, path, methods in _routes(app):
        if isinstance(route, Mount):
            found.add(f"GET {path}")
        elif isinstance(route, APIRoute | Route):
            for method in sorted((methods or set()) - {"HEAD"}):
                found.add(f"{method} {path}")
    assert found == set(ENTRY_POINTS)
    for value in ENTRY_POINTS.values():
        assert isinstance(value, Action) or (isinstance(value, str) and value)


def _routes(app: Any) -> list[tuple[Any, str | None, set[str] | None]]:
    """Every route the application serves, the routers it includes flattened: each route
    with its path and methods. FastAPI 0.137.2 and later keep an included router as one
    node of ``app.routes``, flattened by ``iter_route_contexts``; before, ``app.routes``
    was flat."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # FastAPI before 0.137.2
        return [(r, getattr(r, "path", None), getattr(r, "methods", None))
                for r in app.routes]
    return [(c.original_route, c.path, c.methods) for c in iter_route_contexts(app.routes)]
