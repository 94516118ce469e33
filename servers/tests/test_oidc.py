"""Bearer tokens from a real OpenID Connect provider on loopback: a good token acts as its
user; an expired one, a wrong audience, another issuer, ``alg: none``, an unknown ``kid``,
a forged signature and a user with no role are each 401 or 403 with a problem document,
nothing is done, and the denial is audited. The page's login (code flow with PKCE) against
the same provider: an HttpOnly Secure SameSite=Strict session with CSRF protection."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from oidc_support import Issuer, compact, issuer, parts
from servers_support import ceremony, client, make_app, surface_of, write_fleet

from powerplane_servers.settings import OidcSettings, SecretRef, ServeSettings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def idp() -> Iterator[Issuer]:
    with issuer() as found:
        found.set_user("alice", groups=["plant-admins"])
        found.set_user("eve", groups=["plant-eng"])
        found.set_user("mallory", groups=["visitors"])
        yield found


def settings_for(url: str) -> ServeSettings:
    return ServeSettings(oidc=OidcSettings(issuer=url, audience="powerplane-api",
                                           leeway_s=0, client_id="powerplane-web"))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def refused_and_nothing_done(tmp_path: Path, settings: ServeSettings, token: str,
                                   status: int, words: str, act_status: int | None = None,
                                   ) -> None:
    """The list and an act refused (``act_status``: the act's, where it differs: a caller
    who may read nothing is told a node is not found, as for one that does not exist)."""
    app = make_app(write_fleet(tmp_path), settings)
    async with client(app) as c:
        for r in (await c.get("/api/v1/servers", headers=bearer(token)),
                  await c.post("/api/v1/maintenances", headers=bearer(token),
                               json=ceremony("bmc-1", "cordon"))):
            assert token not in r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            doc = r.json()
            if act_status is not None and r.request.method == "POST":
                assert r.status_code == act_status, r.text
                continue
            assert r.status_code == status, r.text
            assert doc["cause"] == "policy" and words in doc["detail"], doc
        surface = surface_of(app)
        assert surface.lifecycle.store.all() == []
        denied = [r for r in surface.audit(None) if r.outcome == "denied"]
        assert any(r.action.value == "servers:cordon" and r.node == "bmc-1"
                   for r in denied), denied


async def test_a_good_token_acts_as_its_user(tmp_path: Path, idp: Issuer) -> None:
    app = make_app(write_fleet(tmp_path), settings_for(idp.url))
    async with client(app) as c:
        token = idp.id_token("eve")
        me = (await c.get("/api/v1/whoami", headers=bearer(token))).json()
        assert me == {"user": "eve", "groups": ["plant-eng"], "via": "oidc",
                      "csrfToken": None}
        r = await c.post("/api/v1/maintenances", headers=bearer(token),
                         json=ceremony("bmc-1", "cordon"))
        assert r.status_code == 201 and r.json()["requestedBy"] == "eve"
        r = await c.post("/api/v1/maintenances", headers=bearer(token),
                         json=ceremony("bmc-2", "reboot"))
        assert r.status_code == 403 and r.json()["cause"] == "policy"
        trail = surface_of(app).audit(None)
        assert [(a.actor, a.via, a.outcome) for a in trail] == [
            ("eve", "oidc", "accepted"), ("eve", "oidc", "denied")]


async def test_expired(tmp_path: Path) -> None:
    with issuer(max_age_s=1) as short:
        token = short.id_token("alice")
        time.sleep(2.2)
        await refused_and_nothing_done(tmp_path, settings_for(short.url), token, 401, "exp")


async def test_wrong_audience(tmp_path: Path, idp: Issuer) -> None:
    token = idp.id_token("alice", client_id="another-application")
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401, "aud")


async def test_another_issuer(tmp_path: Path, idp: Issuer) -> None:
    with issuer() as other:
        token = other.id_token("alice")
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401,
                                   "signature")


async def test_the_issuer_is_checked_after_the_signature(idp: Issuer) -> None:
    # a token signed by the configured issuer's own key but naming another iss (what a
    # second tenant of one signing service would hand out) is refused by the iss check
    from powerplane_servers.auth import OidcVerifier, Unauthenticated

    good = OidcVerifier(OidcSettings(issuer=idp.url, audience="powerplane-api"))
    meta = await good.metadata()
    other = OidcVerifier(OidcSettings(issuer=idp.url + "/tenant-b",
                                      audience="powerplane-api"))
    other._meta = meta  # the same keys, another expected issuer
    token = idp.id_token("alice")
    assert (await good.verify(token))["sub"] == "alice"
    with pytest.raises(Unauthenticated, match="iss"):
        await other.verify(token)
    await good.close()
    await other.close()


async def test_alg_none(tmp_path: Path, idp: Issuer) -> None:
    _, payload, _ = parts(idp.id_token("alice"))
    token = compact({"alg": "none", "typ": "JWT"}, payload, "")
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401,
                                   "'none' is not allowed")


async def test_unknown_kid(tmp_path: Path, idp: Issuer) -> None:
    _, payload, _ = parts(idp.id_token("alice"))
    mine = RSAKey.generate_key(2048)
    token = jwt.encode({"alg": "RS256", "kid": "retired-2025"}, payload, mine)
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401, "kid")


async def test_forged_signature(tmp_path: Path, idp: Issuer) -> None:
    header, payload, sig = parts(idp.id_token("eve"))
    payload["groups"] = ["plant-admins"]  # eve makes herself an admin
    token = compact(header, payload, sig)
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401,
                                   "signature")
    # signed by a key of its own under no kid: the issuer's one key does not verify it
    mine = RSAKey.generate_key(2048)
    token = jwt.encode({"alg": "RS256"}, payload, mine)
    (tmp_path / "b").mkdir()
    await refused_and_nothing_done(tmp_path / "b", settings_for(idp.url), token, 401,
                                   "signature")


async def test_a_user_with_no_role(tmp_path: Path, idp: Issuer) -> None:
    token = idp.id_token("mallory")
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 403, "denied",
                                   act_status=404)


async def test_hmac_algorithms_cannot_be_allowed() -> None:
    with pytest.raises(ValueError, match="HS256"):
        OidcSettings(issuer="http://x", audience="a", algorithms=("HS256",))


async def test_page_login_code_flow_with_pkce(tmp_path: Path, idp: Issuer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_CLIENT_SECRET", "s3cret-of-the-web-client")
    settings = settings_for(idp.url)
    assert settings.oidc is not None
    settings = settings.model_copy(update={"oidc": settings.oidc.model_copy(update={
        "client_secret": SecretRef(env="PP_TEST_CLIENT_SECRET")})})
    app = make_app(write_fleet(tmp_path), settings)
    async with client(app) as c:
        login = await c.get("/auth/login")
        assert login.status_code == 302
        where = urllib.parse.urlparse(login.headers["location"])
        query = dict(urllib.parse.parse_qsl(where.query))
        assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
        assert query["client_id"] == "powerplane-web" and query["state"] and query["nonce"]
        # the person logs in at the issuer, which sends the browser back with a code
        back = httpx.post(f"{idp.url}{where.path}", params=query, data={"sub": "eve"})
        assert back.status_code == 302
        callback = urllib.parse.urlparse(back.headers["location"])
        done = await c.get(f"{callback.path}?{callback.query}")
        assert done.status_code == 303, done.text
        cookie = done.headers["set-cookie"]
        assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=strict" in cookie
        sid = cookie.split(";")[0]
        session = {"Cookie": sid}
        me = (await c.get("/api/v1/whoami", headers=session)).json()
        assert me["user"] == "eve" and me["via"] == "oidc" and me["csrfToken"]
        no_csrf = await c.post("/api/v1/maintenances", headers=session,
                               json=ceremony("bmc-1", "cordon"))
        assert no_csrf.status_code == 403 and no_csrf.json()["error"] == "CsrfFailed"
        wrong = await c.post("/api/v1/maintenances",
                             headers={**session, "X-CSRF-Token": "guess"},
                             json=ceremony("bmc-1", "cordon"))
        assert wrong.status_code == 403
        assert surface_of(app).lifecycle.store.all() == []
        ok = await c.post("/api/v1/maintenances",
                          headers={**session, "X-CSRF-Token": me["csrfToken"]},
                          json=ceremony("bmc-1", "cordon"))
        assert ok.status_code == 201 and ok.json()["requestedBy"] == "eve"
        # a replayed callback (the state is used up) starts no session
        again = await c.get(f"{callback.path}?{callback.query}")
        assert again.status_code == 401
        out = await c.post("/auth/logout", headers={**session,
                                                    "X-CSRF-Token": me["csrfToken"]})
        assert out.status_code == 204
        assert (await c.get("/api/v1/whoami", headers=session)).status_code == 401
        assert "s3cret" not in login.text + done.text + str(me)


async def test_no_token_in_any_log_audit_or_response(
        tmp_path: Path, idp: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    good = idp.id_token("alice")
    header, payload, sig = parts(good)
    forged = compact(header, {**payload, "sub": "root"}, sig)
    app = make_app(write_fleet(tmp_path), settings_for(idp.url))
    seen: list[str] = []
    async with client(app) as c:
        for token in (good, forged):
            for r in (await c.get("/api/v1/servers", headers=bearer(token)),
                      await c.post("/api/v1/maintenances", headers=bearer(token),
                                   json=ceremony("bmc-1", "cordon"))):
                seen.append(r.text + str(r.headers))
        trail = [str(r.as_dict()) for r in surface_of(app).audit(None)]
    for token in (good, forged):
        for part in token.split(".")[1:]:
            assert part not in caplog.text
            assert not any(part in text for text in seen + trail)


# -- claims strictly typed, JOSE bounded before it is parsed ----------------------------------
@pytest.mark.parametrize("groups", [{"plant-admins": False}, "plant-admins",
                                    ["plant-admins", 7], [["plant-admins"]]])
async def test_a_groups_claim_that_is_not_an_array_of_strings_is_refused(
    tmp_path: Path, idp: Issuer, groups: object,
) -> None:
    """The issuer signs it, so the signature verifies: the claim's shape is what refuses it
    (an object's keys are never read as groups: ``{"plant-admins": false}`` once made a
    cordon-only user an admin)."""
    idp.set_user("erin", groups=groups)
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), idp.id_token("erin"),
                                   401, "'groups' claim must be an array of strings")


async def test_a_username_claim_that_is_not_a_string_is_refused(
    tmp_path: Path, idp: Issuer,
) -> None:
    idp.set_user("frank", groups=["plant-admins"], preferred_username=42)
    settings = ServeSettings(oidc=OidcSettings(
        issuer=idp.url, audience="powerplane-api", leeway_s=0,
        username_claim="preferred_username"))
    await refused_and_nothing_done(tmp_path, settings, idp.id_token("frank"), 401,
                                   "'preferred_username' claim must be a non-empty string")


@pytest.mark.parametrize("what", ["deep-header", "deep-claims", "long"])
async def test_hostile_jose_is_a_401_never_a_500_and_logs_no_traceback(
    tmp_path: Path, idp: Issuer, what: str, caplog: pytest.LogCaptureFixture,
) -> None:
    from oidc_support import b64

    good = idp.id_token("eve")
    h, p, s = good.split(".")
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    long = b'{"x":"' + b"a" * 40_000 + b'"}'
    token = {"deep-header": ".".join((b64(b"[" * 5000), p, s)),
             "deep-claims": ".".join((h, b64(deep), s)),
             "long": ".".join((h, b64(long), s))}[what]
    await refused_and_nothing_done(tmp_path, settings_for(idp.url), token, 401,
                                   "bearer token")
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text
