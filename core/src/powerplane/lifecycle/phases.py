"""The phase graph: which transitions are valid, and the one function that makes them.

::

    [Pending ->] Requested -> Cordoned -> Draining -> Drained -> Rebooting | PoweredOff
        -> Returning -> Complete
    Refused and Failed are terminal; abandon from any non-terminal phase goes to Returning.

``Pending`` is a request recorded by its requester and not yet admitted by the executor
(a store whose objects any client may create: the ``kubernetes`` store); admission makes
it ``Requested`` or ``Refused`` (an abandoned pending request is ``Refused``: nothing was
done). ``Refused`` is reachable only from ``Pending`` and ``Requested`` (before anything
was done): a safety
rule that fails later holds the maintenance where it is, with the numbers, so that
nothing is left cordoned by a terminal phase nobody returns from.
"""

from __future__ import annotations

from powerplane.errors import LifecycleError
from powerplane.lifecycle.model import (
    Intent,
    NodeMaintenance,
    Phase,
    Transition,
    utcnow,
)

__all__ = ["ALLOWED", "PARKED", "InvalidTransition", "is_allowed", "park_phase", "transition"]

P = Phase

ALLOWED: dict[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.REQUESTED, P.REFUSED}),
    P.REQUESTED: frozenset({P.CORDONED, P.REFUSED, P.FAILED, P.RETURNING}),
    P.CORDONED: frozenset({P.DRAINING, P.RETURNING, P.FAILED}),
    P.DRAINING: frozenset({P.DRAINED, P.RETURNING, P.FAILED}),
    P.DRAINED: frozenset({P.REBOOTING, P.POWERED_OFF, P.RETURNING, P.FAILED}),
    P.REBOOTING: frozenset({P.RETURNING, P.FAILED}),
    P.POWERED_OFF: frozenset({P.RETURNING}),
    P.RETURNING: frozenset({P.COMPLETE, P.FAILED}),
    P.COMPLETE: frozenset(),
    P.REFUSED: frozenset(),
    P.FAILED: frozenset(),
}
"""Every valid transition; nothing leaves a terminal phase."""

PARKED: dict[Intent, Phase] = {
    Intent.CORDON: P.CORDONED,
    Intent.DRAIN: P.DRAINED,
    Intent.SHUTDOWN: P.POWERED_OFF,
}
"""Where each intent waits for a person to return the node (reboot returns by itself)."""


class InvalidTransition(LifecycleError):
    """A transition the phase graph does not allow (a bug, never a user error)."""


def is_allowed(src: Phase, dst: Phase) -> bool:
    """Whether ``src -> dst`` is in the graph."""
    return dst in ALLOWED[src]


def park_phase(intent: Intent) -> Phase | None:
    """The phase where ``intent`` parks until returned, or None (reboot)."""
    return PARKED.get(intent)


def transition(m: NodeMaintenance, dst: Phase, why: str = "") -> None:
    """Move ``m`` to ``dst``, appending to its history; raises on an invalid transition."""
    src = m.status.phase
    if not is_allowed(src, dst):
        raise InvalidTransition(f"{m.name}: {src} -> {dst} is not a valid transition")
    m.status.history.append(Transition(from_phase=src, to=dst, at=utcnow(), why=why))
    m.status.phase = dst
