"""Audit records of the lifecycle: the authority's, kept by the store.

:class:`AuditRecord` and :class:`Action` (with the one map of a maintenance request's
intent, and of what a person adds to it later, to its action) live in
:mod:`powerplane.authority` (one record for every path: a direct call, a maintenance
request, the Servers surface); a store keeps them append-only beside the maintenances they
join to (see :mod:`powerplane.authority.audit` for the fields).

A store that keeps its trail chained itself (not through the SQLite store's table: the
``kubernetes`` store's ``MaintenanceAudit`` objects) needs the chain's vocabulary
(:mod:`powerplane.authority.chain`): :data:`AuditEntry`, one entry of a trail as read
back (its position, its canonical bytes, what it says, its hash), and
:func:`encode_entry`, the canonical encoding an entry's hash is taken over.
"""

from __future__ import annotations

from powerplane.authority.actions import Action, action_for_intent, action_for_request
from powerplane.authority.audit import AuditRecord
from powerplane.authority.chain import Entry as AuditEntry
from powerplane.authority.chain import canonical as encode_entry

__all__ = ["Action", "AuditEntry", "AuditRecord", "action_for_intent", "action_for_request",
           "encode_entry"]
