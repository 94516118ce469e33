"""The plugin module: registers the ``redfish`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    redfish = "powerplane_redfish.plugin"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from powerplane import Address, ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_redfish.config import RedfishConfig, parse_target

if TYPE_CHECKING:
    from powerplane_redfish.channel import RedfishChannel

__all__ = ["REDFISH", "register_channel_types", "register_demo_peers"]


def _factory(name: str, config: RedfishConfig) -> RedfishChannel:
    # imported here so that plugin discovery never imports sushy
    from powerplane_redfish.channel import RedfishChannel

    return RedfishChannel(name, config)


REDFISH: ChannelType[RedfishConfig, str | None] = ChannelType(
    name="redfish",
    config=RedfishConfig,
    factory=_factory,
    target=parse_target,
    description="BMC power through Redfish (sushy): capabilities read from the BMC",
    gated_sends=True,  # every reset POST passes about_to_send() (connection.post_reset)
    address=Address("endpoint"),  # a URL; timeouts: the config's ``timeouts``
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``redfish`` channel type."""
    register(REDFISH)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the sushy-tools emulator to ``powerplane demo``."""
    from powerplane_redfish.peer import PEER

    register(PEER)
