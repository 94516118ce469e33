"""The demo's fleet: the slots peers (or simulated stand-ins) fill, the stand-ins, and the
conformance matrix's cells as the walkthrough prints them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from powerplane.testing import Peer, Role

__all__ = ["CONTROL_PLANE", "ROLES", "SIMULATED_STANDINS", "SLOTS", "STANDIN_MACHINES", "Slot"]

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
ROLES: tuple[Role, ...] = ("bmc", "inband", "pdu", "cloud")


@dataclass(frozen=True)
class Slot:
    """One place in the demo's fleet a peer (or, when none starts, a stand-in) fills.

    A slot with ``peer`` set is that peer's own: only the peer of that name fills it. The
    others take the first peer of their role that has no slot of its own.
    """

    key: str
    """The slot's name: the stand-in is ``sim-<key>``, its machines ``<key>-m<i>``."""
    role: Role
    peer: str | None = None


SLOTS: tuple[Slot, ...] = (
    Slot("bmc", "bmc"),
    Slot("inband", "inband"),
    Slot("pdu", "pdu"),
    Slot("cloud", "cloud"),
    # the second BMC of the fleet: the protocol most plants still speak, next to Redfish
    Slot("ipmi", "bmc", peer="ipmi"),
)
"""Every slot of the fleet, in the order the conformance matrix lists them."""
SLOT_BY_KEY = {s.key: s for s in SLOTS}


def slot_for(peer: Peer, taken: dict[str, Any]) -> Slot | None:
    """The slot ``peer`` fills: its own, else the first free one of its role that no peer
    owns; None when that is already taken."""
    own = [s for s in SLOTS if s.peer == peer.name]
    free = own or [s for s in SLOTS if s.role == peer.role and s.peer is None]
    return next((s for s in free if s.key not in taken), None)


STANDIN_MACHINES = 6
"""Machines per stand-in: the deployment uses the first four, the conformance suite the last
two (so the suite's power changes never touch a machine of the deployment)."""


SIMULATED_STANDINS: dict[Role, dict[str, Any]] = {
    "bmc": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
            "transition_ms": 200},
    "inband": {"type": "simulated", "verbs": ["reboot", "shutdown"], "readback": "on-only",
               "transition_ms": 200},
    "pdu": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
            "graceful": False},
    "cloud": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on", "terminate"]},
}


def matrix_cells(data: dict[str, Any]) -> dict[str, str]:
    """Per verb, the suite's own matrix: advertised (graceful/hard) and verified, not
    verified, FAILED, or not advertised. A verb with one passing check and another NOT
    TESTED is not verified: the cell never says more than the suite observed."""
    from powerplane.cli.kit import esc  # on first use: rich markup escaped

    advertised: dict[str, str] = {}
    for chan in data.get("channels", []):
        for caps in chan.get("capabilities", {}).values():
            verbs = caps.get("verbs", {}) if isinstance(caps, dict) else {}
            advertised.update(verbs)
    status: dict[str, str] = {}
    for row in data.get("matrix", []):
        for cell in row.get("verbs", []):
            was = status.get(cell["verb"])
            rank = ("failed", "not_verified", "verified", "not_advertised")
            if was is None or rank.index(cell["status"]) < rank.index(was):
                status[cell["verb"]] = cell["status"]
    cells = {}
    for verb in ("reboot", "shutdown", "power-on", "terminate"):
        how = esc(advertised.get(verb, ""))
        st = status.get(verb, "not_advertised")
        if st == "failed":
            cells[verb] = f"{how} [red]FAIL[/red]" if how else "[red]- but acted[/red]"
        elif st == "verified":
            cells[verb] = f"{how} [green]ok[/green]"
        elif st == "not_verified":
            cells[verb] = f"{how} [yellow]? not verified[/yellow]"
        else:
            cells[verb] = "[dim]-[/dim]"
    return cells
