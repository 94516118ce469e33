"""The servers: ``/api/v1/servers`` and ``/api/v1/servers/{node}``."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from powerplane.lifecycle import Action
from powerplane_servers import models
from powerplane_servers.deps import Who, settings_of, surface_of
from powerplane_servers.problems import ProblemError

__all__ = ["router"]

router = APIRouter(tags=["servers"])


@router.get("/api/v1/servers", response_model=models.ServerPage)
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
    limit = min(limit, settings_of(request).limits.page_size_max)
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


@router.get("/api/v1/servers/{node}", response_model=models.ServerDetail)
async def server(request: Request, node: str, who: Who) -> dict[str, Any]:
    """One server: channels, offers, the caller's actions, its maintenances and the
    readings taken for them."""
    return await surface_of(request).server(who, node)
