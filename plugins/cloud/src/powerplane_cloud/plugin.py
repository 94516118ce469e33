"""The plugin module of powerplane-cloud: registers the ``ec2`` and ``openstack`` types.

Exposed as the entry point ``cloud`` of the group ``powerplane``. It imports neither the
config models nor the factories: :data:`REGISTERS` names the types, so both are imported
(and :data:`EC2` / :data:`OPENSTACK` built) when a deployment names one of them; boto3 and
httpx load when a channel is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import Address, ChannelType
    from powerplane.testing import Peer
    from powerplane_cloud.config import EC2Config, OpenStackConfig

    EC2: ChannelType[EC2Config, str]
    EC2_ADDRESS: Address
    OPENSTACK: ChannelType[OpenStackConfig, str]
    OPENSTACK_ADDRESS: Address

__all__ = [
    "EC2",
    "EC2_ADDRESS",
    "OPENSTACK",
    "OPENSTACK_ADDRESS",
    "REGISTERS",
    "ec2_unknown_target",
    "register_channel_types",
    "register_demo_peers",
]

REGISTERS: Registers = {"channel": ("ec2", "openstack")}
"""What the hooks register, read by the registry without calling them."""

def _ec2_address() -> Address:
    """``endpoint_url`` (a VPC endpoint, an emulator; unset: AWS's own for the region) is
    where every call goes."""
    from powerplane import Address

    return Address("endpoint_url", scheme="http")


def _openstack_address() -> Address:
    """Keystone's ``auth_url`` is the first address every channel reaches."""
    from powerplane import Address

    return Address("auth_url", scheme="http")


def ec2_unknown_target(instance: str) -> str:
    """For the conformance suite: a well-formed instance id no account has (the target's
    own length, every hex digit zero; every one ``f`` when the target is that one)."""
    zeros = "i-" + "0" * (len(instance) - 2)
    return zeros if zeros != instance else "i-" + "f" * (len(instance) - 2)


def _ec2() -> ChannelType[EC2Config, str]:
    from powerplane import ChannelType
    from powerplane_cloud.channel import make_ec2_channel
    from powerplane_cloud.config import EC2Config, parse_instance_id

    return ChannelType(
        name="ec2",
        config=EC2Config,
        factory=make_ec2_channel,
        target=parse_instance_id,
        description="Amazon EC2 instances through boto3 (reboot, stop, start, terminate)",
        # every Reboot/Stop/Start/TerminateInstances attempt passes about_to_send() (ec2._api)
        gated_sends=True,
        address=__getattr__("EC2_ADDRESS"),
        unknown_target=ec2_unknown_target,
    )


def _openstack() -> ChannelType[OpenStackConfig, str]:
    from powerplane import ChannelType
    from powerplane_cloud.channel import make_openstack_channel
    from powerplane_cloud.config import OpenStackConfig, parse_server_id

    return ChannelType(
        name="openstack",
        config=OpenStackConfig,
        factory=make_openstack_channel,
        target=parse_server_id,
        description="OpenStack Compute servers through httpx, Keystone v3 authentication",
        # every action POST and DELETE passes about_to_send() (openstack._request)
        gated_sends=True,
        address=__getattr__("OPENSTACK_ADDRESS"),
    )


__getattr__, __dir__ = lazy_exports(__name__, {
    "EC2": _ec2, "EC2_ADDRESS": _ec2_address,
    "OPENSTACK": _openstack, "OPENSTACK_ADDRESS": _openstack_address,
})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``ec2`` and ``openstack`` channel types."""
    register(__getattr__("EC2"))
    register(__getattr__("OPENSTACK"))


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer moto's EC2 server to ``powerplane demo``."""
    from powerplane_cloud.peer import PEER

    register(PEER)
