"""The plugin module: registers the ``redfish`` channel type through the ``powerplane`` hook.

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    redfish = "powerplane_redfish.plugin"
"""

from __future__ import annotations

from collections.abc import Callable

from powerplane import ChannelType, hookimpl
from powerplane_redfish.channel import RedfishChannel, parse_target
from powerplane_redfish.config import RedfishConfig

__all__ = ["REDFISH", "register_channel_types"]

REDFISH = ChannelType(
    name="redfish",
    config=RedfishConfig,
    factory=RedfishChannel,
    target=parse_target,
    description="BMC power through Redfish (sushy): capabilities read from the BMC",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``redfish`` channel type."""
    register(REDFISH)
