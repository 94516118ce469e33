"""The safety checks every action passes: at request time, in the reconciler, and on a direct call.

One derivation, three callers. The request path (``Lifecycle.preflight``), the reconciler
(:func:`check` before every step that takes a node further out) and a direct ``invoke``
(:class:`LifecycleGuard`, which the runtime attaches to every host of a deployment with a
``lifecycle:`` section: :mod:`powerplane.runtime`) all read the cluster once with
:func:`observe` and judge each node with :func:`judge`:

* a virtual node (``lifecycle.virtual_label``) refuses every action;
* the quorum guard (:mod:`powerplane.lifecycle.quorum`) refuses an action that would drop
  ready control-plane members below quorum, and refuses when no membership can be derived.

A direct call of reboot, shutdown or terminate is further refused on a node with an active
maintenance (the lifecycle owns that node until it is returned or abandoned; the refusal
names the maintenance and its phase), and its reason must meet ``lifecycle.reason_policy``
(exit 2). Nodes of one call count against quorum together, in the order given: each node
the guard allows is counted as taken out for the nodes after it, so invoking reboot on all
three members of a three-member control plane allows the first and refuses the other two.
Every active maintenance counts as having taken its node out, even one still ``Requested``
(as at request time).

A direct call climbs the same ceremony ladder as ``maintenance request`` for the same act
(:func:`powerplane.lifecycle.ceremony.required`, one derivation): the guard checks what a
call carries, the reason and, where the call consumes the last of the quorum margin (a
hazard), a hazard reason meeting the reason policy (``hazard_reason=``; without one the
node is refused with :class:`HazardReasonRequired`, exit 2, nothing sent). The steps a
person supplies at the command line, the acknowledgement and the typed node name, are
asked for by ``powerplane invoke`` from the same ladder (:func:`confirmation_steps`).

Power-on passes: it never takes a node out of service, so it is not counted against quorum,
not refused on a node under maintenance (a person powering a parked node back on is what
``maintenance return --machine-on`` then confirms) and, like every verb the lifecycle does
not send through this guard, not refused on a virtual node; the host does not ask the
guard about it at all.

The reconciler's own dispatch passes through the host's ``invoke`` too; it runs inside
:func:`own_dispatch`, so a guard on that host lets the maintenance's own verb through (the
reconciler has run :func:`check` for it just before) and still judges every other call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from powerplane.capabilities import Verb
from powerplane.host import GUARDED, InvokeGuard
from powerplane.lifecycle.ceremony import (
    CeremonyRequired,
    MaintenanceRefused,
    Step,
    action_for_verb,
    required,
)
from powerplane.lifecycle.cluster import ClusterPort
from powerplane.lifecycle.model import Phase, QuorumNumbers
from powerplane.lifecycle.quorum import assess, derive_membership
from powerplane.settings.lifecycle import LifecycleConfig

if TYPE_CHECKING:
    from powerplane.lifecycle.ports import Ports

__all__ = [
    "GUARDED",
    "ClusterView",
    "GuardRefused",
    "HazardReasonRequired",
    "InvokeGuard",
    "SafetyVerdict",
    "check",
    "confirmation_steps",
    "judge",
    "observe",
    "own_dispatch",
    "own_maintenance",
]



@dataclass(frozen=True)
class SafetyVerdict:
    """Allowed or not, why, the quorum numbers, and whether it is a hazard."""

    allowed: bool
    reason: str
    numbers: QuorumNumbers | None = None
    hazard: bool = False
    virtual: bool = False


@dataclass(frozen=True)
class ClusterView:
    """What the guard reads from the cluster, once per decision."""

    labels: Mapping[str, Mapping[str, str]]
    """Every node and its labels."""
    members: list[str] | None
    """Control-plane members derived from the labels (None: none can be derived)."""
    ready: Mapping[str, bool | None]
    """Each member's readiness (None: cannot tell, which counts as not ready)."""


async def observe(cluster: ClusterPort, config: LifecycleConfig) -> ClusterView:
    """Read labels, derive membership and read the members' readiness, all in one round.

    A port with ``ready_many`` reads them in that one call; otherwise the ``is_ready``
    reads run concurrently; every one is waited for, and when any fails the
    first failure in member order is raised (as reading them one after another would),
    so nothing is decided on a partial view.
    """
    labels = await cluster.labels()
    members = derive_membership(labels, config.control_plane_label)
    ready: dict[str, bool | None] = {}
    many = getattr(cluster, "ready_many", None)
    if many is not None and members:  # the port reads them all in one call
        got = await many(members)
        return ClusterView(labels, members, {m: got.get(m) for m in members})
    found = await asyncio.gather(*(cluster.is_ready(m) for m in members or []),
                                 return_exceptions=True)
    for member, value in zip(members or [], found, strict=True):
        if isinstance(value, BaseException):
            raise value
        ready[member] = value
    return ClusterView(labels, members, ready)


def judge(
    view: ClusterView, config: LifecycleConfig, node: str, taken: Collection[str]
) -> SafetyVerdict:
    """Whether ``node`` may be taken out of service, ``taken`` being already out."""
    if config.virtual_label in view.labels.get(node, {}):
        return SafetyVerdict(
            False,
            f"{node} is a virtual node (label {config.virtual_label}): every action is refused",
            virtual=True,
        )
    verdict = assess(
        node,
        view.members,
        view.ready,
        {t for t in taken if t != node},
        no_control_plane=config.no_control_plane,
        label=config.control_plane_label,
    )
    return SafetyVerdict(verdict.allowed, verdict.reason, verdict.numbers, verdict.hazard)


async def check(
    ports: Ports,
    config: LifecycleConfig,
    node: str,
    others: Sequence[tuple[str, Phase]],
    *,
    count_requested: bool,
) -> SafetyVerdict:
    """Whether ``node`` may be taken out of service now.

    ``others`` are the other active maintenances as ``(node, phase)``; those past
    ``Requested`` (all of them when ``count_requested``) count as having taken their node
    out of service; a ``Pending`` one (not admitted yet) never does.
    """
    view = await observe(ports.cluster, config)
    taken = {
        other
        for other, phase in others
        if other != node and phase is not Phase.PENDING
        and (count_requested or phase is not Phase.REQUESTED)
    }
    return judge(view, config, node, taken)


# -- a direct call -------------------------------------------------------------------------------
class GuardRefused(MaintenanceRefused):
    """The lifecycle guard refuses a direct call of a verb on this node (exit 3)."""

    def __init__(
        self,
        node: str,
        verb: Verb,
        reason: str,
        numbers: QuorumNumbers | None = None,
        *,
        maintenance: str | None = None,
        phase: Phase | None = None,
    ) -> None:
        super().__init__(node, reason, numbers)
        self.verb = verb
        self.maintenance = maintenance
        """The active maintenance that holds the node, when that is the refusal."""
        self.phase = phase
        self.args = (f"{verb.value} refused for {node} by the lifecycle guard: {reason}",)


class HazardReasonRequired(CeremonyRequired):
    """The call consumes the last of the quorum margin and carries no acceptable hazard
    reason (exit 2, nothing sent): the hazard tier of the ladder."""

    def __init__(
        self, node: str, verb: Verb, problem: str, numbers: QuorumNumbers | None = None
    ) -> None:
        super().__init__([problem])
        self.node = node
        self.verb = verb
        self.numbers = numbers
        counts = ""
        if numbers is not None:
            counts = (f" ({numbers.members} control-plane members, {numbers.ready} ready, "
                      f"quorum {numbers.quorum}, margin {numbers.margin})")
        self.args = (f"{verb.value} of {node} not sent: {problem}{counts}",)


def confirmation_steps(verb: Verb) -> list[Step]:
    """The steps of the ladder for a direct call of ``verb`` that a person supplies at the
    command line (the acknowledgement and the typed node name); the guard checks the rest."""
    return [step for step in required(action_for_verb(verb), False)
            if step in (Step.ACK_PREFLIGHT, Step.TYPED_NODE)]


_OWN_DISPATCH: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "powerplane_lifecycle_own_dispatch", default=None
)


def own_maintenance() -> str | None:
    """The maintenance whose own verb the calls in this context send (:func:`own_dispatch`)."""
    return _OWN_DISPATCH.get()


@contextlib.contextmanager
def own_dispatch(maintenance: str) -> Iterator[None]:
    """Mark the calls made inside as maintenance ``maintenance`` sending its own verb."""
    token = _OWN_DISPATCH.set(maintenance)
    try:
        yield
    finally:
        _OWN_DISPATCH.reset(token)
