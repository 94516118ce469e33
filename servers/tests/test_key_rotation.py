"""Key rotation by ``kid``: a token signed by a key the verifier has not seen fetches the
issuer's JWKS again (at most every ``jwks_refresh_min_s``) and verifies once the issuer
publishes the key; a key the issuer retired stops verifying after the next fetch. The
issuer here is an in-memory discovery document and JWKS behind httpx's mock transport
(what rotates is the key set; the provider tests use a real issuer)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from powerplane_servers.auth import OidcVerifier, Unauthenticated
from powerplane_servers.settings import OidcSettings

ISSUER = "https://issuer.example.test"


class KeySetIssuer:
    def __init__(self) -> None:
        self.keys: dict[str, RSAKey] = {}
        self.jwks_fetches = 0

    def add(self, kid: str) -> RSAKey:
        key = RSAKey.generate_key(2048, parameters={"kid": kid})
        self.keys[kid] = key
        return key

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"})
        if request.url.path == "/jwks":
            self.jwks_fetches += 1
            return httpx.Response(200, json={"keys": [
                {**k.as_dict(private=False), "kid": kid, "use": "sig", "alg": "RS256"}
                for kid, k in self.keys.items()]})
        return httpx.Response(404)

    def token(self, kid: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": "api", "sub": "alice", "exp": now + 300,
                "iat": now, **claims}
        return jwt.encode({"alg": "RS256", "kid": kid}, body, self.keys[kid])


def verifier(issuer: KeySetIssuer, refresh_s: float) -> OidcVerifier:
    client = httpx.AsyncClient(transport=httpx.MockTransport(issuer.handler))
    return OidcVerifier(OidcSettings(issuer=ISSUER, audience="api",
                                     jwks_refresh_min_s=refresh_s), client=client)


async def test_a_new_key_is_fetched_when_its_kid_appears() -> None:
    issuer = KeySetIssuer()
    issuer.add("2026-a")
    v = verifier(issuer, refresh_s=0)
    assert (await v.verify(issuer.token("2026-a")))["sub"] == "alice"
    assert issuer.jwks_fetches == 1
    issuer.add("2026-b")  # the issuer rotates: a new key, published beside the old
    assert (await v.verify(issuer.token("2026-b")))["sub"] == "alice"
    assert issuer.jwks_fetches == 2
    assert (await v.verify(issuer.token("2026-b")))["sub"] == "alice"
    assert issuer.jwks_fetches == 2  # a known kid fetches nothing
    old = issuer.token("2026-a")
    del issuer.keys["2026-a"]  # retired
    issuer.add("2026-c")
    await v.verify(issuer.token("2026-c"))
    with pytest.raises(Unauthenticated, match="kid"):
        await v.verify(old)
    await v.close()


async def test_unknown_kids_refetch_at_most_every_refresh_interval() -> None:
    issuer = KeySetIssuer()
    issuer.add("k1")
    v = verifier(issuer, refresh_s=3600)
    await v.verify(issuer.token("k1"))
    stranger = KeySetIssuer()
    stranger.add("forged-1")
    stranger.add("forged-2")
    for kid in ("forged-1", "forged-2", "forged-1"):
        with pytest.raises(Unauthenticated, match="kid"):
            await v.verify(stranger.token(kid))
    assert issuer.jwks_fetches == 1  # a flood of unknown kids cannot hammer the issuer
    await v.close()
