"""The cluster port: cordon, uncordon, drain progress, readiness, labels.

The protocol (:class:`ClusterPort`), what a drain round reports (:class:`DrainProgress`),
and one embedded adapter; the simulated cluster lives with the other simulators
(:mod:`powerplane.sim.cluster`).

* ``NoCluster``: bare machines. Cordon and drain are not applicable and recorded so;
  readiness is the machine's power reading; there is no boot id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "BootOf",
    "ClusterPort",
    "DrainProgress",
    "ModelOf",
    "NoCluster",
    "PowerOf",
]

PowerOf = Callable[[str], Awaitable[str]]
"""Reads a node's machine power state: ``on``, ``off``, ``unknown`` or a transition word."""

BootOf = Callable[[str], Awaitable[str | None]]
"""Reads a node's machine boot count (None: no machine modelled for it)."""

ModelOf = Callable[[str], str | None]
"""Reads a node's machine state from the machine's own model, without a request (None:
no machine modelled for it: ``power_of`` is asked instead)."""


@dataclass(frozen=True)
class DrainProgress:
    """One drain round: what is left, what is blocked and by which PDB."""

    remaining: tuple[str, ...] = ()
    """Pods still on the node (terminating or refused)."""
    blocked: Mapping[str, str] = field(default_factory=dict)
    """Pod -> the PDB that refused its eviction."""
    applicable: bool = True
    """False where the cluster has no pods at all (bare machines)."""

    @property
    def done(self) -> bool:
        return not self.remaining

    def describe(self) -> str:
        if not self.applicable:
            return "drain not applicable (no cluster)"
        if self.done:
            return "no pods left"
        parts = [f"waiting for {len(self.remaining)} pod(s) to leave: "
                 f"{', '.join(self.remaining[:10])}"]
        by_pdb: dict[str, list[str]] = {}
        for pod, pdb in self.blocked.items():
            by_pdb.setdefault(pdb, []).append(pod)
        for pdb, pods in sorted(by_pdb.items()):
            parts.append(f"blocked by PDB {pdb} ({', '.join(sorted(pods))})")
        return "; ".join(parts)


class ClusterPort(Protocol):
    """What the lifecycle needs from a cluster."""

    applicable: bool
    """False for bare machines: cordon and drain are recorded as not applicable."""

    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        """Every node and its labels (control-plane membership is derived from these).

        A mapping once returned is not changed in place: when labels change, return a new
        one (membership is derived once per mapping, :func:`~powerplane.lifecycle.quorum.
        derive_membership`)."""
        ...

    async def is_ready(self, node: str) -> bool | None:
        """Whether the node is ready (None: cannot tell).

        A port may also define ``async ready_many(nodes) -> Mapping[str, bool | None]``,
        every node's readiness in one call (one list instead of a read per node, or no
        await at all for a model in memory); the guard uses it when present and otherwise
        reads :meth:`is_ready` of every member concurrently."""
        ...

    async def boot_id(self, node: str) -> str | None:
        """A value that changes on every boot of the node (None: the cluster has none)."""
        ...

    async def cordon(self, node: str) -> None: ...

    async def uncordon(self, node: str) -> None: ...

    async def is_cordoned(self, node: str) -> bool: ...

    async def pods_on(self, node: str) -> list[str]: ...

    async def pdbs_for(self, pods: list[str]) -> list[str]: ...

    async def drain(self, node: str) -> DrainProgress:
        """One round: evict every pod still there, report what is left and what is blocked."""
        ...


class NoCluster:
    """Bare machines: no cordon, no pods; readiness is the machine's power reading."""

    applicable = False

    def __init__(
        self, node_labels: Mapping[str, Mapping[str, str]], power_of: PowerOf | None = None
    ) -> None:
        self._labels = {n: dict(v) for n, v in node_labels.items()}
        self._power_of = power_of

    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._labels

    async def is_ready(self, node: str) -> bool | None:
        if self._power_of is None:
            return None
        state = await self._power_of(node)
        if state == "on":
            return True
        if state == "off":
            return False
        return None

    async def boot_id(self, node: str) -> str | None:
        return None

    async def cordon(self, node: str) -> None:
        return None

    async def uncordon(self, node: str) -> None:
        return None

    async def is_cordoned(self, node: str) -> bool:
        return False

    async def pods_on(self, node: str) -> list[str]:
        return []

    async def pdbs_for(self, pods: list[str]) -> list[str]:
        return []

    async def drain(self, node: str) -> DrainProgress:
        return DrainProgress(applicable=False)
