"""Shared helpers of the PDU tests: the snmpsim peer (``powerplane_pdu.testing``), the Redfish
PDU on core's JSON-over-HTTP server, and the v3 keys the tests configure.
"""

from __future__ import annotations

from powerplane_pdu.testing import (
    V3_USER,
    RedfishPduServer,
    SnmpSim,
    snmprec_lines,
    write_snmprec,
)

AUTH_KEY = "auth-KEY-s3cr3t-1"
"""The v3 auth key the tests configure (no message may contain it)."""
PRIV_KEY = "priv-KEY-s3cr3t-2"
"""The v3 privacy key the tests configure."""

__all__ = [
    "AUTH_KEY", "PRIV_KEY", "V3_USER", "RedfishPduServer", "SnmpSim", "snmprec_lines",
    "write_snmprec",
]
