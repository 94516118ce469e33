"""Config of an ``ec2`` channel, and the target it addresses (an instance id).

Kept free of boto3 so that plugin discovery and config validation stay cheap::

    channels:
      aws-eu:
        type: ec2
        region: eu-west-1
        access_key_id: {env: AWS_ACCESS_KEY_ID}          # optional: default credential chain
        secret_access_key: {file: /run/secrets/aws-key}
        role_arn: arn:aws:iam::123456789012:role/powerplane   # optional
    nodes:
      worker-7:
        classification: replaceable
        channels: [{channel: aws-eu, target: i-0abc1234def567890}]
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from powerplane.secrets import SecretRef

__all__ = ["EC2Config", "parse_instance_id"]

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
    verify: bool | str = True
    """TLS verification: true, false, or a CA bundle path."""
    timeout_s: float = Field(30.0, gt=0)
    """Connect and read timeout of each API call."""
    batch_size: int = Field(100, ge=1, le=100)
    """Instance ids per API call when many nodes are acted on together (EC2 reads take 100)."""
    throttle_retries: int = Field(4, ge=0, le=10)
    """Retries of a throttled read or idempotent write (stop, start, terminate)."""
    backoff_base_s: float = Field(0.5, gt=0)
    """First wait before retrying a throttled call; doubles each time."""
    backoff_max_s: float = Field(8.0, gt=0)
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
