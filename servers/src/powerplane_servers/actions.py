"""Every entry point of the surface and the one action it is (or why it is none).

Core's table (``powerplane.authority.actions.ENTRY_POINTS``) holds the CLI's and the
embedding API's; this one holds the surface's routes and its command, checked by a test
against the application's routes.
"""

from __future__ import annotations

from collections.abc import Mapping

from powerplane.lifecycle import Action

__all__ = ["ENTRY_POINTS"]

ENTRY_POINTS: Mapping[str, Action | str] = {
    "cli: serve": "serves the API and the page; each request is decided for its caller",
    "GET /api/v1/whoami": "the caller's own identity; reads no server",
    "GET /api/v1/servers": Action.READ,
    "GET /api/v1/servers/{node}": Action.READ,
    "POST /api/v1/preflight": "the intent's action, asked (a denial recorded); records "
                              "nothing else",
    "POST /api/v1/maintenances": "the intent's action: servers:cordon, servers:drain, "
                                 "servers:reboot or servers:shutdown",
    "GET /api/v1/maintenances": Action.READ,
    "GET /api/v1/maintenances/{name}": Action.READ,
    "GET /api/v1/maintenances/{name}/events": Action.READ,
    "POST /api/v1/maintenances/{name}/return": Action.UNCORDON,
    "POST /api/v1/maintenances/{name}/abandon": Action.ABANDON,
    "POST /api/v1/maintenances/{name}/resolve": Action.RESOLVE,
    "GET /api/v1/audit": Action.READ,
    "GET /api/v1/openapi.json": "the API's description; reads no server",
    "GET /": "the page; reads no server",
    "GET /static": "the page's files; read no server",
    "GET /auth/login": "starts a login; reads no server",
    "GET /auth/callback": "ends a login; reads no server",
    "POST /auth/logout": "ends a session; reads no server",
}
