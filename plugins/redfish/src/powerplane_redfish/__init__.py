"""powerplane-redfish: the ``redfish`` channel type (BMC power through sushy).

Capabilities are read from the BMC, never assumed; readback is ``PowerState``; one sushy
root (one Redfish session) per endpoint, logged out on close and after errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from powerplane_redfish.config import (
    AuthMode,
    RebootMode,
    RedfishConfig,
    ResetType,
    ShutdownMode,
    parse_target,
)
from powerplane_redfish.mapping import Plan, plan

if TYPE_CHECKING:
    from powerplane_redfish.channel import RedfishChannel
    from powerplane_redfish.errors import map_error

__version__ = "0.1.0"

__all__ = [
    "AuthMode",
    "Plan",
    "RebootMode",
    "RedfishChannel",
    "RedfishConfig",
    "ResetType",
    "ShutdownMode",
    "map_error",
    "parse_target",
    "plan",
]


def __getattr__(name: str) -> Any:
    # sushy and requests load only when a channel is used, never at plugin discovery
    if name == "RedfishChannel":
        from powerplane_redfish.channel import RedfishChannel

        return RedfishChannel
    if name == "map_error":
        from powerplane_redfish.errors import map_error

        return map_error
    raise AttributeError(f"module 'powerplane_redfish' has no attribute {name!r}")
