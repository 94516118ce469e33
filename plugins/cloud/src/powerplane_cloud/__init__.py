"""powerplane-cloud: power channels for cloud APIs.

Two channel types, registered by :mod:`powerplane_cloud.plugin`:

- ``ec2``: Amazon EC2 through boto3 (reboot, stop, start, terminate, readback;
  many instances per API call through ``invoke_batch``);
- ``openstack``: OpenStack Compute through httpx, authenticated by Keystone v3
  (password or application credential).

Importing this package (and plugin discovery) imports neither boto3 nor httpx: the
channel modules load when a channel is created.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
