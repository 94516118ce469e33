"""The surface worn down as an attacker would: every endpoint that costs work rate-limited
per identity (429 with Retry-After, the refusal audited and folded; an unauthenticated
caller by its address, checked before a token is verified); an unknown node and a forbidden
one answered alike, with no list of names, and so for a maintenance; the auth-proxy mode's
``Origin`` check on unsafe methods; the audit view saying whether the trail verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from servers_support import (
    ADMIN,
    ENGINEER,
    NOBODY,
    VIEWER,
    ceremony,
    client,
    make_app,
    surface_of,
    write_fleet,
)

from powerplane.authority.folding import denials_in
from powerplane_servers.origin import origin_refusal
from powerplane_servers.ratelimit import RateLimiter
from powerplane_servers.settings import Limits, ProxySettings, ServeSettings


def settings(**limits: Any) -> ServeSettings:
    return ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",),
                                             allowed_origins=("https://ops.example",)),
                         limits=Limits(**limits))


# -- the rate limit --------------------------------------------------------------------------
def test_the_buckets_are_bounded_and_a_forgotten_identity_starts_full() -> None:
    now = [0.0]
    limiter = RateLimiter(60, 2, max_keys=100, clock=lambda: now[0])
    for i in range(10_000):
        limiter.take(f"user-{i}")
    assert len(limiter) == 100
    assert [limiter.take("eve") for _ in range(2)] == [0, 0]
    assert limiter.take("eve") == pytest.approx(1.0)
    assert limiter.wait("eve") == pytest.approx(1.0)  # asking takes nothing
    now[0] = 1.0
    assert limiter.wait("eve") == 0 and limiter.take("eve") == 0
    assert limiter.wait("never-seen") == 0 and len(limiter) == 100


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/api/v1/servers", None),
    ("GET", "/api/v1/servers/bmc-1", None),
    ("GET", "/api/v1/maintenances", None),
    ("GET", "/api/v1/audit", None),
    ("GET", "/api/v1/whoami", None),
    ("POST", "/api/v1/preflight", ceremony("bmc-1", "reboot")),
])
async def test_every_endpoint_that_costs_work_is_rate_limited_per_identity(
        tmp_path: Path, method: str, path: str, body: dict[str, Any] | None) -> None:
    app = make_app(write_fleet(tmp_path), settings(request_burst=3, requests_per_minute=1))
    async with client(app) as c:
        codes = [(await c.request(method, path, headers=ADMIN, json=body)).status_code
                 for _ in range(5)]
        assert codes[:3] == [200] * 3 and codes[3:] == [429, 429]
        r = await c.request(method, path, headers=ADMIN, json=body)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["error"] == "RateLimited"
        # another identity has its own bucket
        assert (await c.request(method, path, headers=VIEWER, json=body)).status_code in (
            200, 404)
        surface_of(app).host.authority.flush_denials()  # as at close
        refused = [r for r in surface_of(app).audit(None) if r.actor == "alice"
                   and "rate limit" in r.rule]
        assert sum(denials_in(r) for r in refused) == 3  # folded, every one counted


async def test_failed_authentications_are_limited_by_address_before_a_token_is_read(
        tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path), settings(request_burst=2, requests_per_minute=1))
    async with client(app) as c:
        codes = [(await c.get("/api/v1/servers",
                              headers={"Authorization": "Bearer " + "[" * 5000})).status_code
                 for _ in range(4)]
        assert codes == [401, 401, 429, 429]
        # a good identity from the same (proxy) address is not held by the bad tokens
        assert (await c.get("/api/v1/servers", headers=ADMIN)).status_code == 200
        surface_of(app).host.authority.flush_denials()
        denied = [r for r in surface_of(app).audit(None) if r.actor == "(unauthenticated)"]
        assert sum(denials_in(r) for r in denied) == 4
        assert all("[[[" not in r.rule for r in denied)


# -- unknown and forbidden alike -------------------------------------------------------------
async def test_an_unknown_node_and_a_forbidden_one_get_the_same_answer(tmp_path: Path) -> None:
    cfg = write_fleet(tmp_path)
    app = make_app(cfg)
    async with client(app) as c:
        answers = []
        for node in ("bmc-1", "no-such-node"):
            for method, path, body in (
                    ("GET", f"/api/v1/servers/{node}", None),
                    ("POST", "/api/v1/preflight", ceremony(node, "cordon")),
                    ("POST", "/api/v1/maintenances", ceremony(node, "cordon")),
                    ("GET", "/api/v1/audit", None)):
                r = await c.request(method, path, headers=NOBODY, json=body,
                                    params={"node": node} if path.endswith("audit") else None)
                doc = r.json()
                answers.append((r.status_code, doc["title"], doc["error"],
                                doc["detail"].replace(node, "NODE"), sorted(doc)))
                assert "cp-1" not in r.text and "talos-1" not in r.text  # no names listed
        assert answers[:4] == answers[4:]
        assert {a[0] for a in answers} == {404}
        # one who may read is told the node is unknown, still without the names
        r = await c.get("/api/v1/servers/no-such-node", headers=ADMIN)
        assert r.status_code == 404 and "cp-1" not in r.text
        denied = [r for r in surface_of(app).audit(None) if r.actor == "mallory"]
        assert {(r.action.value, r.node) for r in denied} >= {
            ("servers:read", "bmc-1"), ("servers:cordon", "bmc-1")}


async def test_a_maintenance_name_cannot_be_probed(tmp_path: Path) -> None:
    app = make_app(write_fleet(tmp_path))
    async with client(app) as c:
        r = await c.post("/api/v1/maintenances", headers=ENGINEER,
                         json=ceremony("bmc-2", "cordon"))
        name = r.json()["name"]
        answers = []
        for probe in (name, "no-such-maintenance"):
            for method, path in (("GET", f"/api/v1/maintenances/{probe}"),
                                 ("GET", f"/api/v1/maintenances/{probe}/events"),
                                 ("POST", f"/api/v1/maintenances/{probe}/abandon")):
                r = await c.request(method, path, headers=NOBODY,
                                    json={"reason": "x"} if method == "POST" else None)
                doc = r.json()
                answers.append((r.status_code, doc["title"], doc["error"],
                                doc["detail"].replace(probe, "NAME"), sorted(doc)))
        assert answers[:3] == answers[3:] and {a[0] for a in answers} == {404}
        assert (await c.get(f"/api/v1/maintenances/{name}", headers=VIEWER)).status_code == 200


# -- Origin in the auth-proxy mode -----------------------------------------------------------
@pytest.mark.parametrize(("extra", "refused"), [
    ({"Origin": "https://evil.example"}, True),
    ({"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, True),
    ({"Origin": "null"}, True),
    ({"Origin": "http://testserver"}, False),          # its own (the request's Host)
    ({"Origin": "https://ops.example"}, False),        # proxy.allowed_origins
    ({"Sec-Fetch-Site": "same-site"}, True),           # a browser, no Origin
    ({"Sec-Fetch-Site": "same-origin"}, False),
    ({"Cookie": "proxy_session=1"}, True),             # an old browser's ambient credential
    ({}, False),                                       # a script: nothing to borrow
])
async def test_unsafe_methods_through_the_proxy_check_origin(
        tmp_path: Path, extra: dict[str, str], refused: bool) -> None:
    app = make_app(write_fleet(tmp_path), settings())
    async with client(app) as c:
        r = await c.post("/api/v1/maintenances", headers={**ENGINEER, **extra},
                         json=ceremony("bmc-1", "cordon"))
        if refused:
            assert r.status_code == 403 and r.json()["error"] == "CsrfFailed", r.text
            assert surface_of(app).lifecycle.store.all() == []
            denied = [x for x in surface_of(app).audit(None) if x.outcome == "denied"]
            assert denied and denied[-1].action.value == "servers:cordon"
            assert denied[-1].actor == "eve" and "auth proxy" in denied[-1].rule
        else:
            assert r.status_code == 201, r.text
        # reads are not checked: a safe method changes nothing
        assert (await c.get("/api/v1/servers", headers={**ENGINEER, **extra})
                ).status_code == 200


def test_origin_ports_default_by_scheme() -> None:
    host = {"host": "servers.plant.example"}
    assert origin_refusal({**host, "origin": "https://servers.plant.example"}, ()) is None
    assert origin_refusal({**host, "origin": "https://servers.plant.example:444"}, ())
    assert origin_refusal({"host": "h:8480", "origin": "http://h:8480"}, ()) is None
    assert origin_refusal({"host": "h:8480", "origin": "http://h:8481"}, ())


# -- the audit view verifies -----------------------------------------------------------------
async def test_the_audit_view_says_whether_the_trail_verifies(tmp_path: Path) -> None:
    import yaml

    cfg = write_fleet(tmp_path)
    doc = yaml.safe_load(cfg.read_text())
    doc["audit"] = {"path": str(tmp_path / "audit.jsonl")}
    cfg.write_text(yaml.safe_dump(doc))
    roles_file = tmp_path / "roles.yaml"
    roles = yaml.safe_load(roles_file.read_text())
    roles["roles"]["plant-b-viewer"] = {"tier": "read", "sites": ["plant-b"]}
    roles["bindings"].append({"role": "plant-b-viewer", "users": ["sam"]})
    roles_file.write_text(yaml.safe_dump(roles))
    app = make_app(cfg)
    async with client(app) as c:
        for node in ("bmc-1", "bmc-2"):
            r = await c.post("/api/v1/maintenances", headers=NOBODY,
                             json=ceremony(node, "cordon"))
            assert r.status_code == 404
        surface_of(app).host.authority.flush_denials()
        page = (await c.get("/api/v1/audit", headers=ADMIN)).json()
        verification = page["verification"]
        assert verification["intact"] is True
        trails = {t["trail"]: t for t in verification["trails"]}
        mine = trails[f"audit file {tmp_path / 'audit.jsonl'}"]
        assert mine["records"] >= 4 and mine["firstBad"] is None
        assert "intact" in mine["summary"]
        # an inspector's worst day: one actor rewritten
        path = tmp_path / "audit.jsonl"
        lines = path.read_text().splitlines()
        lines[1] = lines[1].replace('"mallory"', '"root"')
        path.write_text("\n".join(lines) + "\n")
        page = (await c.get("/api/v1/audit", headers=ADMIN)).json()
        verification = page["verification"]
        assert verification["intact"] is False
        bad = next(t for t in verification["trails"] if not t["intact"])
        assert bad["firstBad"] == 2 and "changed" in bad["problem"]
        # one who may read only some of the nodes it names: whether, and where, not what
        page = (await c.get("/api/v1/audit", headers={"X-Forwarded-User": "sam"})).json()
        assert page["verification"]["intact"] is False
        told = next(t for t in page["verification"]["trails"] if not t["intact"])
        assert told["firstBad"] == 2 and "mallory" not in str(told) and told["records"] is None


async def test_a_refusal_echoes_no_long_attacker_text(tmp_path: Path) -> None:
    from oidc_support import b64
    from servers_support import oidc_settings_for_routes

    app = make_app(write_fleet(tmp_path), oidc_settings_for_routes())
    token = ".".join([b64(b'{"alg": "' + b"X" * 10_000 + b'"}'), b64(b"{}"), "c2ln"])
    async with client(app) as c:
        r = await c.post("/api/v1/maintenances", headers={"Authorization": f"Bearer {token}"},
                         json=ceremony("bmc-1", "cordon"))
        assert r.status_code == 401 and len(r.text) < 1000
        surface_of(app).host.authority.flush_denials()
        [denied] = [x for x in surface_of(app).audit(None) if x.actor == "(unauthenticated)"]
        assert len(denied.rule) < 500 and denied.action.value == "servers:cordon"
