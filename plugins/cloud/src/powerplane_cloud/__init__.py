"""powerplane-cloud: power channels for cloud APIs.

Two channel types, registered by :mod:`powerplane_cloud.plugin`:

- ``ec2``: Amazon EC2 through boto3 (reboot, stop, start, terminate, readback;
  many instances per API call through ``invoke_batch``);
- ``openstack``: OpenStack Compute through httpx, authenticated by Keystone v3
  (password or application credential).

Where to read first: :mod:`~powerplane_cloud.plugin` (the hooks),
:mod:`~powerplane_cloud.config` (both config models), :mod:`~powerplane_cloud.channel`
(the channel classes and factories; the protocols in :mod:`~powerplane_cloud.ec2`,
:mod:`~powerplane_cloud.openstack` and :mod:`~powerplane_cloud.keystone`),
:mod:`~powerplane_cloud.errors` (the mapping table of both), :mod:`~powerplane_cloud.peer`
(moto's EC2 server as the loopback peer). :mod:`powerplane_cloud.testing` ships an OpenStack
fake for respx and a throttling proxy for moto.

Names load lazily: importing this package (and plugin discovery) imports neither boto3 nor
httpx; the channel modules load when a channel is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_cloud.config import (
        ApplicationCredentialAuth,
        EC2Config,
        OpenStackConfig,
        PasswordAuth,
    )
    from powerplane_cloud.ec2 import EC2Channel
    from powerplane_cloud.errors import map_error
    from powerplane_cloud.openstack import OpenStackChannel

__version__ = "0.1.0"

__all__ = [
    "ApplicationCredentialAuth",
    "EC2Channel",
    "EC2Config",
    "OpenStackChannel",
    "OpenStackConfig",
    "PasswordAuth",
    "__version__",
    "map_error",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ApplicationCredentialAuth": ".config",
    "EC2Channel": ".ec2",
    "EC2Config": ".config",
    "OpenStackChannel": ".openstack",
    "OpenStackConfig": ".config",
    "PasswordAuth": ".config",
    "map_error": ".errors",
})
