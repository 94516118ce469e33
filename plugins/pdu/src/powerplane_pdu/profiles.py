"""Vendor profiles: the SNMP objects and values that switch and read one outlet, as data.

A profile is a small table: where to write to switch an outlet on or off, which object
reads its state and what the values mean, and, where the PDU meters each outlet, which
object reads its load. OID templates carry ``{outlet}`` for the outlet number. Adding a
vendor is one :class:`Profile` entry here plus a test that drives it against snmpsim.

Every entry cites where its OIDs come from. Ironic's SNMP power driver
(``ironic/drivers/modules/snmp.py``, removed in commit 95f99ac58 of openstack/ironic;
read at its parent 225147672) is the reference for the nine vendor families it
supported; vendor MIBs fill in status and metering objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

__all__ = [
    "PRODUCTS",
    "PROFILES",
    "WITHDRAWN",
    "LoadUnit",
    "OutletState",
    "Product",
    "Profile",
    "detect",
    "get_profile",
]

IRONIC = "openstack/ironic ironic/drivers/modules/snmp.py @225147672"
POWERNET = "APC PowerNet-MIB v4.2.6 (librenms/librenms mibs/apc/PowerNet-MIB)"
ATEN_PE = "ATEN-PE-CFG v1.1.115 (librenms/librenms mibs/aten/ATEN-PE-CFG)"
VERTIV_V5 = (
    "VERTIV-V5-MIB rev 202007200000Z (DotZero24/pysnmp-mibs mibs/geist/VERTIV-V5-MIB; the same "
    "outlet objects in rev 202001070000Z, librenms/librenms mibs/vertiv/VERTIV-V5-MIB)"
)

# PowerNet-MIB: masterSwitch ::= { system 4 } = apc(318).products(1).system(3).4; the
# product identifiers a MasterSwitch / Rack PDU answers as sysObjectID sit under it.
_APC_MS = "1.3.6.1.4.1.318.1.3.4"


class OutletState(str, Enum):
    """What an outlet's status object says."""

    ON = "on"
    """The relay is closed: the outlet is energized."""
    OFF = "off"
    """The relay is open: no power at the outlet."""
    TRANSITION = "transition"
    """A switch is pending or under way (a delayed command, a cycle in progress)."""
    UNKNOWN = "unknown"
    """A value the profile does not know."""


class LoadUnit(str, Enum):
    """The unit a profile's load object reads in, after ``load_scale``."""

    WATTS = "W"
    """Active power in watts."""
    AMPS = "A"
    """Current in amperes."""


@dataclass(frozen=True)
class Profile:
    """One vendor's outlet objects. OIDs are dotted strings with ``{outlet}``."""

    name: str
    """Profile name used in config (``profile: apc-rpdu``)."""
    vendor: str
    """Vendor and product family, for people."""
    source: str
    """Where the OIDs and values come from (MIB name, driver source)."""
    on_oid: str
    """Object written to switch the outlet on."""
    on_value: int
    """Value written to ``on_oid``."""
    off_oid: str
    """Object written to switch the outlet off."""
    off_value: int
    """Value written to ``off_oid``."""
    state_oid: str
    """Object read for the outlet's state."""
    state_values: Mapping[int, OutletState] = field(default_factory=dict)
    """Status value -> state; anything else reads unknown."""
    load_oid: str | None = None
    """Object read for the outlet's load, where the PDU meters outlets."""
    load_unit: LoadUnit = LoadUnit.WATTS
    """Unit of the load after scaling."""
    load_scale: float = 1.0
    """Multiplier from the raw value to ``load_unit``."""
    sys_object_id: str | None = None
    """The ``sysObjectID`` a device of this profile answers (the simulator writes it)."""
    index_ranges: tuple[tuple[int, int, int], ...] = ()
    """``(first, last, offset)``: outlets ``first..last`` sit at arc ``outlet + offset``.

    Empty: the arc is the outlet number, for any outlet."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_values", MappingProxyType(dict(self.state_values)))

    def index(self, outlet: int) -> int:
        """The arc that stands for ``outlet`` in this profile's OIDs; ``ValueError`` if none."""
        if not self.index_ranges:
            return outlet
        for first, last, offset in self.index_ranges:
            if first <= outlet <= last:
                return outlet + offset
        top = max(last for _, last, _ in self.index_ranges)
        raise ValueError(f"profile {self.name} has outlets 1..{top}, no outlet {outlet}")

    @property
    def metered(self) -> bool:
        """Whether the profile reads a per-outlet load."""
        return self.load_oid is not None

    def oid(self, template: str, outlet: int) -> str:
        """``template`` with the outlet's arc filled in; ``ValueError`` for no such outlet."""
        return template.format(outlet=self.index(outlet))

    def state_of(self, value: int) -> OutletState:
        """The state a status value means."""
        return self.state_values.get(value, OutletState.UNKNOWN)


_ON, _OFF, _TR = OutletState.ON, OutletState.OFF, OutletState.TRANSITION

_ENTRIES: tuple[Profile, ...] = (
    Profile(
        name="apc-rpdu",
        vendor="APC Rack PDU (PowerNet-MIB rPDU, AP78xx/AP79xx)",
        source=f"{IRONIC} SNMPDriverAPCRackPDU; PowerNet-MIB rPDUOutletControlOutletCommand "
        "(immediateOn 1, immediateOff 2; reads back the outlet state)",
        on_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
        state_values={1: _ON, 2: _OFF, 3: _TR},
        sys_object_id=f"{_APC_MS}.5",
    ),
    Profile(
        name="apc-rpdu2",
        vendor="APC Switched / Metered-by-Outlet Rack PDU (PowerNet-MIB rPDU2, AP86xx/AP89xx)",
        source="PowerNet-MIB rPDU2OutletSwitchedControlCommand (immediateOn 1, immediateOff 2), "
        "rPDU2OutletSwitchedStatusState (off 1, on 2), rPDU2OutletMeteredStatusPower (W)",
        on_oid="1.3.6.1.4.1.318.1.1.26.9.2.4.1.5.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.318.1.1.26.9.2.4.1.5.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.318.1.1.26.9.2.3.1.5.{outlet}",
        state_values={1: _OFF, 2: _ON},
        load_oid="1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.{outlet}",
        load_unit=LoadUnit.WATTS,
        sys_object_id=f"{_APC_MS}.6",
    ),
    Profile(
        name="apc-masterswitch",
        vendor="APC MasterSwitch (PowerNet-MIB sPDUOutletCtl)",
        source=f"{IRONIC} SNMPDriverAPCMasterSwitch",
        on_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.318.1.1.4.4.2.1.3.{outlet}",
        state_values={1: _ON, 2: _OFF},
        sys_object_id=f"{_APC_MS}.2",
    ),
    Profile(
        name="apc-masterswitch-plus",
        vendor="APC MasterSwitch Plus (PowerNet-MIB sPDUOutletControlMSP)",
        source=f"{IRONIC} SNMPDriverAPCMasterSwitchPlus",
        on_oid="1.3.6.1.4.1.318.1.1.6.5.1.1.5.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.318.1.1.6.5.1.1.5.{outlet}",
        off_value=3,
        state_oid="1.3.6.1.4.1.318.1.1.6.5.1.1.5.{outlet}",
        state_values={1: _ON, 3: _OFF},
        sys_object_id=f"{_APC_MS}.4",
    ),
    # ATEN-PE-CFG: pe ::= { poweroverip 2 } = aten(21317).atenProducts(1).overip(3)
    # .poweroverip(2).pe(2); control ::= { pe 2 }; outlet ::= { control 2 }
    # = 1.3.6.1.4.1.21317.1.3.2.2.2.2. Each outlet is its own read-write scalar,
    # outletNStatus INTEGER { off(1), on(2), pending(3), reboot(4), fault(5), noauth(6),
    # not-support(7), pop(8) } ("Display and control outlet N status"):
    #   outlet1Status ::= { outlet 2 } ... outlet8Status ::= { outlet 9 }   (arc N + 1)
    #   { outlet 10 } is outletConfigTable, not an outlet
    #   outlet9Status ::= { outlet 11 } ... outlet42Status ::= { outlet 44 } (arc N + 2)
    # so outlet N is ...2.2.2.2.(N+1).0 for N <= 8 and ...2.2.2.2.(N+2).0 for 9..42.
    # (Ironic's (outlet, 0) template wrote outlet 16 to { outlet 16 } = outlet14Status.)
    # PE2 units (ATEN-PE2-CFG, pe2 ::= { poweroverip 3 }) use a table instead: not this.
    Profile(
        name="aten",
        vendor="ATEN PE-series PDU (ATEN-PE-CFG outletNStatus)",
        source=f"{ATEN_PE} outlet1Status..outlet42Status under outlet "
        "(1.3.6.1.4.1.21317.1.3.2.2.2.2): off 1, on 2, pending 3, reboot 4",
        on_oid="1.3.6.1.4.1.21317.1.3.2.2.2.2.{outlet}.0",
        on_value=2,
        off_oid="1.3.6.1.4.1.21317.1.3.2.2.2.2.{outlet}.0",
        off_value=1,
        state_oid="1.3.6.1.4.1.21317.1.3.2.2.2.2.{outlet}.0",
        state_values={1: _OFF, 2: _ON, 3: _TR, 4: _TR},
        sys_object_id="1.3.6.1.4.1.21317.1.3.2.2",
        index_ranges=((1, 8, 1), (9, 42, 2)),
    ),
    Profile(
        name="cyberpower",
        vendor="CyberPower switched PDU (CPS-MIB ePDUOutletControlOutletCommand)",
        source=f"{IRONIC} SNMPDriverCyberPower",
        on_oid="1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{outlet}",
        state_values={1: _ON, 2: _OFF},
        sys_object_id="1.3.6.1.4.1.3808",
    ),
    Profile(
        name="eaton-epdu",
        vendor="Eaton ePDU (EATON-EPDU-MIB outletControlTable)",
        source=f"{IRONIC} SNMPDriverEatonPower (untested there); EATON-EPDU-MIB "
        "outletControlStatus .2 (off 0, on 1, pendingOff 2, pendingOn 3), "
        "outletControlOffCmd .3, outletControlOnCmd .4 (write 0 = now), indexed by "
        "strappingIndex.outletIndex (0 = the master unit). Ironic's code omits the "
        "strapping index and swaps .3/.4 against its own docstring; this follows the MIB",
        on_oid="1.3.6.1.4.1.534.6.6.7.6.6.1.4.0.{outlet}",
        on_value=0,
        off_oid="1.3.6.1.4.1.534.6.6.7.6.6.1.3.0.{outlet}",
        off_value=0,
        state_oid="1.3.6.1.4.1.534.6.6.7.6.6.1.2.0.{outlet}",
        state_values={0: _OFF, 1: _ON, 2: _TR, 3: _TR},
        sys_object_id="1.3.6.1.4.1.534",
    ),
    Profile(
        name="baytech-mrp27",
        vendor="Baytech MRP27 (unit 1)",
        source=f"{IRONIC} SNMPDriverBaytechMRP27 (0 off, 1 on)",
        on_oid="1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{outlet}",
        off_value=0,
        state_oid="1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{outlet}",
        state_values={0: _OFF, 1: _ON},
    ),
    Profile(
        name="servertech-sentry3",
        vendor="Server Technology Sentry 3 (Sentry3-MIB, tower 1 infeed 1)",
        source=f"{IRONIC} SNMPDriverServerTechSentry3: outletStatus .5 (off 0, on 1, "
        "offWait 2, onWait 3), outletControlAction .11 (on 1, off 2)",
        on_oid="1.3.6.1.4.1.1718.3.2.3.1.11.1.1.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.1718.3.2.3.1.11.1.1.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.1718.3.2.3.1.5.1.1.{outlet}",
        state_values={0: _OFF, 1: _ON, 2: _TR, 3: _TR},
    ),
    Profile(
        name="servertech-sentry4",
        vendor="Server Technology Sentry 4 (Sentry4-MIB, unit 1 input 1)",
        source=f"{IRONIC} SNMPDriverServerTechSentry4: st4OutletControlState .5.1.1 "
        "(pendOn 8, pendOff 9, off 10, on 11), st4OutletControlAction .5.1.2 (on 1, off 2); "
        "Sentry4-MIB st4OutletActivePower .3.1.7 (W)",
        on_oid="1.3.6.1.4.1.1718.4.1.8.5.1.2.1.1.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.1718.4.1.8.5.1.2.1.1.{outlet}",
        off_value=2,
        state_oid="1.3.6.1.4.1.1718.4.1.8.5.1.1.1.1.{outlet}",
        state_values={8: _TR, 9: _TR, 10: _OFF, 11: _ON, 12: _TR},
        load_oid="1.3.6.1.4.1.1718.4.1.8.3.1.7.1.1.{outlet}",
        load_unit=LoadUnit.WATTS,
    ),
    Profile(
        name="raritan-pdu2",
        vendor="Raritan PX2/PX3 (PDU2-MIB, pdu 1)",
        source=f"{IRONIC} SNMPDriverRaritanPDU2: outletSwitchingOperation .2 (off 0, on 1), "
        "outletSwitchingState .3 (on 7, off 8); PDU2-MIB measurementsOutletSensorValue "
        "(sensor type activePower 5, W)",
        on_oid="1.3.6.1.4.1.13742.6.4.1.2.1.2.1.{outlet}",
        on_value=1,
        off_oid="1.3.6.1.4.1.13742.6.4.1.2.1.2.1.{outlet}",
        off_value=0,
        state_oid="1.3.6.1.4.1.13742.6.4.1.2.1.3.1.{outlet}",
        state_values={7: _ON, 8: _OFF},
        load_oid="1.3.6.1.4.1.13742.6.5.4.3.1.4.1.{outlet}.5",
        load_unit=LoadUnit.WATTS,
        sys_object_id="1.3.6.1.4.1.13742.6",
    ),
    # VERTIV-V5-MIB (Ironic's "GEIST-V5-MIB"): vertiv MODULE-IDENTITY ::= { enterprises 21239 };
    # v5 ::= { vertiv 5 }; imd ::= { v5 2 }; pdu ::= { imd 3 };
    # pduOutletSwitchTable ::= { pdu 5 }; pduOutletSwitchEntry ::= { pduOutletSwitchTable 1 }
    # = 1.3.6.1.4.1.21239.5.2.3.5.1, INDEX { pduOutletSwitchIndex } (Integer32 1..100): one
    # arc, the outlet number, no PDU index. Columns:
    #   pduOutletSwitchState { entry 4 } read-only: on(1), off(2), on2off(3), off2on(4),
    #     rebootOn(5), rebootOff(6), unavailable(7) ("Cannot get outlet state": unknown)
    #   pduOutletSwitchControl { entry 6 } read-write: cancel(1), on(2), onAfterDelay(3),
    #     off(4), offAfterDelay(5), reboot(6), rebootAfterDelay(7), none(8); a GET returns
    #     none(8), so the state column is read back, never this one.
    # Older Geist firmware is another tree that this profile does not drive (such an agent
    # answers no such object here, so nothing is switched): GEIST-MIB-V3 ctrlOutletTable
    # ::= { geistV3 16 } = 1.3.6.1.4.1.21239.2.16, ctrlOutletStatus reading 0 off / 1 on and
    # taking 1 on / 3 off; GEIST-V4-MIB (watchdog100, 21239.5.1) has no outlet table.
    Profile(
        name="vertiv-geist",
        vendor="Vertiv Geist rPDU, e.g. NU30017L/NU30019L (VERTIV-V5-MIB pduOutletSwitchTable)",
        source=f"{VERTIV_V5} pduOutletSwitchState .5.1.4 (on 1, off 2, on2off 3, off2on 4, "
        "rebootOn 5, rebootOff 6), pduOutletSwitchControl .5.1.6 (on 2, off 4), "
        f"INDEX pduOutletSwitchIndex 1..100; matches {IRONIC} SNMPDriverVertivGeistPDU",
        on_oid="1.3.6.1.4.1.21239.5.2.3.5.1.6.{outlet}",
        on_value=2,
        off_oid="1.3.6.1.4.1.21239.5.2.3.5.1.6.{outlet}",
        off_value=4,
        state_oid="1.3.6.1.4.1.21239.5.2.3.5.1.4.{outlet}",
        state_values={1: _ON, 2: _OFF, 3: _TR, 4: _TR, 5: _TR, 6: _TR},
        index_ranges=((1, 100, 0),),
    ),
)

PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in _ENTRIES})
"""Every built-in profile by name."""

# Teltronix Ltd holds enterprise 23620 (IANA enterprise-numbers). Ironic's
# SNMPDriverTeltronix wrote 1.3.6.1.4.1.23620.1.2.2.1.4.<outlet> ("Outlet Power", 1 off,
# 2 on), but no Teltronix MIB is in the collections searched (librenms/librenms,
# DotZero24/pysnmp-mibs) nor anywhere else found: which table that column is in, how its
# rows are indexed (outlet, or unit.outlet) and what its values mean cannot be checked, and
# a wrong index switches another machine's outlet. No such profile until the MIB is found.
_TELTRONIX = (
    "withdrawn: its outlet object (1.3.6.1.4.1.23620.1.2.2.1.4, from Ironic's driver) could "
    "not be checked against a Teltronix MIB, and an unverified index could switch the wrong "
    "outlet; use a profile checked against its vendor's MIB, or the redfish protocol"
)
WITHDRAWN: Mapping[str, str] = MappingProxyType({"teltronix": _TELTRONIX})
"""Profile names that once existed and were removed, with why (for error messages)."""


def get_profile(name: str) -> Profile:
    """The profile named ``name``; ``KeyError`` naming the valid ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        if name in WITHDRAWN:
            raise KeyError(f"PDU profile {name!r} is {WITHDRAWN[name]}") from None
        valid = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown PDU profile {name!r}; expected auto or one of: {valid}") from None


@dataclass(frozen=True)
class Product:
    """A ``sysObjectID`` prefix and the profile(s) a device answering it may need."""

    sys_object_id: str
    """The product identifier (or enterprise prefix) as a dotted string."""
    candidates: tuple[str, ...]
    """Profile names; several (or ``probe``) means: probe each one's status read-only."""
    what: str
    """The product, for messages (with its MIB name)."""
    probe: bool = False
    """Confirm even a single candidate by reading its status (a shared enterprise)."""

    @property
    def ambiguous(self) -> bool:
        """Whether the driver must probe before it may use a candidate."""
        return self.probe or len(self.candidates) != 1


PRODUCTS: tuple[Product, ...] = (
    # PowerNet-MIB masterSwitch product identifiers and the outlet table each serves:
    # masterswitch ::= { hardware 4 } (sPDUOutletCtl), masterswitchVM ::= { hardware 5 },
    # masterswitchMSP ::= { hardware 6 }, rPDU ::= { hardware 12 }, rPDU2 ::= { hardware 26 }.
    Product(f"{_APC_MS}.1", ("apc-masterswitch",), "APC masterSwitchV1 (PowerNet-MIB)"),
    Product(f"{_APC_MS}.2", ("apc-masterswitch",),
            "APC masterSwitchV2, e.g. AP9606 (PowerNet-MIB)"),
    Product(f"{_APC_MS}.3", (), "APC masterSwitchVM (PowerNet-MIB sPDUOutletControlVM, "
            "which no profile drives)"),
    Product(f"{_APC_MS}.4", ("apc-masterswitch-plus",), "APC masterSwitchMSP (PowerNet-MIB)"),
    Product(f"{_APC_MS}.5", ("apc-rpdu",), "APC masterSwitchrPDU, AP78xx/AP79xx (PowerNet-MIB)"),
    Product(f"{_APC_MS}.6", ("apc-rpdu2",),
            "APC masterSwitchrPDU2, e.g. AP86xx/AP89xx/APDU99xx (PowerNet-MIB)"),
    # masterSwitchsPDU and masterSwitchrPDUB (AP7xxxB, "added support for AP7xxxB series
    # Rack PDUs" in v4.2.0) have no outlet table of their own in the MIB: a recorded
    # AP7900B (librenms tests/snmpsim/apc_ap7900b.snmprec) serves sPDUOutletCtl beside
    # rPDU2 device tables, so the firmware decides: probe.
    Product(f"{_APC_MS}.7", ("apc-masterswitch", "apc-rpdu", "apc-rpdu2"),
            "APC masterSwitchsPDU (PowerNet-MIB)"),
    Product(f"{_APC_MS}.8", ("apc-rpdu2", "apc-rpdu", "apc-masterswitch"),
            "APC masterSwitchrPDUB, AP7xxxB (PowerNet-MIB)"),
    # ATEN's enterprise is shared by PE2 units (another layout) and ATEN-IPMI BMCs.
    Product("1.3.6.1.4.1.21317", ("aten",), "ATEN (enterprise 21317)", probe=True),
    Product("1.3.6.1.4.1.3808", ("cyberpower",), "CyberPower (CPS-MIB)"),
    Product("1.3.6.1.4.1.534", ("eaton-epdu",), "Eaton (EATON-EPDU-MIB)"),
    Product("1.3.6.1.4.1.23620", (), "Teltronix Ltd (enterprise 23620), whose profile "
            "teltronix is withdrawn: its outlet objects could not be checked against a "
            "Teltronix MIB"),
    Product("1.3.6.1.4.1.13742.6", ("raritan-pdu2",), "Raritan PX2/PX3 (PDU2-MIB)"),
)
"""What ``profile: auto`` knows, longest matching prefix first wins."""


def detect(sys_object_id: str) -> Product | None:
    """The product entry whose ``sysObjectID`` prefix is the longest match, or None."""
    oid = sys_object_id.strip(".")
    best: Product | None = None
    for product in PRODUCTS:
        prefix = product.sys_object_id
        if (oid == prefix or oid.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best.sys_object_id)
        ):
            best = product
    return best
