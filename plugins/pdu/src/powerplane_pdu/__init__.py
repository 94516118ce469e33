"""powerplane-pdu: switched PDUs as powerplane channels (SNMP vendor profiles, Redfish).

The ``pdu`` channel type drives a machine's outlets, on one PDU or on several feeds, as
one: hard power-off, power-on and power-cycle, with honest readback.

Public names load lazily, so plugin discovery (which imports ``powerplane_pdu.plugin``)
does not import pysnmp or httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerplane_pdu.channel import ENERGIZED_NOT_VISIBLE, PduChannel
    from powerplane_pdu.config import AuthProtocol, PduChannelConfig, PduSpec, PrivProtocol
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
    "parse_target",
]

_WHERE = {
    "ENERGIZED_NOT_VISIBLE": "channel",
    "PduChannel": "channel",
    "AuthProtocol": "config",
    "PduChannelConfig": "config",
    "PduSpec": "config",
    "PrivProtocol": "config",
    "OutletReading": "outlets",
    "OutletRef": "outlets",
    "OutletTarget": "outlets",
    "parse_target": "outlets",
    "PRODUCTS": "profiles",
    "PROFILES": "profiles",
    "LoadUnit": "profiles",
    "OutletState": "profiles",
    "Product": "profiles",
    "Profile": "profiles",
    "detect": "profiles",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'powerplane_pdu' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"powerplane_pdu.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
