"""``Authority``: one deployment's policy, its audit, and the identity of this process.

Every path that acts asks it the same way: :meth:`Authority.authorize` decides an action
for the nodes of a request (before any ceremony: nobody types a node name for an act
they may not take), records each denial and returns it as a
:class:`~powerplane.errors.PolicyDenied`; :meth:`Authority.record` makes the accepted
acts' records durable before they are performed.

Denials are counted, never dropped: repeats of one denial are folded into one record with
a count (:mod:`.folding`), in bounded memory. One request asked twice (a plan, then the
call) inside :meth:`Authority.request` is one denial, recorded once.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from powerplane.authority.actions import Action
from powerplane.authority.audit import (
    AuditBatch,
    AuditRecord,
    AuditSink,
    JsonLinesAudit,
    default_audit_path,
    now,
)
from powerplane.authority.folding import DenialFolder
from powerplane.authority.identity import Identity, local_identity
from powerplane.authority.policy import NO_POLICY, Decision, Policy, denied
from powerplane.errors import AuditNotRecorded, PolicyDenied

if TYPE_CHECKING:
    from powerplane.authority.chain import Entry, Verdict
    from powerplane.nodes import NodeSpec

__all__ = ["Authority"]

log = logging.getLogger("powerplane.authority")

_ASKED: contextvars.ContextVar[set[tuple[str, str, str, str, str]] | None] = (
    contextvars.ContextVar("powerplane_denials_of_this_request", default=None))
"""The denials already recorded for the request under way (:meth:`Authority.request`)."""


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
        folder: DenialFolder | None = None,
    ) -> None:
        self.policy = policy
        self._sink = sink
        self._identity = identity
        self.folder = folder if folder is not None else DenialFolder()
        """Folds repeated denials into counted records (bounded memory)."""

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
            refused.extend(self._denial(who, action, node, decision.rule, reason))
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

    def verify(self, entries: Sequence[Entry]) -> Verdict:
        """A trail as read (``entries``, in order) verified as ``powerplane audit verify``
        checks it: against the public half of the deployment's ``audit.key`` where it names
        one (this authority's sink signs with it), else the chain alone."""
        from powerplane.authority.chain import verify

        signer = getattr(self.sink, "signer", None)
        return verify(entries, seal=signer.seal if signer is not None else None)

    def record_denial(
        self, identity: Identity, action: Action, node: str, rule: str, *,
        reason: str = "", limit_key: str | None = None,
    ) -> None:
        """Record a denial that no per-node decision made (a whole list refused, an act by
        a caller who could not be authenticated, a caller over a surface's rate limit),
        folded as :meth:`authorize`'s are (``limit_key``: who the denial is counted for,
        default the user: an unauthenticated caller's address). The denial stands whether
        or not its record can be written (a warning then)."""
        self._append_denials(self._denial(identity, action, node, rule, reason, limit_key))

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """One request, asked of the policy more than once (a plan, then the call): each of
        its denials is recorded (and counted) once. Outside it every ask is a denial."""
        token = _ASKED.set(set())
        try:
            yield
        finally:
            _ASKED.reset(token)

    def flush_denials(self, *, due_only: bool = False) -> None:
        """Write the counts of repeated denials (:mod:`.folding`): those whose window has
        closed (``due_only``: a timer's call), or all of them (at close: the host's
        ``close`` calls it; nothing counted is lost)."""
        folds = self.folder.due() if due_only else self.folder.flush()
        self._append_denials(folds)

    def _denial(self, who: Identity, action: Action, node: str, rule: str, reason: str,
                limit_key: str | None = None) -> list[AuditRecord]:
        """The records one denial makes due: its own when it is not a repeat, and the
        folds it makes due (:meth:`DenialFolder.fold
        <powerplane.authority.folding.DenialFolder.fold>`); none when the request under
        way already recorded it (:meth:`request`)."""
        asked = _ASKED.get()
        if asked is not None:
            seen = (who.user, action.value, node, reason, rule)
            if seen in asked:
                return []
            asked.add(seen)
        record = AuditRecord(
            actor=who.user, groups=who.groups, via=who.via,
            on_behalf_of=who.on_behalf_of or "", action=action, reason=reason, node=node,
            outcome="denied", rule=rule)
        return self.folder.fold(record, limit_key)

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
        :class:`AuditNotRecorded` if they are not (then none of the acts is performed).
        The counts of repeated denials are written first (the trail keeps its order)."""
        if self.folder.pending:
            self._append_denials(self.folder.take())
        self.sink.append(records)
