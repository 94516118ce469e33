"""The simulated machines that carry a host's nodes, read from their own model.

The simulated cluster stands for a kubelet, whose Ready condition and boot id come from
the node itself, not from a power request: it reads the state and boot count of the
simulated machine that carries each node (a :class:`~powerplane.sim.channel.SimulatedChannel`,
by type) from the machine's model, never through a channel request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane.sim.channel import SimulatedChannel

if TYPE_CHECKING:
    from powerplane.config import Deployment
    from powerplane.host import Host

__all__ = ["SimulatedMachines", "machine_boots", "machine_model_state"]


def machine_model_state(host: Host, node: str) -> str | None:
    """A node's simulated machine's own state (None: no simulated machine carries it).

    The simulated cluster stands for a kubelet, whose Ready condition comes from the node
    itself, not from a power readback: it reads the state of the simulated machine that
    carries the node (a :class:`~powerplane.sim.channel.SimulatedChannel`, by type) from
    that machine's model, never through a channel request, whatever readback the channel
    offers: ``on``, ``off`` or a transition word (``rebooting``, ``powering-on``, ...).
    One call looks the machine up afresh; :class:`SimulatedMachines` remembers where.
    """
    return SimulatedMachines(host).state(node)


def machine_boots(host: Host, node: str) -> int | None:
    """How often a node's simulated machine has booted (None: no simulated machine).

    The simulated cluster stands for a kubelet, which knows its own node's boot id without
    asking a power channel: it reads the boot count of the simulated machine that carries
    the node (a :class:`~powerplane.sim.channel.SimulatedChannel`, by type), never through a
    channel request.
    """
    return SimulatedMachines(host).boots(node)


_Lookup = tuple[
    "Deployment",
    tuple[tuple[str, object], ...],
    tuple[tuple[SimulatedChannel, str], ...],
]
"""How a node's machines were found: the host's deployment then, each of the node's
channels by name with the object the host gave for it (None: it had none), and the
simulated ones among them with their targets, in the node's order."""


class SimulatedMachines:
    """The simulated machines that carry each node of a host, looked up once per node.

    What :func:`machine_model_state` and :func:`machine_boots` read, for a port that asks
    often (the simulated cluster, before every step). Only *where* the machine is is
    remembered: its state and boot count are read from the machine's model at every call.
    A remembered lookup is used only while the host's deployment is the same object and
    the host gives, for every channel of the node, the very object it gave then (a host
    closed and used again creates new channels, so the lookup is made afresh).
    """

    def __init__(self, host: Host) -> None:
        self.host = host
        self._found: dict[str, _Lookup] = {}
        self.lookups = 0
        """How often a node's channels were looked up afresh (tests)."""

    def state(self, node: str) -> str | None:
        """The node's machine state (None: no simulated machine carries it)."""
        for ch, target in self._machines(node):
            try:
                return ch.state_of(target)
            except KeyError:
                continue
        return None

    def boots(self, node: str) -> int | None:
        """How often the node's machine has booted (None: no simulated machine)."""
        for ch, target in self._machines(node):
            try:
                return ch.boots_of(target)
            except KeyError:
                continue
        return None

    def _machines(self, node: str) -> tuple[tuple[SimulatedChannel, str], ...]:
        host = self.host
        found = self._found.get(node)
        if found is not None and found[0] is host.deployment:
            for name, seen in found[1]:
                try:
                    now: object = host.channel(name)
                except KeyError:
                    now = None
                if now is not seen:
                    break
            else:
                return found[2]
        deployment = host.deployment
        channels: list[tuple[str, object]] = []
        machines: list[tuple[SimulatedChannel, str]] = []
        for ref in deployment.nodes[node].channels:
            try:
                ch: object = host.channel(ref.channel)
            except KeyError:
                ch = None
            channels.append((ref.channel, ch))
            if isinstance(ch, SimulatedChannel):
                machines.append((ch, ref.target))
        self.lookups += 1
        self._found[node] = (deployment, tuple(channels), tuple(machines))
        return self._found[node][2]
