"""Outlet objects as each vendor's MIB defines them, and recorded-style walks built from them.

Nothing here is read from ``powerplane_pdu.profiles``: every OID, index layout and value
below was written from the MIB text, so the tests compare the profiles against the
vendors, not against themselves. Sources (MIB files as carried by public collections):

* APC PowerNet-MIB v4.2.6: librenms/librenms ``mibs/apc/PowerNet-MIB`` (same text in
  DotZero24/pysnmp-mibs ``mibs/apc/PowerNet-MIB``)
* ATEN-PE-CFG v1.1.115: librenms/librenms ``mibs/aten/ATEN-PE-CFG``
* CPS-MIB, EATON-EPDU-MIB, PDU2-MIB (Raritan), Sentry3-MIB, Sentry4-MIB,
  Baytech-MIB-401-4: DotZero24/pysnmp-mibs ``mibs/<vendor>/<name>``
* VERTIV-V5-MIB (Vertiv/Geist, enterprise 21239) rev 202007200000Z: DotZero24/pysnmp-mibs
  ``mibs/geist/VERTIV-V5-MIB`` (the outlet objects are the same in rev 202001070000Z,
  librenms/librenms ``mibs/vertiv/VERTIV-V5-MIB``)
* a recorded AP7900B: librenms/librenms ``tests/snmpsim/apc_ap7900b.snmprec``

No Teltronix (enterprise 23620) MIB was found, so no ``teltronix`` entry: that profile is
withdrawn (``powerplane_pdu.profiles.WITHDRAWN``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "ATEN_ARC",
    "MIB",
    "VERTIV_STATES",
    "VERTIV_SWITCH",
    "MibOutlets",
    "apc_walks",
    "aten_pe16_walk",
    "mib_walk",
]


@dataclass(frozen=True)
class MibOutlets:
    """One vendor's outlet objects: OID of outlet ``n``'s status, on and off writes."""

    mib: str
    state: Callable[[int], str]
    on: Callable[[int], str]
    on_value: int
    off: Callable[[int], str]
    off_value: int
    reads_on: int
    reads_off: int


# ATEN-PE-CFG: outlet ::= { control 2 } = 1.3.6.1.4.1.21317.1.3.2.2.2.2;
# outlet1Status ::= { outlet 2 } ... outlet8Status ::= { outlet 9 }; { outlet 10 } is
# outletConfigTable; outlet9Status ::= { outlet 11 } ... outlet16Status ::= { outlet 18 }.
ATEN_ARC = {1: 2, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 8, 8: 9,
            9: 11, 10: 12, 11: 13, 12: 14, 13: 15, 14: 16, 15: 17, 16: 18}
ATEN_OUTLET = "1.3.6.1.4.1.21317.1.3.2.2.2.2"

# VERTIV-V5-MIB: vertiv ::= { enterprises 21239 }; v5 ::= { vertiv 5 }; imd ::= { v5 2 };
# pdu ::= { imd 3 }; pduOutletSwitchTable ::= { pdu 5 }; pduOutletSwitchEntry ::= { table 1 },
# INDEX { pduOutletSwitchIndex } (Integer32 1..100)
VERTIV_SWITCH = "1.3.6.1.4.1.21239.5.2.3.5.1"

MIB: dict[str, MibOutlets] = {
    # rPDUOutletControlOutletCommand { rPDUOutletControlEntry 4 }, entry = ...12.3.3.1.1:
    # immediateOn(1), immediateOff(2); "Getting this variable will return the outlet state"
    "apc-rpdu": MibOutlets(
        "PowerNet-MIB rPDUOutletControlOutletCommand",
        lambda n: f"1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{n}",
        lambda n: f"1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{n}", 1,
        lambda n: f"1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{n}", 2, 1, 2),
    # rPDU2OutletSwitchedControlCommand ...26.9.2.4.1.5: immediateOn(1), immediateOff(2);
    # rPDU2OutletSwitchedStatusState ...26.9.2.3.1.5: off(1), on(2)
    "apc-rpdu2": MibOutlets(
        "PowerNet-MIB rPDU2OutletSwitchedControlCommand / rPDU2OutletSwitchedStatusState",
        lambda n: f"1.3.6.1.4.1.318.1.1.26.9.2.3.1.5.{n}",
        lambda n: f"1.3.6.1.4.1.318.1.1.26.9.2.4.1.5.{n}", 1,
        lambda n: f"1.3.6.1.4.1.318.1.1.26.9.2.4.1.5.{n}", 2, 2, 1),
    # sPDUOutletCtl { sPDUOutletControlEntry 3 } = ...4.4.2.1.3: outletOn(1), outletOff(2)
    "apc-masterswitch": MibOutlets(
        "PowerNet-MIB sPDUOutletCtl",
        lambda n: f"1.3.6.1.4.1.318.1.1.4.4.2.1.3.{n}",
        lambda n: f"1.3.6.1.4.1.318.1.1.4.4.2.1.3.{n}", 1,
        lambda n: f"1.3.6.1.4.1.318.1.1.4.4.2.1.3.{n}", 2, 1, 2),
    # sPDUOutletControlMSPOutletCommand ...6.5.1.1.5: immediateOnMSP(1), immediateOffMSP(3);
    # a GET returns immediateOnMSP (1) when on, immediateOffMSP (3) when off
    "apc-masterswitch-plus": MibOutlets(
        "PowerNet-MIB sPDUOutletControlMSPOutletCommand",
        lambda n: f"1.3.6.1.4.1.318.1.1.6.5.1.1.5.{n}",
        lambda n: f"1.3.6.1.4.1.318.1.1.6.5.1.1.5.{n}", 1,
        lambda n: f"1.3.6.1.4.1.318.1.1.6.5.1.1.5.{n}", 3, 1, 3),
    # outletNStatus scalars (instance .0): off(1), on(2)
    "aten": MibOutlets(
        "ATEN-PE-CFG outletNStatus",
        lambda n: f"{ATEN_OUTLET}.{ATEN_ARC[n]}.0",
        lambda n: f"{ATEN_OUTLET}.{ATEN_ARC[n]}.0", 2,
        lambda n: f"{ATEN_OUTLET}.{ATEN_ARC[n]}.0", 1, 2, 1),
    # ePDUOutletControlOutletCommand ...3808.1.1.3.3.3.1.1.4: immediateOn(1), immediateOff(2);
    # a GET returns immediateOn (1) when on, immediateOff (2) when off
    "cyberpower": MibOutlets(
        "CPS-MIB ePDUOutletControlOutletCommand",
        lambda n: f"1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{n}",
        lambda n: f"1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{n}", 1,
        lambda n: f"1.3.6.1.4.1.3808.1.1.3.3.3.1.1.4.{n}", 2, 1, 2),
    # outletControlTable INDEX { strappingIndex, outletIndex }, ...534.6.6.7.6.6.1:
    # outletControlStatus .2 off(0) on(1); outletControlOffCmd .3 / OnCmd .4: 0 = now
    "eaton-epdu": MibOutlets(
        "EATON-EPDU-MIB outletControlStatus / OffCmd / OnCmd",
        lambda n: f"1.3.6.1.4.1.534.6.6.7.6.6.1.2.0.{n}",
        lambda n: f"1.3.6.1.4.1.534.6.6.7.6.6.1.4.0.{n}", 0,
        lambda n: f"1.3.6.1.4.1.534.6.6.7.6.6.1.3.0.{n}", 0, 1, 0),
    # sBTAModulesRPCOutletState ...4779.1.3.5.3.1.3, INDEX { module, outlet }: off(0), on(1)
    "baytech-mrp27": MibOutlets(
        "Baytech-MIB-401-4 sBTAModulesRPCOutletState (module 1)",
        lambda n: f"1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{n}",
        lambda n: f"1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{n}", 1,
        lambda n: f"1.3.6.1.4.1.4779.1.3.5.3.1.3.1.{n}", 0, 1, 0),
    # outletStatus ...1718.3.2.3.1.5 off(0) on(1); outletControlAction .11 on(1) off(2);
    # outletTable indexed tower.infeed.outlet
    "servertech-sentry3": MibOutlets(
        "Sentry3-MIB outletStatus / outletControlAction (tower 1, infeed 1)",
        lambda n: f"1.3.6.1.4.1.1718.3.2.3.1.5.1.1.{n}",
        lambda n: f"1.3.6.1.4.1.1718.3.2.3.1.11.1.1.{n}", 1,
        lambda n: f"1.3.6.1.4.1.1718.3.2.3.1.11.1.1.{n}", 2, 1, 0),
    # st4OutletControlState ...1718.4.1.8.5.1.1 off(10) on(11); st4OutletControlAction .2
    # on(1) off(2); INDEX { st4UnitIndex, st4InputCordIndex, st4OutletIndex }
    "servertech-sentry4": MibOutlets(
        "Sentry4-MIB st4OutletControlState / st4OutletControlAction (unit 1, cord 1)",
        lambda n: f"1.3.6.1.4.1.1718.4.1.8.5.1.1.1.1.{n}",
        lambda n: f"1.3.6.1.4.1.1718.4.1.8.5.1.2.1.1.{n}", 1,
        lambda n: f"1.3.6.1.4.1.1718.4.1.8.5.1.2.1.1.{n}", 2, 11, 10),
    # outletSwitchControlEntry ...13742.6.4.1.2.1, INDEX { pduId, outletId }:
    # switchingOperation .2 off(0) on(1); outletSwitchingState .3 on(7) off(8)
    "raritan-pdu2": MibOutlets(
        "PDU2-MIB switchingOperation / outletSwitchingState (pdu 1)",
        lambda n: f"1.3.6.1.4.1.13742.6.4.1.2.1.3.1.{n}",
        lambda n: f"1.3.6.1.4.1.13742.6.4.1.2.1.2.1.{n}", 1,
        lambda n: f"1.3.6.1.4.1.13742.6.4.1.2.1.2.1.{n}", 0, 7, 8),
    # pduOutletSwitchState { entry 4 } on(1) off(2); pduOutletSwitchControl { entry 6 }
    # on(2) off(4) (a GET of the control column returns none(8): it is never read back)
    "vertiv-geist": MibOutlets(
        "VERTIV-V5-MIB pduOutletSwitchState / pduOutletSwitchControl",
        lambda n: f"{VERTIV_SWITCH}.4.{n}",
        lambda n: f"{VERTIV_SWITCH}.6.{n}", 2,
        lambda n: f"{VERTIV_SWITCH}.6.{n}", 4, 1, 2),
}
"""Profiles checked against their MIB (every built-in profile)."""

VERTIV_STATES = {1: "on", 2: "off", 3: "transition", 4: "transition", 5: "transition",
                 6: "transition", 7: "unknown"}
"""VERTIV-V5-MIB pduOutletSwitchState: on(1), off(2), on2off(3) and off2on(4) (a delayed
switch pending), rebootOn(5) and rebootOff(6) (a reboot cycle), unavailable(7) ("Cannot get
outlet state")."""


def _key(line: str) -> tuple[int, ...]:
    return tuple(int(p) for p in line.split("|", 1)[0].split("."))


def mib_walk(m: MibOutlets, sys_object_id: str, outlets: dict[int, str]) -> list[str]:
    """A walk of outlets ``{n: "on"|"off"}``: status and control objects at the MIB's OIDs.

    Control objects use snmpsim's ``pduoutlet`` module so a write changes the status
    object as the PDU would."""
    records = {"1.3.6.1.2.1.1.2.0": f"6|{sys_object_id}"}
    for n, start in outlets.items():
        state = m.state(n)
        records[state] = f"2:pduoutlet|value={m.reads_on if start == 'on' else m.reads_off}"
        effects: dict[str, list[str]] = {}
        for oid, written, result in ((m.on(n), m.on_value, m.reads_on),
                                     (m.off(n), m.off_value, m.reads_off)):
            if oid == state:
                # one object to write and read: it must read back what is written
                assert written == result, f"{m.mib}: {written} written, {result} read"
                continue
            effects.setdefault(oid, []).append(f"{written}@{state}@{result}")
        for oid, items in effects.items():
            records[oid] = f"2:pduoutlet|value=0,eff={'/'.join(items)}"
    return sorted((f"{o}|{r}" for o, r in records.items()), key=_key)


def aten_pe16_walk() -> list[str]:
    """A 16-outlet ATEN PE as a walk would show it: the outlet scalars and their neighbours.

    Besides outletNStatus (all on), outletValueTable { outlet 1 } and outletConfigTable
    { outlet 10 } rows are present, as on a real PE: the arcs Ironic's template wrote to
    for outlets 1 and 10 hold tables, not outlet objects."""
    lines = ["1.3.6.1.2.1.1.2.0|6|1.3.6.1.4.1.21317.1.3.2.2",
             "1.3.6.1.2.1.1.1.0|4|ATEN PE8216"]
    for n in range(1, 17):
        lines.append(f"{ATEN_OUTLET}.1.1.1.{n}|2|{n}")  # outletValueIndex
        lines.append(f"{ATEN_OUTLET}.10.1.1.{n}|2|{n}")  # outletConfigIndex
        lines.append(f"{ATEN_OUTLET}.10.1.2.{n}|4|outlet {n}")  # outletName
        lines.append(f"{ATEN_OUTLET}.{ATEN_ARC[n]}.0|2:pduoutlet|value=2")  # outletNStatus on
    return sorted(lines, key=_key)


APC_MS = "1.3.6.1.4.1.318.1.3.4"  # PowerNet-MIB masterSwitch ::= { system 4 }
SPDU_CTL = "1.3.6.1.4.1.318.1.1.4.4.2.1.3"  # sPDUOutletCtl
RPDU2_STATE = "1.3.6.1.4.1.318.1.1.26.9.2.3.1.5"  # rPDU2OutletSwitchedStatusState
RPDU2_CMD = "1.3.6.1.4.1.318.1.1.26.9.2.4.1.5"  # rPDU2OutletSwitchedControlCommand


def apc_walks() -> dict[str, list[str]]:
    """APC devices by community: the three product identifiers seen in the field."""
    ap9606 = [f"1.3.6.1.2.1.1.2.0|6|{APC_MS}.2",  # masterSwitchV2
              "1.3.6.1.4.1.318.1.1.4.1.4.0|4|AP9606"]  # sPDUIdentModelNumber
    ap9606 += [f"{SPDU_CTL}.{n}|2:pduoutlet|value=1" for n in range(1, 9)]
    ap89xx = mib_walk(MIB["apc-rpdu2"], f"{APC_MS}.6", dict.fromkeys(range(1, 25), "on"))
    # the AP7900B as LibreNMS recorded it: sPDUOutletCtl, rPDUIdent, rPDU2 device tables
    ap7900b = [f"1.3.6.1.2.1.1.2.0|6|{APC_MS}.8",
               "1.3.6.1.4.1.318.1.1.4.1.4.0|4|AP7900B",
               "1.3.6.1.4.1.318.1.1.12.1.5.0|4|AP7900B",
               "1.3.6.1.4.1.318.1.1.26.4.3.1.1.1|2|1",
               "1.3.6.1.4.1.318.1.1.26.6.3.1.1.1|2|1"]
    ap7900b += [f"{SPDU_CTL}.{n}|2:pduoutlet|value=1" for n in range(1, 9)]
    both = [*ap7900b, *(f"{RPDU2_STATE}.{n}|2|2" for n in range(1, 9))]
    neither = [f"1.3.6.1.2.1.1.2.0|6|{APC_MS}.8", "1.3.6.1.4.1.318.1.1.12.1.5.0|4|AP7900B"]
    # outlet 5's relay does not follow its command: the status object keeps reading on(2)
    held = f"{RPDU2_CMD}.5|2:pduoutlet|value=0"
    stuck = [held if line.startswith(f"{RPDU2_CMD}.5|") else line for line in ap89xx]
    return {
        "rec-ap89xx-stuck5": stuck,
        "rec-ap9606": sorted(ap9606, key=_key),
        "rec-ap89xx": ap89xx,
        "rec-ap7900b": sorted(ap7900b, key=_key),
        "rec-ap7900b-2": sorted(ap7900b, key=_key),
        "rec-rpdub-both": sorted(both, key=_key),
        "rec-rpdub-neither": sorted(neither, key=_key),
    }
