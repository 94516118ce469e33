"""The simulated Talos machines behind the mock's endpoint, and the faults it injects.

A machine is addressed by the node name a client sends in the ``nodes`` metadata (or
the endpoint's own hostname when none is sent) and is created, powered on, the first
time it is addressed. A reboot makes it unavailable for ``reboot_seconds``, then it
answers again; a shutdown makes it silent until it is powered on through the
control hook, as a real machine would need a person or another channel. Each boot
(the first, after a reboot, after a power-on) sets the machine's ``boot_time``, as
Talos reports it from ``SystemStat``: whole seconds since the Unix epoch, and always
later than the boot before, so two boots within one second still differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Fault", "Machine", "Simulation"]


class Fault(str, Enum):
    """A fault the mock injects for a node (or ``*``, every node)."""

    UNAVAILABLE = "unavailable"
    """Every call answers gRPC UNAVAILABLE, as apid does for a node it cannot reach."""
    SLOW = "slow"
    """Every call waits ``seconds`` before it is handled (a hanging endpoint)."""
    PERMISSION_DENIED = "permission_denied"
    """Every call answers gRPC PERMISSION_DENIED, as Talos RBAC does for a weak role."""


@dataclass
class Machine:
    """One simulated Talos machine."""

    name: str
    state: str = "on"
    """``on``, ``rebooting`` or ``off``."""
    up_at: float = 0.0
    """While rebooting: when it answers again (monotonic seconds)."""
    boot_time: int = field(default_factory=lambda: int(time.time()))
    """When the machine last booted (Unix seconds), as ``SystemStat.boot_time``."""
    boots: int = 1
    """How many times the machine booted (the first boot included)."""

    def boot(self) -> None:
        """A boot now: ``boot_time`` becomes now, and always moves forward."""
        self.boot_time = max(int(time.time()), self.boot_time + 1)
        self.boots += 1


@dataclass
class Simulation:
    """Every machine the mock knows, the faults in force, and what was dispatched."""

    reboot_seconds: float = 1.0
    """How long a rebooting machine stays unavailable."""
    machines: dict[str, Machine] = field(default_factory=dict)
    faults: dict[str, tuple[Fault, float]] = field(default_factory=dict)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    """Every accepted verb, in order: ``{"node", "verb", "mode" | "force"}``."""
    received: list[dict[str, Any]] = field(default_factory=list)
    """Every call whose request message arrived, before any fault: ``{"node", "rpc"}``
    (so a test knows a call is in flight while a ``slow`` fault holds it)."""

    def machine(self, node: str) -> Machine:
        """The machine named ``node`` (created powered on when first addressed)."""
        found = self.machines.get(node)
        if found is None:
            found = self.machines[node] = Machine(node)
        return found

    def state(self, node: str) -> str:
        """The machine's state now (a finished reboot reads ``on``)."""
        machine = self.machine(node)
        if machine.state == "rebooting" and time.monotonic() >= machine.up_at:
            machine.state = "on"
        return machine.state

    def fault_for(self, node: str) -> tuple[Fault, float] | None:
        """The fault in force for ``node``, if any."""
        return self.faults.get(node) or self.faults.get("*")

    def reboot(self, node: str, mode: str) -> None:
        """Accept a reboot: unavailable for ``reboot_seconds``, booted at the reboot's time."""
        machine = self.machine(node)
        machine.state = "rebooting"
        machine.up_at = time.monotonic() + self.reboot_seconds
        machine.boot()
        self.dispatches.append({"node": node, "verb": "reboot", "mode": mode})

    def shutdown(self, node: str, force: bool) -> None:
        """Accept a shutdown: the machine is silent until powered on."""
        self.machine(node).state = "off"
        self.dispatches.append({"node": node, "verb": "shutdown", "force": force})

    def power_on(self, node: str) -> None:
        """The control hook's power-on (a person at the rack, or another channel).

        A machine that was off boots (a new ``boot_time``); one that is on stays as it is.
        """
        machine = self.machine(node)
        if machine.state == "off":
            machine.boot()
        machine.state = "on"
