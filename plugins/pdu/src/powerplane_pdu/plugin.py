"""The plugin module the ``powerplane`` entry point loads: registers the ``pdu`` channel type.

Discovery stays light: the channel (and with it pysnmp and httpx) is imported only when a
``pdu`` channel is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from powerplane import ChannelType, hookimpl
from powerplane_pdu.config import PduChannelConfig
from powerplane_pdu.outlets import parse_target

if TYPE_CHECKING:
    from powerplane.testing import Peer
    from powerplane_pdu.channel import PduChannel

__all__ = ["PDU", "make_channel", "register_channel_types", "register_demo_peers"]



def make_channel(name: str, config: PduChannelConfig) -> PduChannel:
    """Create a ``pdu`` channel (imports the SNMP and Redfish drivers on first use)."""
    from powerplane_pdu.channel import PduChannel

    return PduChannel(name, config)


PDU = ChannelType(
    name="pdu",
    config=PduChannelConfig,
    factory=make_channel,
    target=parse_target,
    description="switched PDU outlets over SNMP (vendor profiles) or Redfish PowerDistribution",
    gated_sends=True,  # every SET and switching POST passes powerplane.about_to_send()
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``pdu`` channel type."""
    register(PDU)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Register the simulated PDU (snmpsim) that ``powerplane demo`` can start."""
    from powerplane.testing import Peer
    from powerplane_pdu.demo_peer import start_demo_pdu

    register(Peer(name="pdu", role="pdu", start=start_demo_pdu))
