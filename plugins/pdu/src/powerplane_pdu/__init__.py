"""powerplane-pdu: switched PDUs as powerplane channels (SNMP vendor profiles, Redfish).

The ``pdu`` channel type drives a machine's outlets, on one PDU or on several feeds, as
one: hard power-off, power-on and power-cycle, with honest readback.
"""

from __future__ import annotations

from powerplane_pdu.channel import ENERGIZED_NOT_VISIBLE, PduChannel
from powerplane_pdu.config import AuthProtocol, PduChannelConfig, PduSpec, PrivProtocol
from powerplane_pdu.outlets import OutletReading, OutletRef, OutletTarget, parse_target
from powerplane_pdu.profiles import PROFILES, LoadUnit, OutletState, Profile, detect

__all__ = [
    "ENERGIZED_NOT_VISIBLE",
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
    "Profile",
    "detect",
    "parse_target",
]
