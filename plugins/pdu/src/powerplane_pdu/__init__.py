"""powerplane-pdu: switched PDUs as powerplane channels (SNMP vendor profiles, Redfish).

The ``pdu`` channel type drives a machine's outlets, on one PDU or on several feeds, as
one: hard power-off, power-on and power-cycle, with honest readback.

Every name below is imported on first use (:func:`powerplane.lazy_exports`), so plugin
discovery (which imports ``powerplane_pdu.plugin``) imports neither pysnmp nor httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_pdu.channel import ENERGIZED_NOT_VISIBLE, PduChannel
    from powerplane_pdu.config import AuthProtocol, PduChannelConfig, PduSpec, PrivProtocol
    from powerplane_pdu.errors import map_error
    from powerplane_pdu.outlets import OutletReading, OutletRef, OutletTarget, parse_target
    from powerplane_pdu.profiles import (
        PRODUCTS,
        PROFILES,
        LoadUnit,
        OutletState,
        Product,
        Profile,
        detect,
    )

__version__ = "0.1.0"

__all__ = [
    "ENERGIZED_NOT_VISIBLE",
    "PRODUCTS",
    "PROFILES",
    "AuthProtocol",
    "LoadUnit",
    "OutletReading",
    "OutletRef",
    "OutletState",
    "OutletTarget",
    "PduChannel",
    "PduChannelConfig",
    "PduSpec",
    "PrivProtocol",
    "Product",
    "Profile",
    "detect",
    "map_error",
    "parse_target",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ENERGIZED_NOT_VISIBLE": ".channel",
    "PduChannel": ".channel",
    "AuthProtocol": ".config",
    "PduChannelConfig": ".config",
    "PduSpec": ".config",
    "PrivProtocol": ".config",
    "map_error": ".errors",
    "OutletReading": ".outlets",
    "OutletRef": ".outlets",
    "OutletTarget": ".outlets",
    "parse_target": ".outlets",
    "PRODUCTS": ".profiles",
    "PROFILES": ".profiles",
    "LoadUnit": ".profiles",
    "OutletState": ".profiles",
    "Product": ".profiles",
    "Profile": ".profiles",
    "detect": ".profiles",
})
