"""Shared names of the cloud plugin's tests (imported by conftest and the tests).

The peers themselves ship with the distribution: moto's server is
:mod:`powerplane_cloud.peer`, the throttling proxy and the OpenStack fake are in
:mod:`powerplane_cloud.testing`. Here: the secrets the tests configure and the channel
config that reaches moto.
"""

from __future__ import annotations

from typing import Any

from powerplane.testing import free_port
from powerplane_cloud.peer import AMI, REGION, Moto, start_moto
from powerplane_cloud.testing.throttling import ThrottlingProxy, start_throttling_proxy

__all__ = [
    "AMI",
    "KEY_ENV",
    "REGION",
    "SECRET_ENV",
    "SECRET_VALUE",
    "Moto",
    "ThrottlingProxy",
    "ec2_channel_config",
    "free_port",
    "start_moto",
    "start_throttling_proxy",
]

KEY_ENV = "PP_CLOUD_TEST_KEY_ID"
SECRET_ENV = "PP_CLOUD_TEST_SECRET"
SECRET_VALUE = "s3cr3t-never-shown-7f2a"
"""The secret access key the tests configure; no message may contain it."""


def ec2_channel_config(url: str, **extra: Any) -> dict[str, Any]:
    """The config of an ``ec2`` channel against moto, with secret references."""
    return {
        "type": "ec2",
        "region": REGION,
        "endpoint_url": url,
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        **extra,
    }
