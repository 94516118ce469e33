"""The API on the local store: servers with offers and the caller's actions, pre-flight,
maintenances through their phases, the audit trail, problem documents (auth-proxy mode)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers_support import (
    ADMIN,
    ENGINEER,
    NOBODY,
    VIEWER,
    ceremony,
    client,
    make_app,
    served,
    surface_of,
    write_fleet,
)


async def wait_phase(c: httpx.AsyncClient, name: str, phases: set[str],
                     headers: dict[str, str], timeout: float = 20) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        doc: dict[str, Any] = (await c.get(f"/api/v1/maintenances/{name}",
                                           headers=headers)).json()
        if doc["phase"] in phases:
            return doc
        assert asyncio.get_running_loop().time() < deadline, doc["phase"]
        await asyncio.sleep(0.05)


def problem(resp: httpx.Response, status: int, cause: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    doc: dict[str, Any] = resp.json()
    assert doc["status"] == status and doc["cause"] == cause and doc["title"]
    return doc


async def test_engineer_sees_cordon_allowed_and_nothing_else(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        page = (await c.get("/api/v1/servers", headers=ENGINEER,
                            params={"limit": 100})).json()
        by = {s["name"]: s for s in page["items"]}
        assert page["total"] == len(by) == 10
        for s in by.values():
            allowed = {k for k, a in s["actions"].items() if a["allowed"]}
            assert allowed == {"cordon"}
        agent = by["inband-1"]["actions"]["shutdown"]
        assert agent["offered"] is False and "shutdown" in agent["withheldReason"]
        assert by["inband-1"]["offers"]["shutdown"]["offered"] is False
        assert by["bmc-1"]["offers"]["shutdown"] == {
            "offered": True, "channel": "bmc", "graceful": True,
            "recovery": "channel bmc can power on"}
        assert by["bmc-1"]["discoveredAt"]
        admin = (await c.get("/api/v1/servers/bmc-1", headers=ADMIN)).json()
        assert all(a["allowed"] for a in admin["actions"].values())


async def test_filters_and_pages(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path, extra_nodes=30))
    async with client(app) as c:
        site = (await c.get("/api/v1/servers", headers=VIEWER,
                            params={"site": "plant-b"})).json()
        assert sorted(s["name"] for s in site["items"]) == ["inband-1", "talos-1", "talos-2"]
        rack = (await c.get("/api/v1/servers", headers=VIEWER,
                            params=[("label", "rack=r2"), ("site", "plant-b")])).json()
        assert rack["total"] == 3
        names: list[str] = []
        for offset in range(0, 40, 7):
            got = (await c.get("/api/v1/servers", headers=VIEWER,
                               params={"offset": offset, "limit": 7})).json()
            assert got["total"] == 40
            names += [s["name"] for s in got["items"]]
        assert len(names) == len(set(names)) == 40
        problem(await c.get("/api/v1/servers", headers=VIEWER, params={"label": "nokey"}),
                422, "usage")


async def test_the_list_reads_no_power(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path), runner=False)
    async with client(app) as c:
        host = surface_of(app).host
        calls: list[str] = []
        real = host.read_power_state

        async def counted(node: str, **kw: Any) -> Any:
            calls.append(node)
            return await real(node, **kw)

        host.read_power_state = counted  # type: ignore[method-assign]
        for _ in range(3):
            assert (await c.get("/api/v1/servers", headers=ADMIN)).status_code == 200
            assert (await c.get("/api/v1/servers/bmc-1", headers=ADMIN)).status_code == 200
        assert calls == []


async def test_no_role_is_403_and_audited(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        problem(await c.get("/api/v1/servers", headers=NOBODY), 403, "policy")
        # may read nothing: the node is not found, as one that does not exist
        problem(await c.post("/api/v1/maintenances", headers=NOBODY,
                             json=ceremony("bmc-1", "cordon")), 404, "usage")
        assert surface_of(app).lifecycle.store.all() == []
        trail = (await c.get("/api/v1/audit", headers=ADMIN,
                             params={"actor": "mallory"})).json()["items"]
        assert {(r["action"], r["outcome"]) for r in trail} >= {
            ("servers:cordon", "denied")}
        assert all(r["via"] == "proxy" for r in trail)


async def test_identity_headers_only_from_the_proxy(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.1.2.3", 5555))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            problem(await c.get("/api/v1/servers", headers=ADMIN), 401, "policy")
            r = await c.post("/api/v1/maintenances", headers=ADMIN,
                             json=ceremony("bmc-1", "cordon"))
            problem(r, 401, "policy")
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert surface_of(app).lifecycle.store.all() == []
        denied = [r for r in surface_of(app).audit(None) if r.outcome == "denied"]
        assert denied and denied[-1].actor == "(unauthenticated)"
        assert denied[-1].action.value == "servers:cordon" and denied[-1].node == "bmc-1"


async def test_no_request_chooses_its_actor(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        for field in ("actor", "requestedBy", "identity"):
            body = ceremony("bmc-1", "cordon", **{field: "alice"})
            problem(await c.post("/api/v1/maintenances", headers=ENGINEER, json=body),
                    422, "usage")
        r = await c.post("/api/v1/maintenances", headers=ENGINEER,
                         json=ceremony("bmc-1", "cordon", onBehalfOf="alice"))
        assert r.status_code == 201
        assert r.json()["requestedBy"] == "eve" and r.json()["onBehalfOf"] == "alice"


async def test_ceremony_ladder_and_hazard(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        pre = (await c.post("/api/v1/preflight", headers=ADMIN,
                            json={"node": "bmc-1", "intent": "reboot"})).json()
        assert [s["step"] for s in pre["ceremony"]] == ["reason", "ack-preflight",
                                                        "typed-node"]
        assert pre["accepted"] and not pre["hazard"] and not pre["ceremonyComplete"]
        drain = (await c.post("/api/v1/preflight", headers=ADMIN,
                              json={"node": "bmc-1", "intent": "drain"})).json()
        assert [s["step"] for s in drain["ceremony"]] == ["reason", "ack-preflight"]
        doc = problem(await c.post("/api/v1/maintenances", headers=ADMIN,
                                   json=ceremony("bmc-1", "reboot", confirmNode="bmc-2")),
                      422, "usage")
        assert any("did not match" in p for p in doc["problems"])
        hazard = (await c.post("/api/v1/preflight", headers=ADMIN,
                               json=ceremony("cp-1", "reboot"))).json()
        assert hazard["hazard"] is True
        assert hazard["preflight"]["quorum"] == {"members": 5, "ready": 4, "quorum": 3,
                                                 "margin": 1, "member": True}
        assert [s["step"] for s in hazard["ceremony"]][-1] == "hazard-reason"
        problem(await c.post("/api/v1/maintenances", headers=ADMIN,
                             json=ceremony("cp-1", "reboot")), 422, "usage")
        assert surface_of(app).lifecycle.store.all() == []
        ok = await c.post("/api/v1/maintenances", headers=ADMIN,
                          json=ceremony("cp-1", "shutdown",
                                        hazardReason="replace the failed PSU now"))
        assert ok.status_code == 201 and ok.json()["hazard"] is True
        # cp-1 is out: a second member would drop below quorum, and no ceremony helps
        refused = (await c.post("/api/v1/preflight", headers=ADMIN,
                                json=ceremony("cp-2", "shutdown",
                                              hazardReason="replace the PSU too"))).json()
        assert refused["accepted"] is False
        assert refused["refusal"]["quorum"]["margin"] == 0
        doc = problem(await c.post("/api/v1/maintenances", headers=ADMIN,
                                   json=ceremony("cp-2", "shutdown",
                                                 hazardReason="replace the PSU too")),
                      409, "guard")
        assert doc["quorum"]["members"] == 5 and doc["quorum"]["quorum"] == 3


async def test_shutdown_power_off_confirmed_true_and_unknown(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        names = {}
        for node in ("bmc-1", "talos-1"):
            r = await c.post("/api/v1/maintenances", headers=ADMIN,
                             json=ceremony(node, "shutdown"))
            assert r.status_code == 201, r.text
            names[node] = r.json()["name"]
        for node, want in (("bmc-1", "True"), ("talos-1", "Unknown")):
            deadline = asyncio.get_running_loop().time() + 20
            while True:
                doc = (await c.get(f"/api/v1/maintenances/{names[node]}",
                                   headers=ADMIN)).json()
                poc = doc["powerOffConfirmed"]
                if doc["phase"] == "PoweredOff" and poc and poc["status"] != "False":
                    break
                assert asyncio.get_running_loop().time() < deadline, doc
                await asyncio.sleep(0.05)
            assert poc["status"] == want, poc
            assert poc["meaning"] and poc["message"]
        assert "cannot" in doc["powerOffConfirmed"]["meaning"]
        # return to service, as a request on the maintenance
        r = await c.post(f"/api/v1/maintenances/{names['bmc-1']}/return", headers=ADMIN,
                         json={"reason": "PSU replaced, back"})
        assert r.status_code == 200, r.text
        done = await wait_phase(c, names["bmc-1"], {"Complete"}, ADMIN)
        assert done["terminal"] is True
        problem(await c.post(f"/api/v1/maintenances/{names['bmc-1']}/abandon",
                             headers=ADMIN, json={"reason": "too late for that"}),
                404, "usage")
        r = await c.post(f"/api/v1/maintenances/{names['talos-1']}/abandon", headers=ADMIN,
                         json={"reason": "not needed after all"})
        assert r.status_code == 200 and r.json()["abandoned"]["by"] == "alice"
        trail = (await c.get("/api/v1/audit", headers=ADMIN,
                             params={"node": "bmc-1", "outcome": "accepted"})).json()
        actions = [r["action"] for r in trail["items"]]
        assert actions[-1] == "servers:shutdown"  # newest first
        assert sorted(actions[:-1]) == ["servers:power-on", "servers:uncordon"]
        only = (await c.get("/api/v1/audit", headers=ADMIN,
                            params={"action": "servers:maintenance-abandon"})).json()
        assert [r["node"] for r in only["items"]] == ["talos-1"]
        later = (await c.get("/api/v1/audit", headers=ADMIN,
                             params={"since": "2999-01-01T00:00:00Z"})).json()
        assert later["total"] == 0


async def test_unknown_things_are_problems(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        problem(await c.get("/api/v1/servers/nope", headers=ADMIN), 404, "usage")
        problem(await c.get("/api/v1/maintenances/nope", headers=ADMIN), 404, "usage")
        problem(await c.get("/api/v1/nothing-here", headers=ADMIN), 404, "usage")
        problem(await c.post("/api/v1/maintenances", headers=ADMIN,
                             json=ceremony("nope", "cordon")), 404, "usage")
        problem(await c.post("/api/v1/maintenances", headers=ADMIN,
                             content=b"{not json", ), 422, "usage")
        r = await c.post("/api/v1/maintenances", headers=ADMIN,
                         json=ceremony("inband-1", "shutdown"))
        problem(r, 409, "rule")


async def test_events_follow_a_cordon(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    with served(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            r = await c.post("/api/v1/maintenances", headers=ENGINEER,
                             json=ceremony("bmc-2", "cordon"))
            name = r.json()["name"]
            phases: list[str] = []
            async with c.stream("GET", f"/api/v1/maintenances/{name}/events",
                                headers=ENGINEER) as s:
                assert s.headers["content-type"].startswith("text/event-stream")
                async for line in s.aiter_lines():
                    if line.startswith("data: {\"name\""):
                        phases.append(json.loads(line[6:])["phase"])
                        if phases[-1] == "Cordoned":
                            break
            assert phases[-1] == "Cordoned"


@pytest.mark.parametrize("path", ["/", "/api/v1/servers", "/api/v1/openapi.json"])
async def test_security_headers(tmp_path: Path, path: str) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        r = await c.get(path, headers=ADMIN)
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"


async def test_body_limit_and_rate_limit(tmp_path: Path) -> None:
    from powerplane_servers.settings import Limits, ProxySettings, ServeSettings

    settings = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)),
                             limits=Limits(max_body_bytes=2048, act_burst=3,
                                           acts_per_minute=1))
    app = make_app(write_fleet(tmp_path), settings)
    async with client(app) as c:
        big = ceremony("bmc-1", "cordon", reason="x" * 4000)
        problem(await c.post("/api/v1/maintenances", headers=ADMIN, json=big), 413, "usage")
        codes = []
        for _ in range(5):
            r = await c.post("/api/v1/maintenances", headers=ENGINEER,
                             json=ceremony("bmc-1", "abandon-me"))
            codes.append(r.status_code)
        assert codes[:3] == [422, 422, 422] and codes[3:] == [429, 429]
        assert int(r.headers["retry-after"]) >= 1
        # another identity has its own bucket
        assert (await c.post("/api/v1/maintenances", headers=ADMIN,
                             json=ceremony("bmc-1", "cordon"))).status_code == 201
