"""Kubernetes mode: the surface on the ``kubernetes`` store is a gateway client of the
NodeMaintenance API that acts as its caller (powerplane_kubernetes.gateway), against the
test API server (``KubeApiServer``, with TokenReview, impersonation and the admission
policy's requester rules).

The server has a kubeconfig of its own (the ServiceAccount ``powerplane-server``, bound to
``operator manifests --server``'s roles); people bring bearer tokens the API server issued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from servers_support import client

from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.apiserver import (
    RBAC_KINDS,
    KubeApiServer,
    RecordedRequest,
    rbac_authorize,
)
from powerplane_kubernetes.testing.seed import rbac_attributes, ungranted
from powerplane_servers.app import create_app
from powerplane_servers.settings import KubernetesSettings, ProxySettings, ServeSettings
from powerplane_servers.surface import open_surface

CP = "node-role.kubernetes.io/control-plane"
NODES = ("cp1", "cp2", "cp3", "w1", "w2")
OPS, LOCKS = "ops", "maint"
SERVER_USER = f"system:serviceaccount:{OPS}:{m.SERVER}"
MAINTENANCES = "powerplane.io/v1alpha1/nodemaintenances"
AUDITS = "powerplane.io/v1alpha1/maintenanceaudits"
BASIC_USER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "system:basic-user"},
              "rules": [{"apiGroups": ["authentication.k8s.io"],
                         "resources": ["selfsubjectreviews"], "verbs": ["create"]}]}
"""The cluster's own role of every authenticated user (not ours to print)."""


def crb(name: str, role: str, kind: str, subject: str,
        namespace: str | None = None) -> dict[str, Any]:
    sub: dict[str, str] = {"kind": kind, "name": subject}
    if namespace is not None:
        sub["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role}, "subjects": [sub]}


def write_deployment(tmp: Path, kubeconfig: Path) -> Path:
    access = {"kubeconfig": str(kubeconfig)}
    doc: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": dict.fromkeys(NODES, "on")}},
        "nodes": {n: {"site": "east", "labels": {CP: ""} if n.startswith("cp") else {},
                      "channels": [{"channel": "lab", "target": n}]} for n in NODES},
        "policy": {"type": "kubernetes", **access},
        "lifecycle": {"store": {"type": "kubernetes", "namespace": LOCKS, **access},
                      "cluster": {"type": "kubernetes", **access},
                      "storage": {"type": "none"}},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class World:
    """The API server, the server's deployment, and two people's tokens."""

    def __init__(self, api: KubeApiServer, config: Path) -> None:
        self.api = api
        self.config = config
        # eve may cordon and uncordon only (the delegation example), and read
        self.eve = api.issue_token("eve", ["plant-eng"])
        self.alice = api.issue_token("alice", ["plant-admins"])

    def app(self, settings: ServeSettings | None = None) -> FastAPI:
        settings = settings or ServeSettings()
        return create_app(settings, functools.partial(
            open_surface, str(self.config), runner=False, kubernetes=settings.kubernetes))

    def maintenances(self) -> list[dict[str, Any]]:
        return self.api.objects(MAINTENANCES)

    def audits(self) -> list[dict[str, Any]]:
        return self.api.objects(AUDITS)

    def by(self, who: str) -> list[RecordedRequest]:
        return [r for r in self.api.requests if r.client == who]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with KubeApiServer(longhorn=False) as api:
        for n in NODES:
            api.add_node(n, labels={CP: ""} if n.startswith("cp") else {})
        kubeconfig = api.write_kubeconfig(tmp_path / "server-kc", client="server",
                                          user=SERVER_USER)
        api.add_rbac(*m.server_manifests(OPS, LOCKS)[1:],
                     *m.people_roles(), m.maintainer_role(), BASIC_USER,
                     crb("eng-engineer", m.ENGINEER, "Group", "plant-eng"),
                     crb("eng-viewer", m.VIEWER, "Group", "plant-eng"),
                     crb("eng-maintainer", m.MAINTAINER, "Group", "plant-eng"),
                     crb("admins", m.ADMIN, "Group", "plant-admins"),
                     crb("admins-maintainer", m.MAINTAINER, "Group", "plant-admins"))
        yield World(api, write_deployment(tmp_path, kubeconfig))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def cordon(node: str = "w1") -> dict[str, Any]:
    return {"node": node, "intent": "cordon", "reason": "swap the fan tray in rack 4"}


def problem(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    doc: dict[str, Any] = resp.json()
    assert doc["status"] == status and doc["title"] and doc["cause"]
    return doc


@contextlib.asynccontextmanager
async def serving(world: World, settings: ServeSettings | None = None,
                  ) -> AsyncIterator[httpx.AsyncClient]:
    async with client(world.app(settings)) as c:
        yield c


async def test_a_cordon_only_engineer_creates_a_cordon_recorded_as_herself(
        world: World) -> None:
    async with serving(world) as c:
        who = (await c.get("/api/v1/whoami", headers=bearer(world.eve))).json()
        assert who["user"] == "eve" and who["via"] == "kubernetes"
        assert set(who["groups"]) == {"plant-eng", "system:authenticated"}
        page = (await c.get("/api/v1/servers", headers=bearer(world.eve))).json()
        assert {s["name"] for s in page["items"]} == set(NODES)
        for s in page["items"]:
            assert {k for k, a in s["actions"].items() if a["allowed"]} == {"cordon"}
        resp = await c.post("/api/v1/maintenances", json=cordon(), headers=bearer(world.eve))
        assert resp.status_code == 201, resp.text
        made = resp.json()
        assert made["phase"] == "Pending" and made["requestedBy"] == "eve"
    [obj] = world.maintenances()
    assert obj["metadata"]["name"] == made["name"]
    assert obj["spec"]["requestedBy"] == "eve"
    assert set(obj["spec"]["requesterGroups"]) == {"plant-eng", "system:authenticated"}
    # the API server received the create from eve's own token, as eve
    [create] = [r for r in world.api.requests
                if r.method == "POST" and r.path.endswith("/nodemaintenances")]
    assert (create.client, create.user) == ("eve", "eve")
    # the request record is eve's too; the server wrote no NodeMaintenance of its own
    records = [a for a in world.audits() if a["metadata"]["name"].startswith("request-")
               or "request" in a["metadata"]["name"]]
    assert records, world.audits()
    assert not [r for r in world.by("server") if r.method in ("POST", "PUT", "PATCH",
                                                               "DELETE")
                and "/nodemaintenances" in r.path]


async def test_one_callers_records_through_the_server_chain_in_one_trail(
        world: World) -> None:
    """Issue 37: the server keeps one chained trail per caller (not one per request)."""
    async with serving(world) as c:
        for node in ("w1", "w2"):
            resp = await c.post("/api/v1/maintenances", json=cordon(node),
                                headers=bearer(world.eve))
            assert resp.status_code == 201, resp.text
        # the audit view verifies every trail the store keeps (one per writer), not none
        page = await c.get("/api/v1/audit", headers=bearer(world.eve))
        assert page.status_code == 200, page.text
        verification = page.json()["verification"]
    specs = sorted((a["spec"] for a in world.audits()), key=lambda s: s["seq"])
    shown = [t for t in verification["trails"] if specs[0]["trail"] in t["trail"]]
    assert verification["intact"] is True, verification
    assert len(shown) == 1 and shown[0]["intact"] and shown[0]["records"] == 2, verification
    assert [(s["actor"], s["node"], s["seq"]) for s in specs] == [("eve", "w1", 1),
                                                                 ("eve", "w2", 2)]
    assert len({s["trail"] for s in specs}) == 1 and specs[0]["trail"].startswith("eve@")
    assert specs[0]["prev"] == "" and len(specs[1]["prev"]) == 64


async def test_a_denied_act_is_refused_by_policy_and_audited(world: World) -> None:
    async with serving(world) as c:
        body = {"node": "w1", "intent": "reboot", "reason": "kernel 6.12 update",
                "ackPreflight": True, "confirmNode": "w1"}
        doc = problem(await c.post("/api/v1/maintenances", json=body,
                                   headers=bearer(world.eve)), 403)
        assert doc["cause"] == "policy" and "SubjectAccessReview" in doc["detail"]
    assert world.maintenances() == []
    denied = [a for a in world.audits() if "eve" in yaml.safe_dump(a)]
    assert denied and "denied" in yaml.safe_dump(denied[-1])
    # written by the server, the gateway minting the record of a denial
    assert any(r.client == "server" and r.method == "POST" and "maintenanceaudits" in r.path
               for r in world.api.requests)


async def test_no_request_can_choose_its_actor(world: World) -> None:
    async with serving(world) as c:
        body = {**cordon(), "requestedBy": "alice"}
        problem(await c.post("/api/v1/maintenances", json=body,
                             headers=bearer(world.eve)), 422)
        assert world.maintenances() == []
        # onBehalfOf is text beside the actor, never the actor
        made = (await c.post("/api/v1/maintenances", json={**cordon(), "onBehalfOf": "alice"},
                             headers=bearer(world.eve))).json()
        assert made["requestedBy"] == "eve"
    # and a client going around the surface with eve's token cannot say it is alice: the
    # API server's admission refuses it
    with httpx.Client(base_url=world.api.url, headers=bearer(world.eve)) as raw:
        forged = {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
                  "metadata": {"name": "w2-cordon-forged"},
                  "spec": {"node": "w2", "intent": "cordon", "reason": "forged request here",
                           "requestedBy": "alice"}}
        resp = raw.post("/apis/powerplane.io/v1alpha1/nodemaintenances", json=forged)
        assert resp.status_code == 403, resp.text
        assert "spec.requestedBy must name the user" in resp.json()["message"]
    assert [o["spec"]["requestedBy"] for o in world.maintenances()] == ["eve"]


@pytest.mark.parametrize("case", ["expired", "unknown", "not-bearer"])
async def test_an_invalid_or_expired_token_is_401_nothing_done_and_audited(
        world: World, case: str) -> None:
    token = {"expired": world.api.issue_token("eve", ["plant-eng"], expires_in=-1),
             "unknown": "not-a-token-the-api-server-issued"}.get(case, "")
    headers = ({"Authorization": "Basic ZXZlOmV2ZQ=="} if case == "not-bearer"
               else bearer(token))
    async with serving(world) as c:
        doc = problem(await c.post("/api/v1/maintenances", json=cordon(), headers=headers),
                      401)
        assert doc["cause"] == "policy"
        if case == "expired":
            assert "expired" in doc["detail"]
        problem(await c.get("/api/v1/servers", headers=headers), 401)
    assert world.maintenances() == []
    text = yaml.safe_dump(world.audits())
    assert "(unauthenticated)" in text and "authentication failed" in text
    assert token == "" or token not in text  # no token in any record


async def test_a_session_or_proxy_caller_may_read_but_not_act_in_passthrough(
        world: World) -> None:
    settings = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)))
    headers = {"X-Forwarded-User": "eve", "X-Forwarded-Groups": "plant-eng"}
    async with serving(world, settings) as c:
        page = (await c.get("/api/v1/servers", headers=headers)).json()
        assert page["total"] == len(NODES)
        doc = problem(await c.post("/api/v1/maintenances", json=cordon(), headers=headers),
                      403)
        assert doc["error"] == "CredentialsRequired"
    assert world.maintenances() == []
    assert "CredentialsRequired" not in yaml.safe_dump(world.audits())
    assert "passthrough" in yaml.safe_dump(world.audits())


async def test_the_servers_requests_are_granted_by_its_roles_and_write_no_node(
        world: World) -> None:
    """Least privilege: every request the server's ServiceAccount made (list, detail,
    pre-flight, a request's policy check, a denial's record) is granted by the roles
    ``operator manifests --server`` prints; none writes a Node or a NodeMaintenance; and
    eve's own requests are granted by the roles people are given."""
    async with serving(world) as c:
        await c.get("/api/v1/servers", headers=bearer(world.eve))
        await c.get("/api/v1/servers/w1", headers=bearer(world.eve))
        await c.post("/api/v1/preflight", json={"node": "w1", "intent": "drain"},
                     headers=bearer(world.alice))
        made = (await c.post("/api/v1/maintenances", json=cordon(),
                             headers=bearer(world.eve))).json()
        await c.get(f"/api/v1/maintenances/{made['name']}", headers=bearer(world.eve))
        await c.get("/api/v1/maintenances", headers=bearer(world.eve))
        await c.get("/api/v1/audit", headers=bearer(world.eve))
        await c.post("/api/v1/maintenances", json={**cordon("w2"), "intent": "reboot"},
                     headers=bearer(world.eve))  # denied: recorded by the server
    server_roles = [m.server_role(), m.server_events_role(LOCKS), BASIC_USER]
    refused = ungranted(world.by("server"), server_roles)
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    used = {str(rbac_attributes(r)) for r in world.by("server")}
    assert "create tokenreviews.authentication.k8s.io" in used
    assert not any(u.startswith(("create nodes", "update nodes", "patch nodes",
                                 "create nodemaintenances", "update nodemaintenances",
                                 "patch nodemaintenances", "delete nodemaintenances"))
                   for u in used), used
    people = [m.maintainer_role(), m.maintainer_lock_role(LOCKS), *m.people_roles(),
              BASIC_USER]
    refused = ungranted(world.by("eve"), people)
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    # and the API server's RBAC says the server's ServiceAccount may write no Node and no
    # NodeMaintenance, whatever it asked
    objects = {kind: [d for d in m.server_manifests(OPS, LOCKS) if d["kind"] == kind]
               for kind in RBAC_KINDS}
    for group, resource, verb in [("", "nodes", "patch"), ("", "nodes", "update"),
                                  ("powerplane.io", "nodemaintenances", "create"),
                                  ("powerplane.io", "nodemaintenances", "update"),
                                  ("powerplane.io", "nodemaintenances/status", "update"),
                                  ("", "users", "impersonate")]:
        res, _, sub = resource.partition("/")
        allowed, _ = rbac_authorize(SERVER_USER, ["system:authenticated"], objects,
                                    resource={"group": group, "resource": res,
                                              "subresource": sub, "verb": verb,
                                              "name": "w1"})
        assert not allowed, (verb, resource)


async def test_impersonation_acts_as_the_caller_when_bound_and_is_refused_when_not(
        world: World) -> None:
    settings = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)),
                             kubernetes=KubernetesSettings(credentials="impersonate"))
    headers = {"X-Forwarded-User": "eve", "X-Forwarded-Groups": "plant-eng"}
    async with serving(world, settings) as c:
        # not bound yet: the API server refuses the impersonation, nothing is created
        resp = await c.post("/api/v1/maintenances", json=cordon(), headers=headers)
        assert resp.status_code >= 400, resp.text
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert world.maintenances() == []
        world.api.add_rbac(crb("server-impersonates", m.SERVER_IMPERSONATE,
                               "ServiceAccount", m.SERVER, OPS))
        resp = await c.post("/api/v1/maintenances", json=cordon(), headers=headers)
        assert resp.status_code == 201, resp.text
    [obj] = world.maintenances()
    assert obj["spec"]["requestedBy"] == "eve"
    # the attempt refused (the impersonation not allowed) and the one made once bound,
    # both through the server's client; the one that created the object acts as eve
    creates = [r for r in world.api.requests
               if r.method == "POST" and r.path.endswith("/nodemaintenances")]
    assert {r.client for r in creates} == {"server"}
    assert (creates[-1].client, creates[-1].user) == ("server", "eve")


async def test_pages_and_acts_read_the_servers_watch_not_a_list_each(world: World) -> None:
    """The server keeps one watch of the NodeMaintenances (its own access): once it has
    listed, neither a page nor an act (the caller's own requests) lists them again."""
    def lists() -> list[RecordedRequest]:
        return [r for r in world.api.requests if r.method == "GET"
                and r.path.endswith("/nodemaintenances") and "watch" not in r.query]

    async with serving(world) as c:
        async with asyncio.timeout(30):
            while not [r for r in world.by("server") if r.path.endswith("/nodemaintenances")
                       and r.query.get("watch")]:
                await asyncio.sleep(0.01)
        before = len(lists())
        for _ in range(3):
            assert (await c.get("/api/v1/servers", headers=bearer(world.eve))).status_code \
                == 200
        made = await c.post("/api/v1/maintenances", json=cordon(), headers=bearer(world.eve))
        assert made.status_code == 201, made.text
        async with asyncio.timeout(30):  # the page shows it once the watch delivered it
            while True:
                page = (await c.get("/api/v1/servers", headers=bearer(world.eve))).json()
                taken = {d["name"]: d["maintenance"] for d in page["items"]}
                if taken["w1"] is not None:
                    break
                await asyncio.sleep(0.01)
        assert taken["w1"]["name"] == made.json()["name"]
        assert len(lists()) == before
