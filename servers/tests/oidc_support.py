"""A real OpenID Connect provider on loopback (oidc-provider-mock: authlib's server side)
and tokens obtained from it the way a client does (authorization code, then token)."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from oidc_provider_mock import run_server_in_thread  # type: ignore[import-untyped]


@dataclass
class Issuer:
    url: str

    def set_user(self, sub: str, **claims: object) -> None:
        r = httpx.put(f"{self.url}/users/{sub}", json=claims)
        r.raise_for_status()

    def id_token(self, sub: str, client_id: str = "powerplane-api") -> str:
        """An ID token for ``sub`` issued to ``client_id`` (its audience)."""
        redirect = "http://127.0.0.1:9/callback"
        with httpx.Client(base_url=self.url) as c:
            r = c.post("/oauth2/authorize", data={"sub": sub}, params={
                "client_id": client_id, "redirect_uri": redirect, "response_type": "code",
                "scope": "openid profile", "state": "s", "nonce": "n"})
            assert r.status_code == 302, r.text
            query = urllib.parse.urlparse(r.headers["location"]).query
            code = urllib.parse.parse_qs(query)["code"][0]
            t = c.post("/oauth2/token", data={
                "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
                "client_id": client_id, "client_secret": "unused"})
            t.raise_for_status()
            token = t.json()["id_token"]
        assert isinstance(token, str)
        return token


@contextlib.contextmanager
def issuer(max_age_s: int = 3600) -> Iterator[Issuer]:
    with run_server_in_thread(access_token_max_age=dt.timedelta(seconds=max_age_s)) as srv:
        yield Issuer(f"http://localhost:{srv.server_port}")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parts(token: str) -> tuple[dict[str, object], dict[str, object], str]:
    h, p, s = token.split(".")
    return json.loads(unb64(h)), json.loads(unb64(p)), s


def compact(header: dict[str, object], payload: dict[str, object], sig: str) -> str:
    return ".".join([b64(json.dumps(header).encode()), b64(json.dumps(payload).encode()),
                     sig])
