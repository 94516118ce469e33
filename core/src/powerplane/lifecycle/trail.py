"""The lifecycle store as the authority's audit trail: one trail for a deployment with a
``lifecycle:`` section (direct acts, denials and maintenance requests side by side).

:class:`StoreAudit` writes through a :class:`~powerplane.lifecycle.ports.SharedStore` (the
store the runtime's guard and lifecycle share: once a lifecycle holds it open, records go
through that open store; before, each write opens it and closes it again, and a read
creates no store), or through one store given open (a test's, a gateway's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from powerplane.errors import AuditNotRecorded, PowerplaneError
from powerplane.lifecycle.ports import SharedStore

if TYPE_CHECKING:
    from powerplane.authority.chain import Entry
    from powerplane.authority.seal import Signer
    from powerplane.lifecycle.audit import AuditRecord
    from powerplane.lifecycle.ports import MaintenanceStore

__all__ = ["StoreAudit"]


class StoreAudit:
    """A maintenance store's audit as the authority's sink (see the module docstring)."""

    def __init__(self, store: MaintenanceStore | SharedStore,
                 description: str = "the lifecycle store",
                 signer: Signer | Callable[[], Signer] | None = None) -> None:
        self._store = store
        self.description = description
        self._signer = signer

    @property
    def signer(self) -> Signer | None:
        """The key that seals each append (loaded on first use), or None."""
        if callable(self._signer) and not hasattr(self._signer, "sign"):
            self._signer = self._signer()
        return self._signer  # type: ignore[return-value]

    @contextlib.contextmanager
    def _opened(self, create: bool = True) -> Iterator[MaintenanceStore]:
        if isinstance(self._store, SharedStore):
            with self._store.using(create=create) as store:
                yield store
            return
        yield self._store

    def append(self, records: Sequence[AuditRecord]) -> None:
        try:
            with self._opened() as store:
                # one transaction for a call's records where the store's own class has it
                # (a wrapper that overrides append_audit alone still sees every record)
                if callable(getattr(type(store), "append_audits", None)):
                    store.append_audits(records, self.signer)  # type: ignore[attr-defined]
                else:
                    for rec in records:
                        store.append_audit(rec)
        except PowerplaneError as exc:
            raise AuditNotRecorded(
                f"the audit record could not be written to {self.description} ({exc}): "
                "nothing was done") from None

    def records(self, node: str | None = None) -> list[AuditRecord]:
        with self._opened(create=False) as store:
            return store.audit(node)

    def entries(self) -> list[Entry]:
        """The whole trail as entries (for ``powerplane audit verify``), where the store
        keeps it chained; an empty list where it keeps none."""
        with self._opened(create=False) as store:
            found = getattr(store, "audit_entries", None)
            return list(found()) if callable(found) else []

    def trails(self) -> dict[str, list[Entry]]:
        """Every trail the store keeps, by a name for people, each as entries: one per
        writer where the store keeps one per concurrent writer (``audit_trails``: the
        ``kubernetes`` store), else the store's one trail (:meth:`entries`)."""
        with self._opened(create=False) as store:
            found = getattr(store, "audit_trails", None)
            if callable(found):
                return {f"{self.description}, trail {name}": list(entries)
                        for name, entries in found().items()}
            found = getattr(store, "audit_entries", None)
            return {self.description: list(found()) if callable(found) else []}
