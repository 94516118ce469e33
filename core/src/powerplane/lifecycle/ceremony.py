"""The ceremony ladder: what a person must supply for each action.

=====================================  ==================================================
action                                 ceremony
=====================================  ==================================================
``servers:cordon``, ``uncordon``       a reason
``servers:drain``                      a reason, acknowledgement of the pre-flight impact
``servers:reboot``, ``shutdown``       a reason, the acknowledgement, the typed node name
``servers:terminate`` (a direct call)  as reboot and shutdown
consuming the last of quorum margin    hazard: also a typed hazard reason and the node name
below quorum                           refused: no ceremony upgrades a refusal
=====================================  ==================================================

Every reason meets the deployment's reason policy. A node name supplied where the ladder
does not ask for one (``--confirm-node`` on a cordon) must still match: a mismatch is
refused, never ignored. One ladder for every path: ``maintenance request`` (the service),
a direct ``invoke`` under a lifecycle (the guard checks the reason and the hazard reason;
the CLI asks for the acknowledgement and the typed node name) and ``maintenance resolve``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from powerplane.authority.actions import action_for_verb
from powerplane.authority.identity import Identity
from powerplane.errors import LifecycleError
from powerplane.lifecycle.audit import Action
from powerplane.lifecycle.model import QuorumNumbers
from powerplane.settings.lifecycle import ReasonPolicy

__all__ = [
    "Ceremony",
    "CeremonyRequired",
    "MaintenanceRefused",
    "Step",
    "action_for_verb",
    "describe",
    "missing",
    "reason_problem",
    "required",
    "step_problem",
    "steps_for",
]


class Step(str, Enum):
    """One thing a person supplies."""

    REASON = "reason"
    """Why, meeting the reason policy."""
    ACK_PREFLIGHT = "ack-preflight"
    """I have seen the pre-flight impact (pods, budgets, quorum)."""
    TYPED_NODE = "typed-node"
    """The node name, typed."""
    HAZARD_REASON = "hazard-reason"
    """A typed reason for consuming the last of the quorum margin."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Ceremony:
    """What the requester supplied. Who they are is not part of it: the identity comes
    from the platform (:class:`~powerplane.authority.Identity`), never from the request."""

    reason: str
    identity: Identity | None = None
    """The authenticated requester (None: the lifecycle's host authority's identity, this
    process's OS user). Only an embedder that authenticated its caller sets it."""
    confirm_node: str | None = None
    ack_preflight: bool = False
    hazard_reason: str | None = None
    on_behalf_of: str | None = None
    """Whom the requester acts for, in words: recorded beside the identity, authorizes
    nothing."""


class CeremonyRequired(LifecycleError):
    """The request lacks part of its ceremony (nothing was recorded)."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("request not accepted: " + "; ".join(problems))


class MaintenanceRefused(LifecycleError):
    """A safety rule refuses the request; no ceremony can upgrade it."""

    exit_code = 3
    cause = "guard"

    def __init__(self, node: str, reason: str, numbers: QuorumNumbers | None = None) -> None:
        self.node = node
        self.reason = reason
        self.numbers = numbers
        super().__init__(f"refused for {node}: {reason}")


_POWER = (Action.REBOOT, Action.SHUTDOWN, Action.TERMINATE)


def required(action: Action, hazard: bool) -> list[Step]:
    """The steps ``action`` needs (with ``hazard``: the hazard tier on top)."""
    steps = [Step.REASON]
    if action is Action.DRAIN or action in _POWER:
        steps.append(Step.ACK_PREFLIGHT)
    if action in _POWER or hazard:
        steps.append(Step.TYPED_NODE)
    if hazard:
        steps.append(Step.HAZARD_REASON)
    return steps


def steps_for(action: Action, hazard: bool, ceremony: Ceremony) -> list[Step]:
    """The steps checked for ``ceremony``: those ``action`` needs, and the typed node name
    wherever one was supplied (a name that does not match is refused, never ignored)."""
    steps = required(action, hazard)
    if ceremony.confirm_node is not None and Step.TYPED_NODE not in steps:
        steps.append(Step.TYPED_NODE)
    return steps


def reason_problem(reason: str | None, policy: ReasonPolicy, what: str = "reason") -> str | None:
    """Why ``reason`` does not meet the policy, or None."""
    text = (reason or "").strip()
    if not text:
        return f"a {what} is required"
    if text.lower() in {f.lower() for f in policy.forbidden}:
        return f"the {what} {text!r} is not accepted by the reason policy"
    if len(text) < policy.min_length:
        return f"the {what} must have at least {policy.min_length} characters"
    if policy.pattern is not None and not re.search(policy.pattern, text):
        return f"the {what} must match the reason policy pattern {policy.pattern!r}"
    return None


def step_problem(
    step: Step, node: str, action: Action, ceremony: Ceremony, policy: ReasonPolicy
) -> str | None:
    """What ``ceremony`` lacks for ``step``, in words, or None when it supplies it."""
    if step is Step.REASON:
        return reason_problem(ceremony.reason, policy)
    if step is Step.ACK_PREFLIGHT:
        if ceremony.ack_preflight:
            return None
        return f"{action} needs acknowledgement of the pre-flight impact (--ack-preflight)"
    if step is Step.TYPED_NODE:
        typed = ceremony.confirm_node
        if typed == node:
            return None
        if typed is None or not typed.strip():
            return f"{action} needs the node name typed (--confirm-node {node})"
        return (f"the typed node name {typed!r} did not match {node} "
                f"(--confirm-node {node})")
    problem = reason_problem(ceremony.hazard_reason, policy, "hazard reason")
    if problem is None:
        return None
    return f"hazard: this consumes the last of the quorum margin; {problem} (--hazard-reason)"


_FLAGS = {
    Step.REASON: "--reason",
    Step.ACK_PREFLIGHT: "--ack-preflight",
    Step.TYPED_NODE: "--confirm-node",
    Step.HAZARD_REASON: "--hazard-reason",
}


def describe(
    node: str, action: Action, hazard: bool, ceremony: Ceremony, policy: ReasonPolicy
) -> list[dict[str, object]]:
    """Each step ``action`` needs: its flag, what it asks for, and whether it is supplied."""
    rules = {"min_length": policy.min_length, "pattern": policy.pattern,
             "forbidden": list(policy.forbidden)}
    needs = {
        Step.REASON: f"a reason of at least {policy.min_length} characters meeting the "
                     "reason policy",
        Step.ACK_PREFLIGHT: "acknowledgement of the pre-flight impact (pods, budgets, quorum)",
        Step.TYPED_NODE: f"the node name typed: {node}",
        Step.HAZARD_REASON: "a typed reason for consuming the last of the quorum margin",
    }
    out: list[dict[str, object]] = []
    for step in steps_for(action, hazard, ceremony):
        problem = step_problem(step, node, action, ceremony, policy)
        entry: dict[str, object] = {"step": step.value, "flag": _FLAGS[step],
                                    "needs": needs[step], "supplied": problem is None,
                                    "problem": problem}
        if step is Step.TYPED_NODE:
            entry["value"] = node
        if step in (Step.REASON, Step.HAZARD_REASON):
            entry["policy"] = rules
        out.append(entry)
    return out


def missing(
    node: str, action: Action, hazard: bool, ceremony: Ceremony, policy: ReasonPolicy
) -> list[str]:
    """What the ceremony still lacks, in words (empty when complete)."""
    problems: list[str] = []
    for step in steps_for(action, hazard, ceremony):
        problem = step_problem(step, node, action, ceremony, policy)
        if problem:
            problems.append(problem)
    return problems
