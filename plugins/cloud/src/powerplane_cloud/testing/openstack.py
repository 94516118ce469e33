"""A stateful Keystone v3 + Compute API for respx, with bodies from the API references.

Request and response bodies follow the Identity v3 reference (``POST /v3/auth/tokens``:
``201``, token in ``X-Subject-Token``, ``token.expires_at`` and ``token.catalog``) and
the Compute reference (``GET /servers/{id}``, ``POST /servers/{id}/action`` with
``reboot`` / ``os-stop`` / ``os-start`` answering ``202``, ``DELETE`` answering ``204``,
faults as ``{"itemNotFound": {...}}`` / ``{"conflictingRequest": {...}}``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

KEYSTONE = "http://keystone.test:5000/v3"
COMPUTE = "http://nova.test:8774/v2.1"
COMPUTE_INTERNAL = "http://nova-internal.test:8774/v2.1"
PASSWORD = "pa55-never-shown-91c3"
APP_CRED_ID = "21dced0fd20347869b93710d2b98aae0"
APP_CRED_SECRET = "app-cred-never-shown-4e0b"


@dataclass
class Server:
    """One server as Nova keeps it."""

    status: str = "ACTIVE"
    power: int = 1
    vm_state: str = "active"
    task: str | None = None


def _fault(status: int, key: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={key: {"code": status, "message": message}})


@dataclass
class FakeOpenStack:
    """Keystone and Nova; ``servers`` holds the state, ``tokens`` the valid tokens."""

    servers: dict[str, Server] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    auth_bodies: list[dict[str, Any]] = field(default_factory=list)
    actions: list[tuple[str, str, Any]] = field(default_factory=list)
    reject_all_tokens: bool = False
    region: str = "RegionOne"
    lifetime: dt.timedelta = dt.timedelta(hours=1)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    # -- Keystone -------------------------------------------------------------------------
    def issue(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.auth_bodies.append(body)
        identity = body["auth"]["identity"]
        method = identity["methods"][0]
        if method == "password":
            ok = identity["password"]["user"]["password"] == PASSWORD
        else:
            cred = identity["application_credential"]
            ok = cred["id"] == APP_CRED_ID and cred["secret"] == APP_CRED_SECRET
        if not ok:
            return httpx.Response(401, json={"error": {
                "code": 401, "title": "Unauthorized",
                "message": "The request you have made requires authentication."}})
        token = f"gAAAAAB-token-{next(self._seq)}"
        self.tokens.add(token)
        now = dt.datetime.now(dt.UTC)
        return httpx.Response(201, headers={"X-Subject-Token": token}, json={"token": {
            "methods": [method],
            "user": {"domain": {"id": "default", "name": "Default"},
                     "id": "ee4dfb6e5540447cb3741905149d9b6e", "name": "admin",
                     "password_expires_at": None},
            "audit_ids": ["3T2dc1CGQxyJsHdDu1xkcw"],
            "expires_at": (now + self.lifetime).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "issued_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "project": {"domain": {"id": "default", "name": "Default"},
                        "id": "a6944d763bf64ee6a275f1263fae0352", "name": "admin"},
            "is_domain": False,
            "roles": [{"id": "51cc68287d524c759f47c811e6463340", "name": "admin"}],
            "catalog": [
                {"endpoints": [{"region_id": self.region, "url": "http://glance.test:9292",
                                "region": self.region, "interface": "public",
                                "id": "b2605da9b25943beb49b2bd86aca2202"}],
                 "type": "image", "id": "050726f278654128aba89757ae25910c", "name": "glance"},
                {"endpoints": [
                    {"region_id": self.region, "url": COMPUTE_INTERNAL,
                     "region": self.region, "interface": "internal",
                     "id": "ae36c0dbb0634e1dbf711f9fc2359975"},
                    {"region_id": self.region, "url": COMPUTE, "region": self.region,
                     "interface": "public", "id": "d286b51530144d90a4de52d214d3ad1e"}],
                 "type": "compute", "id": "a226b3eeb5594f50bf8b6df94636ed28", "name": "nova"},
            ],
        }})

    # -- Nova -----------------------------------------------------------------------------
    def _authorized(self, request: httpx.Request) -> httpx.Response | None:
        if self.reject_all_tokens or request.headers.get("X-Auth-Token") not in self.tokens:
            return httpx.Response(401, json={"error": {
                "code": 401, "title": "Unauthorized",
                "message": "The request you have made requires authentication."}})
        return None

    def _missing(self, sid: str) -> httpx.Response:
        return _fault(404, "itemNotFound", f"Instance {sid} could not be found.")

    def get(self, request: httpx.Request, sid: str) -> httpx.Response:
        if (denied := self._authorized(request)) is not None:
            return denied
        s = self.servers.get(sid)
        if s is None:
            return self._missing(sid)
        return httpx.Response(200, json={"server": {
            "id": sid, "name": "new-server-test", "status": s.status,
            "tenant_id": "6f70656e737461636b20342065766572", "user_id": "fake",
            "OS-EXT-STS:power_state": s.power, "OS-EXT-STS:task_state": s.task,
            "OS-EXT-STS:vm_state": s.vm_state,
            "flavor": {"disk": 1, "ephemeral": 0, "original_name": "m1.tiny", "ram": 512,
                       "swap": 0, "vcpus": 1},
            "links": [{"href": f"{COMPUTE}/servers/{sid}", "rel": "self"}],
        }})

    def action(self, request: httpx.Request, sid: str) -> httpx.Response:
        if (denied := self._authorized(request)) is not None:
            return denied
        s = self.servers.get(sid)
        if s is None:
            return self._missing(sid)
        body = json.loads(request.content)
        (name, arg), = body.items()
        self.actions.append((sid, name, arg))
        if name == "os-stop":
            if s.vm_state != "active":
                return _fault(409, "conflictingRequest",
                              f"Cannot 'stop' instance {sid} while it is in vm_state "
                              f"{s.vm_state}")
            s.status, s.power, s.vm_state = "SHUTOFF", 4, "stopped"
        elif name == "os-start":
            if s.vm_state != "stopped":
                return _fault(409, "conflictingRequest",
                              f"Cannot 'start' instance {sid} while it is in vm_state "
                              f"{s.vm_state}")
            s.status, s.power, s.vm_state = "ACTIVE", 1, "active"
        elif name == "reboot":
            if s.vm_state != "active":
                return _fault(409, "conflictingRequest",
                              f"Cannot 'reboot' instance {sid} while it is in vm_state "
                              f"{s.vm_state}")
        else:
            return _fault(400, "badRequest", f"Unsupported action {name}")
        return httpx.Response(202)

    def delete(self, request: httpx.Request, sid: str) -> httpx.Response:
        if (denied := self._authorized(request)) is not None:
            return denied
        if self.servers.pop(sid, None) is None:
            return self._missing(sid)
        self.actions.append((sid, "delete", None))
        return httpx.Response(204)

    def install(self, router: respx.MockRouter) -> dict[str, respx.Route]:
        """Add the routes to ``router``; the routes by name."""
        server = rf"^{COMPUTE}/servers/(?P<sid>[^/]+)"
        return {
            "auth": router.post(f"{KEYSTONE}/auth/tokens").mock(side_effect=self.issue),
            "get": router.get(url__regex=server + "$").mock(side_effect=self.get),
            "action": router.post(url__regex=server + "/action$").mock(
                side_effect=self.action),
            "delete": router.delete(url__regex=server + "$").mock(side_effect=self.delete),
            "get-internal": router.get(
                url__regex=rf"^{COMPUTE_INTERNAL}/servers/(?P<sid>[^/]+)$"
            ).mock(side_effect=self.get),
        }
