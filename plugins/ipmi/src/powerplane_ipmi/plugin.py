"""The plugin module: registers the ``ipmi`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    ipmi = "powerplane_ipmi.plugin"
"""

from __future__ import annotations

from collections.abc import Callable

from powerplane import ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_ipmi.channel import IpmiChannel
from powerplane_ipmi.config import IpmiConfig, parse_target

__all__ = ["IPMI", "register_channel_types", "register_demo_peers"]


def _factory(name: str, config: IpmiConfig) -> IpmiChannel:
    return IpmiChannel(name, config)


IPMI = ChannelType(
    name="ipmi",
    config=IpmiConfig,
    factory=_factory,
    target=parse_target,
    description="BMC chassis power over IPMI 2.0 / RMCP+ (pyghmi, in process): privilege "
                "read back, cipher suite 17 then 3, never suite 0",
    gated_sends=True,  # every chassis control command passes about_to_send() (_send_control)
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``ipmi`` channel type."""
    register(IPMI)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer OpenIPMI's ``ipmi_sim`` to ``powerplane demo``."""
    from powerplane_ipmi.peer import PEER

    register(PEER)
