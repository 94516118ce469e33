"""The plugin module the ``powerplane`` entry point loads: registers the ``pdu`` channel type."""

from __future__ import annotations

from collections.abc import Callable

from powerplane import ChannelType, hookimpl
from powerplane_pdu.channel import PduChannel
from powerplane_pdu.config import PduChannelConfig
from powerplane_pdu.outlets import parse_target

__all__ = ["PDU", "register_channel_types"]

PDU = ChannelType(
    name="pdu",
    config=PduChannelConfig,
    factory=PduChannel,
    target=parse_target,
    description="switched PDU outlets over SNMP (vendor profiles) or Redfish PowerDistribution",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``pdu`` channel type."""
    register(PDU)
