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
from pathlib import Path
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
from powerplane.authority.policy import NO_POLICY, Decision, Policy, PolicyContext, denied
from powerplane.errors import AuditNotRecorded, PolicyDenied

if TYPE_CHECKING:
    from powerplane.config import Deployment, NodeSpec

__all__ = ["Authority", "audit_file_of", "authority_for", "policy_of"]

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
        self._denials: set[tuple[str, Action, str, str]] = set()
        """The denials this authority recorded (user, action, node, reason): asked again
        for the same request (a plan, then the call), a denial is recorded once."""

    @property
    def identity(self) -> Identity:
        """Whom a call acts for when it names no identity: this process's OS user."""
        if self._identity is None:
            self._identity = local_identity()
        return self._identity

    @property
    def sink(self) -> AuditSink:
        if self._sink is None:
            self._sink = JsonLinesAudit(default_audit_path())
        return self._sink

    @sink.setter
    def sink(self, sink: AuditSink) -> None:
        self._sink = sink

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
        (each denial recorded first, rate-limited per identity)."""
        who = identity or self.identity
        decisions = await self.policy.decide(who, action, nodes)
        out: dict[str, Decision | PolicyDenied] = {}
        refused: list[AuditRecord] = []
        for (node, _), decision in zip(nodes, decisions, strict=True):
            if decision.allowed:
                out[node] = decision
                continue
            out[node] = denied(decision, node)
            seen = (who.user, action, node, reason)
            if seen in self._denials:
                continue
            self._denials.add(seen)
            left_out = self.limiter.admit(who.user)
            if left_out is not None:
                more = (f"{left_out} earlier denial(s) of this user not recorded (rate limit)"
                        if left_out else "")
                refused.append(self.record_of(who, decision, node, reason, outcome="denied",
                                              detail=more))
        if refused:
            try:
                self.sink.append(refused)
            except AuditNotRecorded as exc:  # the denial stands either way
                log.warning("denial not recorded: %s", exc)
        return out

    async def require(
        self, action: Action, node: str, spec: NodeSpec | None,
        identity: Identity | None = None, *, reason: str = "",
    ) -> Decision:
        """The allowing decision for one node, or raise its :class:`PolicyDenied`."""
        found = (await self.authorize(action, [(node, spec)], identity, reason=reason))[node]
        if isinstance(found, PolicyDenied):
            raise found
        return found

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


def policy_of(deployment: Deployment) -> Policy:
    """The policy the deployment's ``policy:`` section builds (none: :data:`NO_POLICY`)."""
    spec = getattr(deployment, "policy", None)
    if spec is None:
        return NO_POLICY
    policy: Policy = spec.type.factory(spec.config, PolicyContext(source=deployment.source))
    return policy


def audit_file_of(deployment: Deployment) -> Path:
    """The JSON-lines audit file of direct calls: ``audit.path`` (relative: beside the
    deployment file), else :func:`~powerplane.authority.audit.default_audit_path`."""
    settings = getattr(deployment, "audit", None)
    path = settings.path if settings is not None else None
    if path is None:
        return default_audit_path()
    found = Path(path)
    if not found.is_absolute() and not deployment.source.startswith("<"):
        found = Path(deployment.source).parent / found
    return found


def authority_for(
    deployment: Deployment, *, sink: AuditSink | None = None,
    identity: Identity | None = None,
) -> Authority:
    """The deployment's authority: its policy, and ``sink`` (else its audit file)."""
    return Authority(policy_of(deployment), sink or JsonLinesAudit(audit_file_of(deployment)),
                     identity=identity)
