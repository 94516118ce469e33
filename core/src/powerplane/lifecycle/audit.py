"""Audit records of the lifecycle: the authority's, kept by the store.

:class:`AuditRecord` and :class:`Action` (with the one map of a maintenance request's
intent, and of what a person adds to it later, to its action) live in
:mod:`powerplane.authority` (one record for every path: a direct call, a maintenance
request, the Servers surface); a store keeps them append-only beside the maintenances they
join to (see :mod:`powerplane.authority.audit` for the fields).
"""

from __future__ import annotations

from powerplane.authority.actions import Action, action_for_intent, action_for_request
from powerplane.authority.audit import AuditRecord

__all__ = ["Action", "AuditRecord", "action_for_intent", "action_for_request"]
