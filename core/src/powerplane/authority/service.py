"""``Authority``: one deployment's policy, its audit, and the identity of this process.

Every path that acts asks it the same way: :meth:`Authority.authorize` decides an action
for the nodes of a request (before any ceremony: nobody types a node name for an act
they may not take), records each denial (rate-limited per identity) and returns it as a
:class:`~powerplane.errors.PolicyDenied`; :meth:`Authority.record` makes the accepted
acts' records durable before they are performed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from powerplane.authority.actions import Action
from powerplane.authority.audit import (
    AuditBatch,
    AuditRecord,
    AuditSink,
    DenialLimiter,
    JsonLinesAudit,
    default_audit_path,
    now,
)
from powerplane.authority.identity import Identity, local_identity
from powerplane.authority.policy import NO_POLICY, Decision, Policy, denied
from powerplane.errors import AuditNotRecorded, PolicyDenied

if TYPE_CHECKING:
    from powerplane.nodes import NodeSpec

__all__ = ["Authority"]

log = logging.getLogger("powerplane.authority")


class Authority:
    """Decides, records, and knows who this process is (see the module docstring).

    ``identity``: whom a call that names no identity acts for (default: the OS user of this
    process, :func:`~powerplane.authority.identity.local_identity`). ``sink``: where records
    go (default: :func:`~powerplane.authority.audit.default_audit_path`, opened on first
    record).
    """

    def __init__(
        self,
        policy: Policy = NO_POLICY,
        sink: AuditSink | None = None,
        *,
        identity: Identity | None = None,
        limiter: DenialLimiter | None = None,
    ) -> None:
        self.policy = policy
        self._sink = sink
        self._identity = identity
        self.limiter = limiter if limiter is not None else DenialLimiter()
        self._denials: set[tuple[str, Action, str, str, str]] = set()
        """The denials this authority recorded (user, action, node, reason, rule): asked
        again for the same request (a plan, then the call), a denial is recorded once."""

    @property
    def identity(self) -> Identity:
        """Whom a call acts for when it names no identity: this process's OS user."""
        if self._identity is None:
            self._identity = local_identity()
        return self._identity

    @property
    def sink(self) -> AuditSink:
        """Where this authority's records go (fixed when it is built)."""
        if self._sink is None:
            self._sink = JsonLinesAudit(default_audit_path())
        return self._sink

    async def decide(
        self, action: Action, nodes: Sequence[tuple[str, NodeSpec | None]],
        identity: Identity | None = None,
    ) -> list[Decision]:
        """The policy's decision per node, recording nothing (``offers``, ``auth can-i``)."""
        return await self.policy.decide(identity or self.identity, action, nodes)

    async def decide_actions(
        self, actions: Sequence[Action], nodes: Sequence[tuple[str, NodeSpec | None]],
        identity: Identity | None = None,
    ) -> dict[Action, list[Decision]]:
        """:meth:`decide` for several actions over the same nodes (one pass where the
        policy can: ``offers`` asks read and every verb's action per node)."""
        who = identity or self.identity
        many = getattr(self.policy, "decide_actions", None)
        if callable(many):
            found: dict[Action, list[Decision]] = await many(who, actions, nodes)
            return found
        return {a: await self.policy.decide(who, a, nodes) for a in actions}

    async def authorize(
        self, action: Action, nodes: Sequence[tuple[str, NodeSpec | None]],
        identity: Identity | None = None, *, reason: str = "",
    ) -> dict[str, Decision | PolicyDenied]:
        """Per node: its allowing :class:`Decision`, or the :class:`PolicyDenied` to raise
        (each denial recorded first: :meth:`record_denial`)."""
        who = identity or self.identity
        decisions = await self.policy.decide(who, action, nodes)
        out: dict[str, Decision | PolicyDenied] = {}
        refused: list[AuditRecord] = []
        for (node, _), decision in zip(nodes, decisions, strict=True):
            if decision.allowed:
                out[node] = decision
                continue
            out[node] = denied(decision, node)
            record = self._denial(who, action, node, decision.rule, reason, decision)
            if record is not None:
                refused.append(record)
        self._append_denials(refused)
        return out

    async def require(
        self, action: Action, node: str, spec: NodeSpec | None,
        identity: Identity | None = None, *, reason: str = "",
    ) -> Decision:
        """The allowing decision for one node, or raise its :class:`PolicyDenied`."""
        return (await self.require_all(action, [(node, spec)], identity, reason=reason))[node]

    async def require_all(
        self, action: Action, nodes: Sequence[tuple[str, NodeSpec | None]],
        identity: Identity | None = None, *, reason: str = "",
    ) -> dict[str, Decision]:
        """Every node's allowing decision, or raise the first denial in the order given
        (every denial recorded): a call that must hold the action on each of its nodes
        (``state``, ``fence_powerplane status``, a page of one server)."""
        found = await self.authorize(action, nodes, identity, reason=reason)
        for decision in found.values():
            if isinstance(decision, PolicyDenied):
                raise decision
        return found  # type: ignore[return-value]

    async def permitted(
        self, action: Action, nodes: Sequence[tuple[str, NodeSpec | None]],
        identity: Identity | None = None,
    ) -> list[str]:
        """The nodes among ``nodes`` (in order) ``identity`` may take ``action`` on,
        recording nothing: what a list shows its caller (``maintenance list``, ``audit``,
        ``fence_powerplane list``, the Servers surface's pages), the rest left out unnamed."""
        decisions = await self.decide(action, nodes, identity)
        return [node for (node, _), d in zip(nodes, decisions, strict=True) if d.allowed]

    def record_denial(
        self, identity: Identity, action: Action, node: str, rule: str, *,
        reason: str = "", limit_key: str | None = None,
    ) -> None:
        """Record a denial that no per-node decision made (a whole list refused, an act by
        a caller who could not be authenticated), through the same deduplication and rate
        limit as :meth:`authorize`'s (``limit_key``: the bucket, default the user: an
        unauthenticated caller's address). The denial stands whether or not its record can
        be written (a warning then)."""
        record = self._denial(identity, action, node, rule, reason, None, limit_key)
        self._append_denials([record] if record is not None else [])

    def _denial(self, who: Identity, action: Action, node: str, rule: str, reason: str,
                decision: Decision | None, limit_key: str | None = None,
                ) -> AuditRecord | None:
        """The record of one denial, or None: the same denial already recorded by this
        authority (a plan, then the call), or the identity over its rate limit."""
        seen = (who.user, action, node, reason, decision.rule if decision else rule)
        if seen in self._denials:
            return None
        self._denials.add(seen)
        left_out = self.limiter.admit(limit_key or who.user)
        if left_out is None:
            return None
        more = (f"{left_out} earlier denial(s) of this user not recorded (rate limit)"
                if left_out else "")
        return AuditRecord(
            actor=who.user, groups=who.groups, via=who.via,
            on_behalf_of=who.on_behalf_of or "", action=action, reason=reason, node=node,
            detail=more, outcome="denied", rule=decision.rule if decision else rule)

    def _append_denials(self, records: list[AuditRecord]) -> None:
        if not records:
            return
        try:
            self.sink.append(records)
        except AuditNotRecorded as exc:  # the denial stands either way
            log.warning("denial not recorded: %s", exc)

    def record_of(
        self, identity: Identity, decision: Decision, node: str, reason: str, *,
        maintenance: str = "", detail: str = "", outcome: str = "accepted",
        action: Action | None = None,
    ) -> AuditRecord:
        """The audit record of one act (or denial) by ``identity`` on ``node``."""
        return AuditRecord(
            actor=identity.user, groups=identity.groups, via=identity.via,
            on_behalf_of=identity.on_behalf_of or "", action=action or decision.action,
            reason=reason, node=node, maintenance=maintenance, detail=detail,
            outcome=outcome, rule=decision.rule,
        )

    def records_of(
        self, identity: Identity, action: Action, nodes: Sequence[str],
        decisions: Sequence[Decision], reason: str,
    ) -> AuditBatch:
        """The audit records of one call's accepted acts by ``identity``: one per node of
        ``nodes``, allowed by the decision at the same place in ``decisions``, all of
        ``action``, at one time (now: the call's acts are authorized together), as one
        :class:`~powerplane.authority.audit.AuditBatch`."""
        return AuditBatch(
            actor=identity.user, groups=identity.groups, via=identity.via,
            on_behalf_of=identity.on_behalf_of or "", action=action, reason=reason,
            nodes=nodes, decisions=decisions, at=now(),
        )

    def record(self, records: Sequence[AuditRecord]) -> None:
        """Make the accepted acts' records durable, all of them at once (one ``append``
        of the sink: for the JSON-lines file one write and one ``fsync``);
        :class:`AuditNotRecorded` if they are not (then none of the acts is performed)."""
        self.sink.append(records)
