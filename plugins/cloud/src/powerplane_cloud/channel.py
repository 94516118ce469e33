"""The cloud plugin's channel classes and their typed factories.

Two channel types, each in its own protocol module beside this one:

- :class:`~powerplane_cloud.ec2.EC2Channel` (``ec2``): Amazon EC2 through boto3, sync (the
  host runs it in worker threads); ``invoke_batch`` sends up to ``batch_size`` instances
  per API call;
- :class:`~powerplane_cloud.openstack.OpenStackChannel` (``openstack``): OpenStack Compute
  through httpx, async, with Keystone v3 tokens (:mod:`powerplane_cloud.keystone`).

Both pass :func:`powerplane.about_to_send` right before every state-changing API call
leaves (their channel types declare ``gated_sends=True``). The factories import their
protocol module when the first channel is created, so plugin discovery imports neither
boto3 nor httpx; the classes are exported from here lazily for the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports
from powerplane_cloud.config import EC2Config, OpenStackConfig

if TYPE_CHECKING:
    from powerplane_cloud.ec2 import EC2Channel
    from powerplane_cloud.openstack import OpenStackChannel

__all__ = ["EC2Channel", "OpenStackChannel", "make_ec2_channel", "make_openstack_channel"]


def make_ec2_channel(name: str, config: EC2Config) -> EC2Channel:
    """The ``ec2`` channel named ``name`` (imports boto3 when it builds its client)."""
    from powerplane_cloud.ec2 import EC2Channel

    return EC2Channel(name, config)


def make_openstack_channel(name: str, config: OpenStackConfig) -> OpenStackChannel:
    """The ``openstack`` channel named ``name`` (imports httpx)."""
    from powerplane_cloud.openstack import OpenStackChannel

    return OpenStackChannel(name, config)


__getattr__, __dir__ = lazy_exports(__name__, {
    "EC2Channel": "powerplane_cloud.ec2",
    "OpenStackChannel": "powerplane_cloud.openstack",
})
