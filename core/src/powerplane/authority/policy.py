"""The policy port: who may take which action on which node.

A policy type (:class:`~powerplane.kinds.PolicyType`, in the seam layer so the registry
names it) is registered like a channel type (``register_policy_types``) and chosen by the
deployment's ``policy:`` section (``{type: local, file: roles.yaml}``; the
``kubernetes`` type of powerplane-kubernetes asks the API server). A deployment with no
``policy:`` section allows every action to whoever runs it: whoever can read the
deployment file holds its channels' credentials anyway. The identity is recorded either
way.

:meth:`Policy.decide` answers one action for many nodes at once (one ``await`` for a
fleet): a :class:`Decision` per node, with the rule that decided it. A decision is shared
between nodes that the policy cannot tell apart (the same scope), so deciding a fleet
costs a lookup per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from powerplane.authority.actions import Action
from powerplane.authority.identity import Identity
from powerplane.errors import PolicyDenied

if TYPE_CHECKING:
    from powerplane.nodes import NodeSpec

__all__ = ["NO_POLICY", "Decision", "NoPolicy", "Policy", "PolicyContext", "denied"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy decided for an identity and an action (on the nodes it was asked)."""

    allowed: bool
    action: Action
    identity: Identity
    rule: str
    """Why, in words: "role admin (tier admin) allows servers:reboot", "role night denies
    servers:shutdown", "no role allows ..."."""

    def explain(self, node: str | None = None) -> str:
        """One line: ``allowed: ...`` or ``denied: user alice (groups: ...) ...``."""
        on = f" on {node}" if node is not None else ""
        word = "allowed" if self.allowed else "denied"
        return f"{word}: {self.identity.describe()} {self.action.value}{on}: {self.rule}"

    def as_dict(self, node: str | None = None) -> dict[str, Any]:
        """The JSON shape (``auth can-i -o json``, ``offers -o json`` per verb)."""
        out: dict[str, Any] = {
            "allowed": self.allowed,
            "action": self.action.value,
            "user": self.identity.user,
            "groups": list(self.identity.groups),
            "rule": self.rule,
        }
        if node is not None:
            out["node"] = node
        return out


def denied(decision: Decision, node: str | None) -> PolicyDenied:
    """The error a denial raises (exit 3, ``"cause": "policy"``)."""
    return PolicyDenied(decision.explain(node), decision)


@runtime_checkable
class Policy(Protocol):
    """Decides actions for identities (see the module docstring)."""

    description: str
    """What decides, in words ("roles file /etc/powerplane/roles.yaml")."""

    async def decide(
        self, identity: Identity, action: Action,
        nodes: Sequence[tuple[str, NodeSpec | None]],
    ) -> list[Decision]:
        """One decision per ``(node, spec)``, in order. Raise only for a policy that cannot
        decide now (a :class:`~powerplane.errors.PowerplaneError`: the act is not taken)."""
        ...


class NoPolicy:
    """No ``policy:`` section: every action allowed (whoever runs it holds the credentials)."""

    description = "no policy: section: every action is allowed to whoever runs powerplane"

    def __init__(self) -> None:
        self._cache: dict[tuple[Identity, Action], Decision] = {}

    async def decide(
        self, identity: Identity, action: Action,
        nodes: Sequence[tuple[str, NodeSpec | None]],
    ) -> list[Decision]:
        key = (identity, action)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = Decision(
                True, action, identity,
                "the deployment has no policy: section (every action allowed)")
        return [found] * len(nodes)


NO_POLICY = NoPolicy()
"""The policy of a deployment without a ``policy:`` section."""


@dataclass(frozen=True)
class PolicyContext:
    """What a policy factory is given: where the deployment file is, and its nodes."""

    source: str
    """The deployment file (relative paths in the section are relative to its folder)."""
    options: dict[str, Any] = field(default_factory=dict)
