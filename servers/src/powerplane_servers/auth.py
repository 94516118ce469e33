"""Who is asking: an identity established by authentication, never by the request's body.

Three ways, tried in this order for each request:

- ``Authorization: Bearer <JWT>``: an OpenID Connect token verified against the issuer's
  discovery document and JWKS (joserfc): the signature by the key its ``kid`` names (an
  unknown ``kid`` refetches the JWKS, at most every ``jwks_refresh_min_s``: key rotation),
  the algorithm from the allow-list (never ``none``, never a shared-secret HMAC), ``iss``,
  ``aud``, ``exp`` and ``nbf`` (each required, with ``leeway_s``); the user from
  ``username_claim`` and the groups from ``groups_claim``. ``via`` is ``oidc``.
- the page's session cookie (the authorization-code flow with PKCE, :mod:`.session`).
- the auth-proxy mode: ``X-Forwarded-User`` / ``X-Forwarded-Groups`` believed only from a
  configured proxy address (``proxy.trusted``); from any other address they are ignored.
  ``via`` is ``proxy``.

In Kubernetes mode (:mod:`.gateway`) a bearer token is reviewed by the API server
(:func:`kubernetes_identity`: a ``TokenReview`` by the server's own ServiceAccount), and
the identity is the API server's answer, user and groups, ``via`` ``kubernetes``: what
the API server will put in ``request.userInfo`` when the token is passed through. A token
of the configured OIDC issuer is verified as above *and* reviewed, and the two must name
the same user (``via`` ``oidc``, the groups the API server's): the policy port, the audit
record and the API server see one identity, or the request is refused.

Anything else is 401 with a problem document. No token, claim or header value is logged.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from powerplane import Identity
from powerplane_servers.gateway import Gateway
from powerplane_servers.problems import ProblemError
from powerplane_servers.settings import OidcSettings, ProxySettings

__all__ = ["MAX_DEPTH", "MAX_TOKEN", "OidcVerifier", "ProviderMetadata", "Unauthenticated",
           "is_loopback", "kubernetes_identity", "proxy_identity"]


class Unauthenticated(ProblemError):
    """401: no credentials, or credentials that do not verify (the reason, never the token)."""

    def __init__(self, detail: str) -> None:
        super().__init__(401, "Not authenticated", detail, "policy", error="Unauthenticated",
                         exit_code=3,
                         headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    jwks_uri: str
    authorization_endpoint: str | None
    token_endpoint: str | None


MAX_TOKEN = 16_384
"""The longest bearer token read (characters): an ID or access token with many groups is a
few kilobytes; a longer one is refused (401) before any of it is decoded."""
MAX_DEPTH = 16
"""The deepest nesting of a token's header or claims read: deeper is refused (401) before
the JSON is parsed (a header of 5,000 nested ``[`` is a 401, never a 500)."""


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped), read
    in one pass without building anything."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _b64json(segment: str) -> dict[str, Any]:
    """One base64url segment of a JWT as a JSON object, bounded before it is parsed
    (:data:`MAX_TOKEN`, :data:`MAX_DEPTH`); ``ValueError`` for anything else."""
    if len(segment) > MAX_TOKEN:
        raise ValueError("too long")
    pad = "=" * (-len(segment) % 4)
    try:
        text = base64.urlsafe_b64decode(segment + pad).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not base64url of UTF-8 text") from None
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


class OidcVerifier:
    """Verifies bearer tokens of one issuer (see the module docstring)."""

    def __init__(self, settings: OidcSettings, *,
                 client: httpx.AsyncClient | None = None) -> None:
        self.settings = settings
        self._client = client
        self._meta: ProviderMetadata | None = None
        self._keys: KeySet | None = None
        self._kids: set[str] = set()
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def metadata(self) -> ProviderMetadata:
        if self._meta is None:
            url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
            resp = await self._http().get(url)
            resp.raise_for_status()
            doc = resp.json()
            if doc.get("issuer") != self.settings.issuer:
                raise ValueError(f"the discovery document names issuer {doc.get('issuer')!r}, "
                                 f"not {self.settings.issuer!r}")
            self._meta = ProviderMetadata(
                issuer=str(doc["issuer"]), jwks_uri=str(doc["jwks_uri"]),
                authorization_endpoint=doc.get("authorization_endpoint"),
                token_endpoint=doc.get("token_endpoint"))
        return self._meta

    async def _load_keys(self, force: bool) -> KeySet:
        async with self._lock:
            now = time.monotonic()
            if self._keys is not None and not force:
                return self._keys
            if (self._keys is not None and force
                    and now - self._fetched_at < self.settings.jwks_refresh_min_s):
                return self._keys
            meta = await self.metadata()
            resp = await self._http().get(meta.jwks_uri)
            resp.raise_for_status()
            doc = resp.json()
            keys = [k for k in doc.get("keys", []) if k.get("use", "sig") == "sig"]
            self._keys = KeySet.import_key_set({"keys": keys})
            self._kids = {str(k["kid"]) for k in keys if "kid" in k}
            self._fetched_at = now
            return self._keys

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or :class:`Unauthenticated` saying what failed."""
        if len(token) > MAX_TOKEN:
            raise Unauthenticated(f"the bearer token is longer than {MAX_TOKEN} characters")
        parts = token.split(".")
        if len(parts) != 3:
            raise Unauthenticated("the bearer token is not a signed JWT (JWS compact)")
        try:
            header = _b64json(parts[0])
            _b64json(parts[1])  # the claims bounded too, before the library parses them
        except (ValueError, TypeError, RecursionError):
            raise Unauthenticated("the bearer token's header or claims are not readable "
                                  f"(JSON objects nested at most {MAX_DEPTH} deep)") from None
        alg = header.get("alg")
        if alg not in self.settings.algorithms:
            raise Unauthenticated(f"the token's algorithm {str(alg)[:32]!r} is not allowed "
                                  f"(allowed: {', '.join(self.settings.algorithms)})")
        kid = header.get("kid")
        if kid is not None and (not isinstance(kid, str) or not kid):
            raise Unauthenticated("the token's key id (kid) is not a name")
        try:
            keys = await self._load_keys(force=False)
            if kid is not None and kid not in self._kids:
                keys = await self._load_keys(force=True)  # the issuer may have rotated
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise ProblemError(503, "Issuer unavailable",
                               f"the issuer's keys could not be read ({type(exc).__name__})",
                               "channel", error="IssuerUnavailable", exit_code=1) from None
        key: Any
        if kid is None:
            # OpenID Connect Core 10.1: a kid may be left out only where the issuer has
            # one signing key
            if len(keys.keys) != 1:
                raise Unauthenticated("the token names no key (kid) and the issuer has "
                                      f"{len(keys.keys)} keys")
            key = keys.keys[0]
        elif kid not in self._kids:
            raise Unauthenticated("the token's key (kid) is not among the issuer's keys")
        else:
            key = keys
        try:
            decoded = jwt.decode(token, key, algorithms=list(self.settings.algorithms))
        except JoseError:
            raise Unauthenticated("the token's signature does not verify") from None
        except (ValueError, TypeError, RecursionError):
            raise Unauthenticated("the token could not be decoded") from None
        claims = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=self.settings.leeway_s,
            iss={"essential": True, "value": self.settings.issuer},
            aud={"essential": True, "value": self.settings.audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            what = getattr(exc, "claim", None) or getattr(exc, "error", "claims")
            raise Unauthenticated(f"the token's claims do not verify ({what})") from None
        return claims

    def identity(self, claims: dict[str, Any]) -> Identity:
        """The identity the claims name, strictly typed: the username claim a non-empty
        string; the groups claim, when present, an array of strings (anything else, an
        object such as ``{"plant-admins": false}`` among them, is 401 naming the claim:
        never read for its keys)."""
        name = self.settings.username_claim
        user = claims.get(name)
        if not isinstance(user, str) or not user.strip():
            raise Unauthenticated(
                f"the token's {name!r} claim must be a non-empty string naming its user")
        key = self.settings.groups_claim
        raw = claims.get(key)
        if raw is None:
            return Identity(user=user, groups=(), via="oidc")
        if not isinstance(raw, list) or not all(isinstance(g, str) and g for g in raw):
            raise Unauthenticated(
                f"the token's {key!r} claim must be an array of strings (it is "
                f"{_shape(raw)}): no group is taken from it")
        return Identity(user=user, groups=tuple(dict.fromkeys(raw)), via="oidc")


def _shape(value: Any) -> str:
    """What a claim's value is, in words (never the value: it may be anything)."""
    if isinstance(value, list):
        return "an array holding something other than non-empty strings"
    return {dict: "an object", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def proxy_identity(settings: ProxySettings, client_host: str | None,
                   headers: Any) -> Identity | None:
    """The identity the configured proxy asserts, or None (another address: ignored)."""
    if client_host is None or client_host not in settings.trusted:
        return None
    user = headers.get(settings.user_header)
    if not user or not str(user).strip():
        return None
    raw = headers.get(settings.groups_header) or ""
    groups = tuple(g.strip() for g in str(raw).split(",") if g.strip())
    return Identity(user=str(user).strip(), groups=groups, via="proxy")


def token_issuer(token: str) -> str | None:
    """The ``iss`` a JWT claims (unverified: only to choose who verifies it), else None."""
    parts = token.split(".")
    if len(parts) != 3 or len(token) > MAX_TOKEN:
        return None
    try:
        iss = _b64json(parts[1]).get("iss")
    except (ValueError, TypeError, RecursionError):
        return None
    return iss if isinstance(iss, str) else None


async def kubernetes_identity(gateway: Gateway, verifier: OidcVerifier | None,
                              token: str) -> Identity:
    """The identity of a bearer token in Kubernetes mode (see the module docstring)."""
    claimed: Identity | None = None
    if verifier is not None and token_issuer(token) == verifier.settings.issuer:
        claimed = verifier.identity(await verifier.verify(token))
    try:
        found, why = await gateway.review(token)
    except Exception as exc:  # no answer is no identity: nothing is done
        raise ProblemError(503, "API server unavailable",
                           f"the Kubernetes API server could not review the token: {exc}",
                           "channel", error="ApiServerUnavailable", exit_code=1) from None
    if found is None:
        raise Unauthenticated(f"the Kubernetes API server did not authenticate the bearer "
                              f"token ({why})")
    if claimed is None:
        return found
    if claimed.user != found.user:
        raise Unauthenticated(
            f"the issuer names the token's user {claimed.user!r} but the Kubernetes API "
            f"server names it {found.user!r}: the API server would act as someone else "
            "than the audit records (make oidc.username_claim and the API server's OIDC "
            "username claim and prefix agree)")
    return Identity(user=found.user, groups=found.groups, via="oidc")
