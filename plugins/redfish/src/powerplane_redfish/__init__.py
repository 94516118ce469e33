"""powerplane-redfish: the ``redfish`` channel type (BMC power through sushy).

Capabilities are read from the BMC, never assumed; readback is ``PowerState``; one sushy
root (one Redfish session) per endpoint, logged out on close and after errors.
"""

from __future__ import annotations

from powerplane_redfish.channel import RedfishChannel, parse_target
from powerplane_redfish.config import (
    AuthMode,
    RebootMode,
    RedfishConfig,
    ResetType,
    ShutdownMode,
)
from powerplane_redfish.errors import map_error
from powerplane_redfish.mapping import Plan, plan

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
