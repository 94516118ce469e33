"""Test machinery the PDU plugin ships: snmpsim PDUs, their data files, the vendors' MIB walks.

* :mod:`~powerplane_pdu.testing.simulator`: :class:`SnmpSim` (``snmpsim-command-responder``
  on a free loopback UDP port, stopped by its own handle) and :func:`write_snmprec` (one
  simulated PDU written from a vendor profile);
* ``snmpsim_modules/pduoutlet.py``: the snmpsim variation module that makes a write to an
  outlet's control object change its status and load objects, as a real PDU does;
* :mod:`~powerplane_pdu.testing.redfish_pdu`: :class:`RedfishPduServer`, a Redfish
  PowerDistribution PDU (a mockup such as DMTF's ``public-pdu``, outlets switched by
  ``#Outlet.PowerControl``) on :class:`powerplane.testing.JsonHttpServer`;
* :mod:`~powerplane_pdu.testing.mib_walks`: outlet objects as each vendor's MIB defines
  them, and recorded-style walks built from them (never from the profiles).

The snmpsim parts need ``snmpsim`` and ``pysmi`` (the ``test`` extra); the Redfish PDU only
the standard library. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_pdu.testing.redfish_pdu import RedfishPduServer
    from powerplane_pdu.testing.simulator import (
        MODULES,
        ON_LOAD_W,
        V3_USER,
        SnmpSim,
        snmprec_lines,
        snmpsim_command,
        write_snmprec,
    )

__all__ = [
    "MODULES",
    "ON_LOAD_W",
    "V3_USER",
    "RedfishPduServer",
    "SnmpSim",
    "snmprec_lines",
    "snmpsim_command",
    "write_snmprec",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    **{name: ".simulator" for name in __all__ if name != "RedfishPduServer"},
    "RedfishPduServer": ".redfish_pdu",
})
