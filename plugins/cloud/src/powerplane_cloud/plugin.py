"""The plugin module of powerplane-cloud: registers the ``ec2`` and ``openstack`` types.

Exposed as the entry point ``cloud`` of the group ``powerplane``. It imports only the
config models and the factories: boto3 and httpx load when a channel is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from powerplane import Address, ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_cloud.channel import make_ec2_channel, make_openstack_channel
from powerplane_cloud.config import (
    EC2Config,
    OpenStackConfig,
    parse_instance_id,
    parse_server_id,
)

__all__ = [
    "EC2",
    "EC2_ADDRESS",
    "OPENSTACK",
    "OPENSTACK_ADDRESS",
    "register_channel_types",
    "register_demo_peers",
]

EC2_ADDRESS = Address("endpoint_url", scheme="http")
"""``endpoint_url`` (a VPC endpoint, an emulator; unset: AWS's own for the region) is where
every call goes."""

OPENSTACK_ADDRESS = Address("auth_url", scheme="http")
"""Keystone's ``auth_url`` is the first address every channel reaches."""


EC2: ChannelType[EC2Config, str] = ChannelType(
    name="ec2",
    config=EC2Config,
    factory=make_ec2_channel,
    target=parse_instance_id,
    description="Amazon EC2 instances through boto3 (reboot, stop, start, terminate)",
    # every Reboot/Stop/Start/TerminateInstances attempt passes about_to_send() (ec2._api)
    gated_sends=True,
    address=EC2_ADDRESS,
)

OPENSTACK: ChannelType[OpenStackConfig, str] = ChannelType(
    name="openstack",
    config=OpenStackConfig,
    factory=make_openstack_channel,
    target=parse_server_id,
    description="OpenStack Compute servers through httpx, Keystone v3 authentication",
    # every action POST and DELETE passes about_to_send() (openstack._request)
    gated_sends=True,
    address=OPENSTACK_ADDRESS,
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``ec2`` and ``openstack`` channel types."""
    register(EC2)
    register(OPENSTACK)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer moto's EC2 server to ``powerplane demo``."""
    from powerplane_cloud.peer import PEER

    register(PEER)
