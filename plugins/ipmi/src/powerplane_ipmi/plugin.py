"""The plugin module: registers the ``ipmi`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    ipmi = "powerplane_ipmi.plugin"

It imports only the config model; the channel module is imported when the first ``ipmi``
channel is created (and pyghmi when it opens its first session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Address, ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_ipmi.config import BmcAddress, IpmiConfig, parse_target

if TYPE_CHECKING:
    from powerplane_ipmi.channel import IpmiChannel

__all__ = ["ADDRESS", "IPMI", "make_channel", "register_channel_types", "register_demo_peers"]


def make_channel(name: str, config: IpmiConfig) -> IpmiChannel:
    """The ``ipmi`` channel named ``name``."""
    from powerplane_ipmi.channel import IpmiChannel

    return IpmiChannel(name, config)


ADDRESS = Address(None, source="target", format="host:port", transport="udp")
"""Each node's target is its BMC's ``HOST:PORT``: one channel holds a fleet's credentials."""

IPMI: ChannelType[IpmiConfig, BmcAddress] = ChannelType(
    name="ipmi",
    config=IpmiConfig,
    factory=make_channel,
    target=parse_target,
    description="BMC chassis power over IPMI 2.0 / RMCP+ (pyghmi, in process): privilege "
                "read back, cipher suite 17 then 3, never suite 0",
    gated_sends=True,  # every chassis control command passes about_to_send() (_send_control)
    address=ADDRESS,
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``ipmi`` channel type."""
    register(IPMI)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer OpenIPMI's ``ipmi_sim`` to ``powerplane demo``."""
    from powerplane_ipmi.peer import PEER

    register(PEER)
