"""The gating policy: whether a check runs, or ends before it starts as SKIP or NOT TESTED.

A pure function of what the check declares (its :class:`~powerplane_conformance.checks.CheckSpec`
and verb), what the channel claimed (its capability set, or why discovery failed) and what
the target file allows. No pytest, no I/O: :func:`gate` is unit-tested on its own, and the
suite's ``check`` fixture only carries out its verdict.

The order is the policy:

1. discovery failed: NOT TESTED (except the check that proves discovery itself);
2. the channel's claims: a verb it does not advertise is a SKIP (for the refusal check,
   a verb it *does* advertise is);
3. the node was terminated by an earlier check: NOT TESTED;
4. the target file: ``allow_destructive`` off, or terminate without ``allow_terminate``:
   NOT TESTED.

The first rule that applies decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from powerplane import CapabilitySet, Verb
from powerplane_conformance.checks import CheckSpec

__all__ = ["Gate", "gate"]

DISCOVERY_CHECK = "CAPABILITIES_DISCOVERED"
"""The one check that runs when discovery failed: it reports that failure."""


@dataclass(frozen=True)
class Gate:
    """A check stopped before it ran: how it ends and why."""

    outcome: Literal["skip", "not_tested"]
    """``skip``: the channel does not claim what the check needs; ``not_tested``: the
    target file (or an earlier check) blocks it."""
    reason: str
    """One line a person reads in the report."""


def gate(
    spec: CheckSpec,
    verb: Verb | None,
    assertion: str,
    *,
    channel: str | None,
    node: str | None,
    caps: CapabilitySet | str | None,
    terminated: bool,
    allow_destructive: bool,
    allow_terminate: bool,
) -> Gate | None:
    """Whether the check runs (``None``) or how it ends before it starts.

    ``caps`` is the subject's capability set, the text of why discovery failed, or
    ``None`` for a check that spans a whole channel (no single subject). ``terminated``:
    an earlier check terminated the subject.
    """
    if caps is not None:
        if not isinstance(caps, CapabilitySet):
            if assertion != DISCOVERY_CHECK:
                return Gate("not_tested", f"discovery failed on channel {channel!r}: {caps}")
        elif spec.absent and verb is not None:
            if caps.advertises(verb):
                return Gate("skip", f"channel {channel} advertises {verb.value}; this check "
                                    "applies only to verbs it does not advertise")
        elif verb is not None and not caps.advertises(verb):
            return Gate("skip", f"channel {channel} does not advertise {verb.value}")
        if terminated:
            return Gate("not_tested", f"{node} was terminated by an earlier check")
    if spec.destructive and not allow_destructive:
        return Gate("not_tested", "allow_destructive is off in the target file")
    if verb is Verb.TERMINATE and not spec.absent and not allow_terminate:
        return Gate("not_tested",
                    "allow_terminate is off in the target file (terminate is never undone)")
    return None
