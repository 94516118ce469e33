"""The quorum guard: one derivation of control-plane membership, one verdict.

Membership is derived once, here, from node labels (:func:`derive_membership`); every
caller (the request path, the reconciler, ``status``) uses this function. The verdict
(:func:`assess`) counts the members that are ready and not taken out of service by another
maintenance, and:

* refuses an action that would drop them below quorum (``members // 2 + 1``),
* marks as hazard an action that consumes the last of the margin,
* refuses when no membership can be derived (an unlabelled cluster derives nothing, and a
  guard that passes because it derived nothing would be silence with worse consequences),
  unless the deployment declares it has no control plane.

A node whose readiness cannot be told counts as not ready.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from powerplane.lifecycle.model import QuorumNumbers

__all__ = ["QuorumVerdict", "assess", "derive_membership", "quorum_size"]


_DERIVED: dict[tuple[int, str], tuple[Mapping[str, Mapping[str, str]], tuple[str, ...]]] = {}
"""(id of a labels mapping, label) -> (that mapping, its members): the few most recent."""
_DERIVED_MAX = 4
_DERIVED_LOCK = threading.Lock()


def derive_membership(labels: Mapping[str, Mapping[str, str]], label: str) -> list[str] | None:
    """The control-plane members: nodes carrying ``label``; None when no node carries it.

    Derived once per labels mapping: a cluster port that hands out the same mapping on
    every call (a simulated cluster's labels do not change) is walked once, not on every
    decision of a rolling reboot. The cache holds the mapping itself, so its identity
    cannot be reused by another object while cached; a port whose labels change returns
    a new mapping (:meth:`~powerplane.lifecycle.cluster.ClusterPort.labels`).
    """
    key = (id(labels), label)
    with _DERIVED_LOCK:
        hit = _DERIVED.get(key)
    if hit is not None and hit[0] is labels:
        members = hit[1]
    else:
        members = tuple(sorted(node for node, lab in labels.items() if label in lab))
        with _DERIVED_LOCK:
            while len(_DERIVED) >= _DERIVED_MAX:
                del _DERIVED[next(iter(_DERIVED))]  # the oldest entry
            _DERIVED[key] = (labels, members)
    return list(members) or None


def quorum_size(members: int) -> int:
    """Members needed for quorum: a strict majority."""
    return members // 2 + 1


@dataclass(frozen=True)
class QuorumVerdict:
    """Allowed or refused, hazard or not, with the numbers and a sentence."""

    allowed: bool
    hazard: bool
    numbers: QuorumNumbers | None
    reason: str


def assess(
    node: str,
    members: list[str] | None,
    ready: Mapping[str, bool | None],
    taken_out: Collection[str],
    *,
    no_control_plane: bool = False,
    label: str = "",
) -> QuorumVerdict:
    """Whether taking ``node`` out of service keeps the control plane at quorum.

    ``ready`` maps members to their readiness; ``taken_out`` names nodes other
    maintenances have already taken out of service.
    """
    if members is None:
        if no_control_plane:
            return QuorumVerdict(True, False, None, "the deployment declares no control plane")
        return QuorumVerdict(
            False,
            False,
            None,
            f"no control-plane membership can be derived: no node carries the label "
            f"{label!r}; refusing rather than guessing. Set that label on the control-plane "
            f"nodes (nodes.<name>.labels: {{{label}: \"\"}}, or lifecycle.cluster.labels "
            f"of a simulated cluster), "
            f"or declare lifecycle.no_control_plane: true when the deployment has none",
        )
    available = [m for m in members if ready.get(m) is True and m not in taken_out]
    quorum = quorum_size(len(members))
    margin = len(available) - quorum
    is_member = node in members
    numbers = QuorumNumbers(
        members=len(members), ready=len(available), quorum=quorum, margin=margin, member=is_member
    )
    if not is_member:
        return QuorumVerdict(True, False, numbers, f"{node} is not a control-plane member")
    after = len(available) - (1 if node in available else 0)
    if after < quorum:
        return QuorumVerdict(
            False,
            False,
            numbers,
            f"below quorum: {len(members)} control-plane members, {len(available)} ready, "
            f"quorum {quorum}, margin {margin}; taking {node} out would leave {after}",
        )
    hazard = after == quorum and node in available
    why = (
        f"hazard: consumes the last of the quorum margin ({len(members)} members, "
        f"{len(available)} ready, quorum {quorum}, margin {margin})"
        if hazard
        else f"quorum kept: {len(members)} members, {len(available)} ready, quorum {quorum}, "
        f"margin {margin}"
    )
    return QuorumVerdict(True, hazard, numbers, why)
