"""Keystone v3 tokens: issued with a password or an application credential, cached.

``POST {auth_url}/auth/tokens`` answers ``201`` with the token in the
``X-Subject-Token`` header and, in the body, ``token.expires_at`` and
``token.catalog`` (where the compute endpoint is found). A token is reused until
a minute before it expires, or until the Compute API answers ``401`` with it: then
one new token is issued (concurrent callers holding the same stale token share it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from typing import Any

import httpx

from powerplane import AuthenticationFailed, ChannelError, ProtocolError
from powerplane_cloud.config import (
    ApplicationCredentialAuth,
    OpenStackConfig,
    PasswordAuth,
)
from powerplane_cloud.errors import api_message, map_status, map_transport

__all__ = ["Keystone", "Token", "auth_body"]

_MARGIN = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class Token:
    """A Keystone token and the compute endpoint it was issued with."""

    value: str
    expires_at: dt.datetime | None
    compute_url: str

    def __repr__(self) -> str:  # never show the token itself
        return f"Token(expires_at={self.expires_at}, compute_url={self.compute_url!r})"


def auth_body(auth: PasswordAuth | ApplicationCredentialAuth) -> dict[str, Any]:
    """The request body of ``POST /v3/auth/tokens`` (it holds the secret: never log it)."""
    if isinstance(auth, ApplicationCredentialAuth):
        return {"auth": {"identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": auth.id, "secret": auth.secret.reveal()},
        }}}
    project: dict[str, Any] = (
        {"id": auth.project_id}
        if auth.project_id is not None
        else {"name": auth.project_name, "domain": {"name": auth.project_domain_name}}
    )
    return {"auth": {
        "identity": {
            "methods": ["password"],
            "password": {"user": {
                "name": auth.username,
                "domain": {"name": auth.user_domain_name},
                "password": auth.password.reveal(),
            }},
        },
        "scope": {"project": project},
    }}


def _compute_url(catalog: Any, config: OpenStackConfig) -> str | None:
    if not isinstance(catalog, list):
        return None
    for service in catalog:
        if not isinstance(service, dict) or service.get("type") != "compute":
            continue
        for ep in service.get("endpoints", []):
            if not isinstance(ep, dict) or ep.get("interface") != config.interface:
                continue
            if config.region is not None and config.region not in (
                ep.get("region"), ep.get("region_id")
            ):
                continue
            url = ep.get("url")
            if isinstance(url, str) and url:
                return url.rstrip("/")
    return None


class Keystone:
    """Issues and caches the tokens of one channel."""

    def __init__(self, config: OpenStackConfig, channel: str) -> None:
        self.config = config
        self.channel = channel
        self._token: Token | None = None
        self._lock = asyncio.Lock()
        self.issued = 0
        """Tokens issued so far."""

    def _fresh(self, token: Token) -> bool:
        if token.expires_at is None:
            return True
        return token.expires_at - dt.datetime.now(dt.UTC) > _MARGIN

    async def token(self, client: httpx.AsyncClient, *, stale: Token | None = None) -> Token:
        """A valid token; ``stale``: the token the API just rejected (renew unless done)."""
        async with self._lock:
            current = self._token
            if current is not None and current is not stale and self._fresh(current):
                return current
            self._token = await self._issue(client)
            return self._token

    async def _issue(self, client: httpx.AsyncClient) -> Token:
        url = f"{self.config.identity_url}/auth/tokens"
        what = "Keystone authentication"
        try:
            response = await client.post(url, json=auth_body(self.config.auth))
        except httpx.HTTPError as exc:
            raise map_transport(exc, channel=self.channel, target=None, what=what) from exc
        self.issued += 1
        if response.status_code == 401:
            raise AuthenticationFailed(
                f"Keystone rejected the credentials ({api_message(response)})",
                channel=self.channel,
            )
        if response.status_code == 404:
            raise ProtocolError(f"no Keystone v3 token API at {url}", channel=self.channel)
        if response.status_code >= 400:
            raise map_status(response, channel=self.channel, target=None, what=what)
        value = response.headers.get("X-Subject-Token")
        try:
            body = response.json()["token"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"{what}: the answer has no token body",
                                channel=self.channel) from exc
        if not value or not isinstance(body, dict):
            raise ProtocolError(f"{what}: the answer has no X-Subject-Token",
                                channel=self.channel)
        expires: dt.datetime | None = None
        if isinstance(body.get("expires_at"), str):
            try:
                expires = dt.datetime.fromisoformat(body["expires_at"])
            except ValueError as exc:
                raise ProtocolError(f"{what}: unreadable expires_at",
                                    channel=self.channel) from exc
            if expires.tzinfo is None:
                expires = expires.replace(tzinfo=dt.UTC)
        compute = self.config.compute_url or _compute_url(body.get("catalog"), self.config)
        if compute is None:
            where = f" in region {self.config.region}" if self.config.region else ""
            raise ChannelError(
                f"the service catalog has no {self.config.interface} compute endpoint{where}",
                channel=self.channel,
            )
        return Token(value, expires, compute.rstrip("/"))
