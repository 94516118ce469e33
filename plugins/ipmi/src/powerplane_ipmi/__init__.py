"""powerplane-ipmi: the ``ipmi`` channel type (BMC chassis power over IPMI 2.0 / RMCP+).

Where to read first: :mod:`~powerplane_ipmi.plugin` (the hook),
:mod:`~powerplane_ipmi.config`, :mod:`~powerplane_ipmi.channel` (beside it
:mod:`~powerplane_ipmi.wire`, the sessionless protocol, and :mod:`~powerplane_ipmi.session`,
pyghmi's session),
:mod:`~powerplane_ipmi.errors` (the mapping table), :mod:`~powerplane_ipmi.peer` (OpenIPMI's
``ipmi_sim`` as the loopback peer). :mod:`powerplane_ipmi.testing` ships pyghmi's BMC
simulator as a second peer and a UDP proxy that counts and drops packets.

Names load lazily, so plugin discovery (which imports :mod:`powerplane_ipmi.plugin`) never
imports the channel module or pyghmi.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_ipmi.channel import IpmiChannel
    from powerplane_ipmi.config import (
        BmcAddress,
        IpmiConfig,
        Privilege,
        RebootMode,
        ShutdownMode,
        parse_target,
    )
    from powerplane_ipmi.errors import map_error

__all__ = [
    "BmcAddress",
    "IpmiChannel",
    "IpmiConfig",
    "Privilege",
    "RebootMode",
    "ShutdownMode",
    "map_error",
    "parse_target",
]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, {
    "BmcAddress": ".config",
    "IpmiChannel": ".channel",
    "IpmiConfig": ".config",
    "Privilege": ".config",
    "RebootMode": ".config",
    "ShutdownMode": ".config",
    "map_error": ".errors",
    "parse_target": ".config",
})
