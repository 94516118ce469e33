"""The plugin module: registers the ``pdu`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    pdu = "powerplane_pdu.plugin"

Discovery stays light: :data:`REGISTERS` names the type, so the config model is imported
(and :data:`PDU` built) only when a deployment names a ``pdu`` channel, and the channel (and
with it pysnmp and httpx) only when a ``pdu`` channel is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import Address, ChannelType
    from powerplane.testing import Peer
    from powerplane_pdu.channel import PduChannel
    from powerplane_pdu.config import PduChannelConfig
    from powerplane_pdu.outlets import OutletTarget

    PDU: ChannelType[PduChannelConfig, OutletTarget]

__all__ = ["PDU", "REGISTERS", "UNKNOWN_OUTLET", "address", "register_channel_types",
           "register_demo_peers", "unknown_target"]

REGISTERS: Registers = {"channel": ("pdu",)}
"""What the hooks register, read by the registry without calling them."""


def _factory(name: str, config: PduChannelConfig) -> PduChannel:
    # imported here so that plugin discovery never imports pysnmp or httpx
    from powerplane_pdu.channel import PduChannel

    return PduChannel(name, config)


def address(config: PduChannelConfig) -> Address:
    """Where the channel's own PDU is: SNMP ``host`` and ``port``, or the Redfish ``endpoint``."""
    from powerplane import Address

    if config.protocol == "snmp":
        return Address("host", format="host", port_field="port", transport="udp")
    return Address("endpoint")


UNKNOWN_OUTLET = 9999
"""The outlet number the conformance suite's unknown target names: no PDU has it."""


def unknown_target(target: OutletTarget) -> dict[str, Any]:
    """For the conformance suite: the target's first feed with an outlet no PDU has."""
    from powerplane_pdu.outlets import MAIN

    feed = target.outlets[0].feed
    if feed == MAIN:
        return {"outlets": [UNKNOWN_OUTLET]}
    return {"feeds": {feed: [UNKNOWN_OUTLET]}}


def _build() -> ChannelType[PduChannelConfig, OutletTarget]:
    from powerplane import ChannelType, Manners
    from powerplane_pdu.config import PduChannelConfig
    from powerplane_pdu.outlets import parse_target

    return ChannelType(
        name="pdu",
        config=PduChannelConfig,
        factory=_factory,
        target=parse_target,
        description="switched PDU outlets over SNMP (vendor profiles) or Redfish "
        "PowerDistribution",
        gated_sends=True,  # every SET and switching POST passes powerplane.about_to_send()
        address=address,  # timeouts: the config's ``timeouts`` (read_s: per SNMP request)
        unknown_target=unknown_target,
        manners=Manners(lockout_s=600.0),  # a PDU takes outlet commands back to back
    )


__getattr__, __dir__ = lazy_exports(__name__, {"PDU": _build})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``pdu`` channel type."""
    register(__getattr__("PDU"))


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the simulated PDU (snmpsim) to ``powerplane demo``."""
    from powerplane_pdu.peer import PEER

    register(PEER)
