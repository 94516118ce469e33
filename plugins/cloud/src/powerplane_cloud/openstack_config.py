"""Config of an ``openstack`` channel, and the target it addresses (a server id).

Kept free of httpx so that plugin discovery and config validation stay cheap::

    channels:
      cloud-b:
        type: openstack
        auth_url: https://keystone.example.net:5000/v3
        auth:
          method: application_credential       # or: password
          id: 21dced0fd20347869b93710d2b98aae0
          secret: {env: OS_APP_CRED_SECRET}
        region: RegionOne
    nodes:
      worker-9:
        classification: replaceable
        channels: [{channel: cloud-b, target: 9168b536-cd40-4630-b43f-b259807c6e87}]
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from powerplane.secrets import SecretRef

__all__ = [
    "ApplicationCredentialAuth",
    "OpenStackConfig",
    "PasswordAuth",
    "parse_server_id",
]


class PasswordAuth(BaseModel):
    """Keystone v3 ``password`` authentication, scoped to a project."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["password"]
    """Selects this form."""
    username: str = Field(min_length=1)
    """The user's name."""
    password: SecretRef
    """The user's password (a reference)."""
    user_domain_name: str = "Default"
    """The domain the user belongs to."""
    project_name: str | None = None
    """The project to scope the token to (by name, with ``project_domain_name``)."""
    project_id: str | None = None
    """The project to scope the token to (by id)."""
    project_domain_name: str = "Default"
    """The domain of ``project_name``."""

    @model_validator(mode="after")
    def _one_project(self) -> PasswordAuth:
        if (self.project_name is None) == (self.project_id is None):
            raise ValueError("expected exactly one of project_name or project_id")
        return self


class ApplicationCredentialAuth(BaseModel):
    """Keystone v3 ``application_credential`` authentication (scoped by the credential)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["application_credential"]
    """Selects this form."""
    id: str = Field(min_length=1)
    """The application credential's id."""
    secret: SecretRef
    """The application credential's secret (a reference)."""


class OpenStackConfig(BaseModel):
    """Config of an ``openstack`` channel: one project of one cloud, one region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auth_url: str = Field(pattern=r"^https?://")
    """The Keystone v3 endpoint (``.../v3``; added when absent)."""
    auth: Annotated[PasswordAuth | ApplicationCredentialAuth, Field(discriminator="method")]
    """How to obtain a token: ``method: password`` or ``method: application_credential``."""
    region: str | None = None
    """The region whose compute endpoint to use from the catalog (default: the first)."""
    interface: Literal["public", "internal", "admin"] = "public"
    """Which catalog endpoint to use."""
    compute_url: str | None = Field(None, pattern=r"^https?://")
    """The compute endpoint (``.../v2.1``), instead of the catalog's."""
    reboot_type: Literal["SOFT", "HARD"] = "SOFT"
    """``SOFT``: the OS restarts (graceful); ``HARD``: a power cycle."""
    verify: bool | str = True
    """TLS verification: true, false, or a CA bundle path."""
    timeout_s: float = Field(30.0, gt=0)
    """Timeout of each HTTP request."""
    throttle_retries: int = Field(4, ge=0, le=10)
    """Retries of a rate-limited (429/413) GET or DELETE."""
    backoff_base_s: float = Field(0.5, gt=0)
    """First wait before retrying a rate-limited request; doubles each time."""
    backoff_max_s: float = Field(8.0, gt=0)
    """Longest single wait (also caps a Retry-After)."""

    @property
    def identity_url(self) -> str:
        """``auth_url`` ending in ``/v3``."""
        url = self.auth_url.rstrip("/")
        return url if url.endswith("/v3") else f"{url}/v3"


def parse_server_id(raw: Any) -> str:
    """An OpenStack target is a server id (a UUID as Nova gives it)."""
    if not isinstance(raw, str) or not raw.strip() or any(c in raw for c in "/?# \t"):
        raise ValueError("expected an OpenStack server id such as "
                         "9168b536-cd40-4630-b43f-b259807c6e87")
    return raw
