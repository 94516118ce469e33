"""The safety checks every action passes, at request time and again in the reconciler.

A virtual node (``lifecycle.virtual_label``) refuses every action. The quorum guard
(:mod:`powerplane.lifecycle.quorum`) refuses an action that would drop ready
control-plane members below quorum, and refuses when no membership can be derived.
"""

from __future__ import annotations

from dataclasses import dataclass

from powerplane.lifecycle.model import Phase, QuorumNumbers
from powerplane.lifecycle.ports import Ports
from powerplane.lifecycle.quorum import assess, derive_membership
from powerplane.lifecycle.settings import LifecycleConfig

__all__ = ["SafetyVerdict", "check"]


@dataclass(frozen=True)
class SafetyVerdict:
    """Allowed or not, why, the quorum numbers, and whether it is a hazard."""

    allowed: bool
    reason: str
    numbers: QuorumNumbers | None = None
    hazard: bool = False
    virtual: bool = False


async def check(
    ports: Ports,
    config: LifecycleConfig,
    node: str,
    others: list[tuple[str, Phase]],
    *,
    count_requested: bool,
) -> SafetyVerdict:
    """Whether ``node`` may be taken out of service now.

    ``others`` are the other active maintenances as ``(node, phase)``; those past
    ``Requested`` (all of them when ``count_requested``) count as having taken their node
    out of service.
    """
    labels = await ports.cluster.labels()
    if config.virtual_label in labels.get(node, {}):
        return SafetyVerdict(
            False,
            f"{node} is a virtual node (label {config.virtual_label}): every action is refused",
            virtual=True,
        )
    members = derive_membership(labels, config.control_plane_label)
    ready: dict[str, bool | None] = {}
    for member in members or []:
        ready[member] = await ports.cluster.is_ready(member)
    taken = {
        other
        for other, phase in others
        if other != node and (count_requested or phase is not Phase.REQUESTED)
    }
    verdict = assess(
        node,
        members,
        ready,
        taken,
        no_control_plane=config.no_control_plane,
        label=config.control_plane_label,
    )
    return SafetyVerdict(verdict.allowed, verdict.reason, verdict.numbers, verdict.hazard)
