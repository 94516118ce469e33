"""The simulated storage: in-memory storage nodes validated like Longhorn's admission webhook.

A state with scheduling allowed while eviction is requested is refused; replicas leave a
few per read while eviction is requested. Registered as the ``simulated`` storage type by
:mod:`powerplane.builtins`. It logs under ``powerplane.lifecycle.storage``, as the
storage port's own adapters do.
"""

from __future__ import annotations

import logging

from powerplane.lifecycle.evacuation import EvacuationHook, hook_for
from powerplane.lifecycle.storage import StorageError
from powerplane.settings.lifecycle import SimulatedStorageConfig

__all__ = ["SimulatedStorage"]

log = logging.getLogger("powerplane.lifecycle.storage")


class SimulatedStorage:
    """In-memory storage nodes; rejects writes Longhorn's webhook would reject."""

    def __init__(self, config: SimulatedStorageConfig) -> None:
        self.config = config
        self.hook: EvacuationHook | None = hook_for(config.preset)
        self.fields: dict[str, dict[str, bool]] = {
            node: {"allowScheduling": True, "evictionRequested": False}
            for node in config.replicas
        }
        self.replicas: dict[str, int] = dict(config.replicas)
        self.writes: list[tuple[str, str, bool]] = []
        """Every write accepted, as (node, field, value), in order."""
        self._logged: set[str] = set()

    async def read(self, node: str) -> dict[str, bool] | None:
        found = self.fields.get(node)
        if found is None:
            if node not in self._logged:
                self._logged.add(node)
                log.info("node %s: no storage object; nothing to evacuate", node)
            return None
        return dict(found)

    async def write(self, node: str, fieldname: str, value: bool) -> None:
        current = self.fields.get(node)
        if current is None:
            return
        after = {**current, fieldname: value}
        if after.get("allowScheduling") and after.get("evictionRequested"):
            raise StorageError(
                f"storage node {node}: need to disable scheduling for node eviction, "
                "or cancel eviction to enable scheduling"
            )
        self.fields[node] = after
        self.writes.append((node, fieldname, value))

    async def replicas_remaining(self, node: str) -> int:
        current = self.fields.get(node)
        if current is None:
            return 0
        left = self.replicas.get(node, 0)
        if current["evictionRequested"] and not current["allowScheduling"] and left > 0:
            left = max(0, left - self.config.evict_per_read)
            self.replicas[node] = left
        return left
