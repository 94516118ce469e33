"""The plugin module: registers the ``redfish`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    redfish = "powerplane_redfish.plugin"

Importing it imports neither the config model nor the channel: :data:`REGISTERS` names the
type, so the registry calls the hook (and :data:`REDFISH` is built, with the config model)
only when a deployment names a ``redfish`` channel; the channel module when the first
channel is created, and sushy only when a channel with session or auto authentication
first connects (basic authentication uses the direct client and never imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import ChannelType
    from powerplane.testing import Peer
    from powerplane_redfish.channel import RedfishChannel
    from powerplane_redfish.config import RedfishConfig

    REDFISH: ChannelType[RedfishConfig, str | None]

__all__ = ["REDFISH", "REGISTERS", "register_channel_types", "register_demo_peers"]

REGISTERS: Registers = {"channel": ("redfish",)}
"""What the hooks register, read by the registry without calling them."""


def _factory(name: str, config: RedfishConfig) -> RedfishChannel:
    # imported here so that plugin discovery never imports the channel (nor sushy)
    from powerplane_redfish.channel import RedfishChannel

    return RedfishChannel(name, config)


def _build() -> ChannelType[RedfishConfig, str | None]:
    from powerplane import Address, ChannelType, Manners
    from powerplane_redfish.config import RedfishConfig, parse_target

    return ChannelType(
        name="redfish",
        config=RedfishConfig,
        factory=_factory,
        target=parse_target,
        description="BMC power through Redfish: capabilities read from the BMC",
        gated_sends=True,  # every reset POST passes about_to_send() (connection.post_reset)
        address=Address("endpoint"),  # a URL; timeouts: the config's ``timeouts``
        # one login per channel; iDRAC allows 8 sessions, Supermicro 16: 4 leaves room
        manners=Manners(sessions=4, lockout_s=600.0),
    )


__getattr__, __dir__ = lazy_exports(__name__, {"REDFISH": _build})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``redfish`` channel type."""
    register(__getattr__("REDFISH"))


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the sushy-tools emulator to ``powerplane demo``."""
    from powerplane_redfish.peer import PEER

    register(PEER)
