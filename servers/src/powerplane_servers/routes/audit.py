"""The audit trail: ``/api/v1/audit``."""

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from powerplane_servers import models
from powerplane_servers.deps import Who, surface_of

__all__ = ["router"]

router = APIRouter(tags=["audit"])


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo else at.replace(tzinfo=dt.UTC)


@router.get("/api/v1/audit", response_model=models.AuditPage)
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
        at = _aware(r.at)
        if since is not None and at < _aware(since):
            continue
        if until is not None and at > _aware(until):
            continue
        out.append(r.as_dict())
    return {"items": out[offset: offset + limit], "total": len(out), "offset": offset,
            "limit": limit, "verification": await surface.verification(who)}
