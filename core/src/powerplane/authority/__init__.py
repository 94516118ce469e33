"""Authority: who may take which action, and the record of who did.

Every act is one action name (:mod:`.actions`); the identity comes from the platform
(:mod:`.identity`: the OS user, the API server, a verified token), never from a flag; a
policy port decides (:mod:`.policy`; the built-in ``local`` type reads a roles file,
:mod:`.roles`); every accepted act is audited, durably, before it is performed, and every
denial is audited too (:mod:`.audit`). :class:`Authority` (:mod:`.service`) puts them
together for the host, the lifecycle and the CLI. The deployment's ``policy:`` and
``audit:`` sections are validated in :mod:`.settings`.

Modules, top first (each imports only those below it): ``service``; ``settings``;
``roles``; ``policy``, ``audit``; ``identity``, ``actions``.
"""

from __future__ import annotations

import typing

from powerplane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from powerplane.authority.actions import DEFAULT_TIER, Action, Tier, parse_action
    from powerplane.authority.audit import AuditRecord, AuditSink, JsonLinesAudit
    from powerplane.authority.identity import Identity, local_identity
    from powerplane.authority.policy import Decision, Policy, PolicyContext, PolicyType
    from powerplane.authority.service import Authority, authority_for

__all__ = [
    "DEFAULT_TIER",
    "Action",
    "AuditRecord",
    "AuditSink",
    "Authority",
    "Decision",
    "Identity",
    "JsonLinesAudit",
    "Policy",
    "PolicyContext",
    "PolicyType",
    "Tier",
    "authority_for",
    "local_identity",
    "parse_action",
]

__getattr__, __dir__ = _lazy_exports(__name__, {
    "DEFAULT_TIER": "powerplane.authority.actions",
    "Action": "powerplane.authority.actions",
    "Tier": "powerplane.authority.actions",
    "parse_action": "powerplane.authority.actions",
    "AuditRecord": "powerplane.authority.audit",
    "AuditSink": "powerplane.authority.audit",
    "JsonLinesAudit": "powerplane.authority.audit",
    "Identity": "powerplane.authority.identity",
    "local_identity": "powerplane.authority.identity",
    "Decision": "powerplane.authority.policy",
    "Policy": "powerplane.authority.policy",
    "PolicyContext": "powerplane.authority.policy",
    "PolicyType": "powerplane.authority.policy",
    "Authority": "powerplane.authority.service",
    "authority_for": "powerplane.authority.service",
})
