"""The plugin module of powerplane-cloud: registers the ``ec2`` and ``openstack`` types.

Exposed as the entry point ``cloud`` of the group ``powerplane``. It imports only
the config models: boto3 and httpx load when a channel is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from powerplane.channel import ChannelType
from powerplane.hookspecs import hookimpl
from powerplane.testing import Peer
from powerplane_cloud.ec2_config import EC2Config, parse_instance_id
from powerplane_cloud.openstack_config import OpenStackConfig, parse_server_id

__all__ = ["EC2", "OPENSTACK", "register_channel_types", "register_demo_peers"]


def _ec2(name: str, config: EC2Config) -> Any:
    from powerplane_cloud.ec2 import EC2Channel

    return EC2Channel(name, config)


def _openstack(name: str, config: OpenStackConfig) -> Any:
    from powerplane_cloud.openstack import OpenStackChannel

    return OpenStackChannel(name, config)


EC2 = ChannelType(
    name="ec2",
    config=EC2Config,
    factory=_ec2,
    target=parse_instance_id,
    description="Amazon EC2 instances through boto3 (reboot, stop, start, terminate)",
)

OPENSTACK = ChannelType(
    name="openstack",
    config=OpenStackConfig,
    factory=_openstack,
    target=parse_server_id,
    description="OpenStack Compute servers through httpx, Keystone v3 authentication",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``ec2`` and ``openstack`` channel types."""
    register(EC2)
    register(OPENSTACK)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer moto's EC2 server to ``powerplane demo``."""
    from powerplane_cloud.demo import PEER

    register(PEER)
