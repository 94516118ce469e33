"""Maintenances with their ceremony: pre-flight (``/api/v1/preflight``), the request, the
list, one maintenance, its events (server-sent) and the person's return, abandon and
resolve."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from powerplane_servers import models
from powerplane_servers.deps import Actor, Who, credential, surface_of
from powerplane_servers.surface import Surface, maintenance_doc

__all__ = ["router"]

router = APIRouter(tags=["maintenances"])


@router.post("/api/v1/preflight", response_model=models.Preflight)
async def preflight(request: Request, body: models.PreflightRequest,
                    who: Who) -> dict[str, Any]:
    """What a request would do and need: pods, budgets, quorum numbers, the ceremony's
    steps (each supplied or not), the hazard, or the refusal with its numbers.
    Records nothing (a policy denial is recorded)."""
    return await surface_of(request).preflight(who, body.node, body.intent, body)


@router.post("/api/v1/maintenances", response_model=models.Maintenance, status_code=201)
async def create(request: Request, body: models.MaintenanceCreate,
                 who: Actor) -> dict[str, Any]:
    """Request a maintenance with its ceremony; the caller is the requester."""
    m = await surface_of(request).request(who, body.node, body.intent, body,
                                          credential(request))
    return maintenance_doc(m)


@router.get("/api/v1/maintenances", response_model=models.MaintenancePage)
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


@router.get("/api/v1/maintenances/{name}", response_model=models.Maintenance)
async def maintenance(request: Request, name: str, who: Who) -> dict[str, Any]:
    """One maintenance: phase, conditions (PowerOffConfirmed with its meaning), history."""
    m = await surface_of(request).readable_maintenance(who, name)
    return maintenance_doc(m)


@router.get("/api/v1/maintenances/{name}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "server-sent events: `maintenance` with the "
                                            "maintenance document at each change"}})
async def events(request: Request, name: str, who: Who) -> StreamingResponse:
    """The maintenance as it changes (server-sent events) until it ends. Reads the
    store; the power readings are the lifecycle's own readback, never this stream's."""
    surface = surface_of(request)
    await surface.readable_maintenance(who, name)
    return StreamingResponse(_stream(request, surface, name),
                             media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})


async def _stream(request: Request, surface: Surface, name: str) -> AsyncIterator[bytes]:
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


@router.post("/api/v1/maintenances/{name}/return", response_model=models.Maintenance)
async def return_(request: Request, name: str, body: models.ReturnBody,
                  who: Actor) -> dict[str, Any]:
    """Ask a parked maintenance to return its node to service (servers:uncordon)."""
    return maintenance_doc(await surface_of(request).person(
        who, name, "return", body, credential(request)))


@router.post("/api/v1/maintenances/{name}/abandon", response_model=models.Maintenance)
async def abandon(request: Request, name: str, body: models.CeremonyBody,
                  who: Actor) -> dict[str, Any]:
    """Abandon a maintenance; it returns the node through Returning."""
    return maintenance_doc(await surface_of(request).person(
        who, name, "abandon", body, credential(request)))


@router.post("/api/v1/maintenances/{name}/resolve", response_model=models.Maintenance)
async def resolve(request: Request, name: str, body: models.ResolveBody,
                  who: Actor) -> dict[str, Any]:
    """Settle a dispatch evidence could not tell (servers:maintenance-resolve)."""
    return maintenance_doc(await surface_of(request).person(
        who, name, "resolve", body, credential(request)))
