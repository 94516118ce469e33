"""powerplane-redfish: the ``redfish`` channel type (BMC power over Redfish).

Capabilities are read from the BMC, never assumed; readback is ``PowerState``; one session
per endpoint: a sushy root (one Redfish session login, logged out on close and after
errors) for ``auth: session`` and ``auto``, the direct client on ``http.client`` (basic
credentials on every request, no sushy) for ``auth: basic``; one TLS and proxy rule for all
three (:mod:`powerplane_redfish.connection`).

Every name below is imported on first use (:func:`powerplane.lazy_exports`), so plugin
discovery imports neither sushy nor requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_redfish.channel import RedfishChannel
    from powerplane_redfish.config import (
        AuthMode,
        RebootMode,
        RedfishConfig,
        ResetType,
        ShutdownMode,
        parse_target,
    )
    from powerplane_redfish.errors import map_error
    from powerplane_redfish.mapping import Plan, plan
    from powerplane_redfish.resources import ActionInfo, ComputerSystem, Manager, ResetAction

__version__ = "0.1.0"

__all__ = [
    "ActionInfo",
    "AuthMode",
    "ComputerSystem",
    "Manager",
    "Plan",
    "RebootMode",
    "RedfishChannel",
    "RedfishConfig",
    "ResetAction",
    "ResetType",
    "ShutdownMode",
    "map_error",
    "parse_target",
    "plan",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ActionInfo": ".resources",
    "AuthMode": ".config",
    "ComputerSystem": ".resources",
    "Manager": ".resources",
    "Plan": ".mapping",
    "RebootMode": ".config",
    "RedfishChannel": ".channel",
    "RedfishConfig": ".config",
    "ResetAction": ".resources",
    "ResetType": ".config",
    "ShutdownMode": ".config",
    "map_error": ".errors",
    "parse_target": ".config",
    "plan": ".mapping",
})
