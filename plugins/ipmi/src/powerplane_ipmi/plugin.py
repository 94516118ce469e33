"""The plugin module: registers the ``ipmi`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    ipmi = "powerplane_ipmi.plugin"

It imports neither the config model nor the channel: :data:`REGISTERS` names the type, so
the config model is imported (and :data:`IPMI` built) when a deployment names an ``ipmi``
channel, the channel module when the first one is created (and pyghmi when it opens its
first session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import Address, ChannelType
    from powerplane.testing import Peer
    from powerplane_ipmi.channel import IpmiChannel
    from powerplane_ipmi.config import BmcAddress, IpmiConfig

    ADDRESS: Address
    IPMI: ChannelType[IpmiConfig, BmcAddress]

__all__ = ["ADDRESS", "IPMI", "REGISTERS", "make_channel", "register_channel_types",
           "register_demo_peers"]

REGISTERS: Registers = {"channel": ("ipmi",)}
"""What the hooks register, read by the registry without calling them."""


def make_channel(name: str, config: IpmiConfig) -> IpmiChannel:
    """The ``ipmi`` channel named ``name``."""
    from powerplane_ipmi.channel import IpmiChannel

    return IpmiChannel(name, config)


def _address() -> Address:
    """Each node's target is its BMC's ``HOST:PORT``: one channel holds a fleet's credentials."""
    from powerplane import Address

    return Address(None, source="target", format="host:port", transport="udp")


def _build() -> ChannelType[IpmiConfig, BmcAddress]:
    from powerplane import ChannelType, Manners
    from powerplane_ipmi.config import IpmiConfig, parse_target, unknown_target

    return ChannelType(
        name="ipmi",
        config=IpmiConfig,
        factory=make_channel,
        target=parse_target,
        description="BMC chassis power over IPMI 2.0 / RMCP+ (pyghmi, in process): privilege "
                    "read back, cipher suite 17 then 3, never suite 0",
        gated_sends=True,  # every chassis control command passes about_to_send() (_send_control)
        address=__getattr__("ADDRESS"),
        # one session per BMC, calls serialised on it; 5 s between power commands is
        # Ironic's guidance (shorter intervals crash some BMCs)
        manners=Manners(per_endpoint=1, sessions=1, min_interval_s=5.0, lockout_s=600.0),
        # the BMC's host, a UDP port nothing listens on: a well-formed target no BMC answers
        unknown_target=unknown_target,
    )


__getattr__, __dir__ = lazy_exports(__name__, {"ADDRESS": _address, "IPMI": _build})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``ipmi`` channel type."""
    register(__getattr__("IPMI"))


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer OpenIPMI's ``ipmi_sim`` to ``powerplane demo``."""
    from powerplane_ipmi.peer import PEER

    register(PEER)
