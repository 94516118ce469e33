"""The surface's own settings (``powerplane serve --settings FILE``, or flags).

The deployment file is core's and stays as it is; what only the surface needs (who may log
in and how, the limits of the HTTP server) is this model, a YAML file of its own::

    oidc:
      issuer: https://login.example.com/realms/plant
      audience: powerplane                     # the aud the bearer tokens must carry
      algorithms: [RS256, ES256]               # the allow-list (never none, never HS*)
      username_claim: preferred_username       # default sub
      groups_claim: groups                     # where the groups are
      client_id: powerplane-web                # the page's code flow (optional)
      client_secret: {env: OIDC_CLIENT_SECRET} # optional (a public client uses PKCE only)
    proxy:                                     # the auth-proxy mode (optional)
      trusted: [127.0.0.1]                     # the proxy's addresses: nothing else is believed
      user_header: X-Forwarded-User
      groups_header: X-Forwarded-Groups        # comma-separated
      allowed_origins: [https://servers.plant.example]  # beside the request's own Host
    kubernetes:                                # the kubernetes store: Kubernetes mode
      credentials: passthrough                 # or impersonate (needs the impersonate role)
      audiences: []                            # the TokenReview's spec.audiences
    limits:
      max_body_bytes: 65536
      acts_per_minute: 30                      # per identity, on the act endpoints
      act_burst: 10
      requests_per_minute: 600                 # per identity (else per address), every
      request_burst: 120                       #   API request that costs work
      max_identities: 10000                    # buckets kept (least recently used go)
      page_size_max: 500
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["KubernetesSettings", "Limits", "OidcSettings", "ProxySettings", "ServeSettings",
           "load_settings", "secret_value"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecretRef(_Strict):
    env: str | None = None
    file: str | None = None


def secret_value(ref: SecretRef | None) -> str | None:
    """The secret a reference names (read when used, never logged)."""
    if ref is None:
        return None
    if ref.env is not None:
        return os.environ.get(ref.env)
    if ref.file is not None:
        return Path(ref.file).read_text(encoding="utf-8").strip()
    return None


_SAFE_ALGS = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
              "ES512", "EdDSA"}


class OidcSettings(_Strict):
    issuer: str
    audience: str
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    username_claim: str = "sub"
    groups_claim: str = "groups"
    leeway_s: int = Field(30, ge=0, le=300)
    jwks_refresh_min_s: float = Field(30.0, ge=0)
    """A token with an unknown ``kid`` refetches the JWKS at most this often."""
    client_id: str | None = None
    client_secret: SecretRef | None = None
    scopes: tuple[str, ...] = ("openid", "profile", "groups")

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in value if a not in _SAFE_ALGS]
        if bad or not value:
            raise ValueError(f"algorithms must be asymmetric JWS algorithms from "
                             f"{sorted(_SAFE_ALGS)}; refused: {bad or 'an empty list'}")
        return value


class ProxySettings(_Strict):
    trusted: tuple[str, ...]
    """The auth proxy's addresses: identity headers from any other address are ignored."""
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    allowed_origins: tuple[str, ...] = ()
    """Origins (``scheme://host[:port]``) an unsafe request through the proxy may come
    from, beside the surface's own (the request's ``Host``): where the proxy rewrites
    ``Host``, name the origin the browser sees here (:mod:`.origin`)."""


class KubernetesSettings(_Strict):
    """Kubernetes mode: the deployment's ``lifecycle.store`` is ``{type: kubernetes}``; the
    surface is a gateway client that acts as its caller (the operator executes)."""

    credentials: Literal["passthrough", "impersonate"] = "passthrough"
    """``passthrough``: every act is sent with the caller's own bearer token (a token the
    API server authenticates: TokenReview); a caller with a session or from the auth proxy
    may read but not act. ``impersonate``: the server's own credentials with
    ``Impersonate-User``/``Impersonate-Group`` for every caller (its ServiceAccount needs
    the ``impersonate`` role)."""
    audiences: tuple[str, ...] = ()
    """The TokenReview's ``spec.audiences`` (empty: the API server's own audience)."""


class Limits(_Strict):
    max_body_bytes: int = Field(64 * 1024, ge=1024)
    acts_per_minute: float = Field(30.0, gt=0)
    act_burst: int = Field(10, ge=1)
    requests_per_minute: float = Field(600.0, gt=0)
    """Per identity (an unauthenticated caller: per address), every API request that costs
    work: reads, pre-flight, acts, and each failed authentication."""
    request_burst: int = Field(120, ge=1)
    max_identities: int = Field(10_000, ge=1)
    """How many identities' buckets are kept (the least recently used forgotten first)."""
    page_size_max: int = Field(500, ge=1)
    session_ttl_s: int = Field(8 * 3600, ge=60)


class ServeSettings(_Strict):
    oidc: OidcSettings | None = None
    proxy: ProxySettings | None = None
    kubernetes: KubernetesSettings = KubernetesSettings()
    limits: Limits = Limits()
    runner: Literal["local", "none"] = "local"
    """``local``: this process runs the maintenances it records (``Lifecycle.run``);
    ``none``: another process does (``powerplane maintenance run``)."""


def load_settings(path: str | os.PathLike[str] | None) -> ServeSettings:
    if path is None:
        return ServeSettings()
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return ServeSettings.model_validate(doc)
