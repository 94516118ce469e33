"""Test machinery the ``ipmi`` distribution ships: pyghmi's BMC simulator as a second peer,
and a UDP proxy that counts (and can drop) the packets between a client and a BMC."""

from __future__ import annotations

from powerplane_ipmi.testing.bmcsim import PyghmiBmc
from powerplane_ipmi.testing.udpproxy import FAULTS, OPEN_SESSION, RAKP1, Fault, UdpProxy

__all__ = ["FAULTS", "OPEN_SESSION", "RAKP1", "Fault", "PyghmiBmc", "UdpProxy"]
