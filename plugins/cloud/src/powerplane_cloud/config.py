"""Config of the ``ec2`` and ``openstack`` channels, and the targets they address.

Kept free of boto3 and httpx so that plugin discovery and config validation stay cheap::

    channels:
      aws-eu:
        type: ec2
        region: eu-west-1
        access_key_id: {env: AWS_ACCESS_KEY_ID}          # optional: default credential chain
        secret_access_key: {file: /run/secrets/aws-key}
        role_arn: arn:aws:iam::123456789012:role/powerplane   # optional
        timeouts: {connect_s: 30, read_s: 30}
      cloud-b:
        type: openstack
        auth_url: https://keystone.example.net:5000/v3
        auth:
          method: application_credential       # or: password
          id: 21dced0fd20347869b93710d2b98aae0
          secret: {env: OS_APP_CRED_SECRET}
        region: RegionOne
    nodes:
      worker-7:
        classification: replaceable
        channels: [{channel: aws-eu, target: i-0abc1234def567890}]
      worker-9:
        classification: replaceable
        channels: [{channel: cloud-b, target: 9168b536-cd40-4630-b43f-b259807c6e87}]

An ``ec2`` target is an instance id (:func:`parse_instance_id`), an ``openstack`` target a
server id (:func:`parse_server_id`). ``timeouts`` bound each API call: ``connect_s`` the
TCP and TLS connect, ``read_s`` each wait for an answer (botocore's ``connect_timeout`` /
``read_timeout``; httpx's connect and read, write and pool timeouts).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from powerplane import SecretRef, StrictFloat, StrictInt, Timeouts, TlsVerify

__all__ = [
    "ApplicationCredentialAuth",
    "EC2Config",
    "OpenStackConfig",
    "PasswordAuth",
    "parse_instance_id",
    "parse_server_id",
]

_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


class EC2Config(BaseModel):
    """Config of an ``ec2`` channel: one account (or assumed role) in one region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str = Field(min_length=1)
    """The AWS region (``eu-west-1``)."""
    endpoint_url: str | None = Field(None, pattern=r"^https?://[^/\s]+")
    """Another EC2 endpoint (a VPC endpoint, or a local emulator); default AWS's own."""
    sts_endpoint_url: str | None = Field(None, pattern=r"^https?://[^/\s]+")
    """The STS endpoint used to assume ``role_arn``; default ``endpoint_url``, else AWS's."""
    access_key_id: SecretRef | None = None
    """Access key id (with ``secret_access_key``); absent: the default credential chain."""
    secret_access_key: SecretRef | None = None
    """Secret access key (with ``access_key_id``)."""
    session_token: SecretRef | None = None
    """Session token for temporary static credentials."""
    profile: str | None = None
    """A named profile of the shared AWS config files (instead of static keys)."""
    role_arn: str | None = None
    """A role to assume with those credentials; its temporary credentials are renewed."""
    external_id: str | None = None
    """The external id the role's trust policy requires, if any."""
    role_session_name: str = "powerplane"
    """Session name recorded in CloudTrail for the assumed role."""
    verify: TlsVerify = True
    """TLS verification: true, false, or a CA bundle path."""
    timeouts: Timeouts = Timeouts(connect_s=30, read_s=30)
    """Bounds of each API call: botocore's ``connect_timeout`` (``connect_s``) and
    ``read_timeout`` (``read_s``)."""
    batch_size: StrictInt = Field(100, ge=1, le=100)
    """Instance ids per API call when many nodes are acted on together (EC2 reads take 100)."""
    throttle_retries: StrictInt = Field(4, ge=0, le=10)
    """Retries of a throttled read or idempotent write (stop, start, terminate)."""
    backoff_base_s: StrictFloat = Field(0.5, gt=0, le=86_400, allow_inf_nan=False)
    """First wait before retrying a throttled call; doubles each time."""
    backoff_max_s: StrictFloat = Field(8.0, gt=0, le=86_400, allow_inf_nan=False)
    """Longest single wait before retrying a throttled call."""

    @model_validator(mode="after")
    def _credentials(self) -> EC2Config:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("access_key_id and secret_access_key go together")
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("session_token needs access_key_id and secret_access_key")
        if self.profile is not None and self.access_key_id is not None:
            raise ValueError("give either profile or access_key_id/secret_access_key, not both")
        return self


def parse_instance_id(raw: Any) -> str:
    """An EC2 target is an instance id (``i-`` and 8 or 17 hex digits)."""
    if not isinstance(raw, str) or not _INSTANCE_ID.match(raw):
        raise ValueError("expected an EC2 instance id such as i-0abc1234def567890")
    return raw


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
    verify: TlsVerify = True
    """TLS verification: true, false, or a CA bundle path."""
    timeouts: Timeouts = Timeouts(connect_s=30, read_s=30)
    """Bounds of each HTTP request: httpx's connect timeout (``connect_s``) and its read,
    write and pool timeouts (``read_s``)."""
    throttle_retries: StrictInt = Field(4, ge=0, le=10)
    """Retries of a rate-limited (429/413) GET or DELETE."""
    backoff_base_s: StrictFloat = Field(0.5, gt=0, le=86_400, allow_inf_nan=False)
    """First wait before retrying a rate-limited request; doubles each time."""
    backoff_max_s: StrictFloat = Field(8.0, gt=0, le=86_400, allow_inf_nan=False)
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
