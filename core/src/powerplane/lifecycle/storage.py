"""The storage port: read and write a node's storage fields, count replicas left on it.

* ``NoStorage``: no storage system; nothing to evacuate (logged once per node).

The simulated storage lives with the other simulators (:mod:`powerplane.sim.storage`).

``apply_writes`` performs a hook's writes in order, skipping a field that already holds
its value, and treats an absent storage object as nothing to evacuate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from powerplane.errors import LifecycleError
from powerplane.lifecycle.evacuation import EvacuationHook, Write

__all__ = ["NoStorage", "StorageError", "StoragePort", "apply_writes"]

log = logging.getLogger("powerplane.lifecycle.storage")


class StorageError(LifecycleError):
    """The storage system refused a write or could not be read."""


class StoragePort(Protocol):
    """What the lifecycle needs from a storage system."""

    hook: EvacuationHook | None
    """The writes to begin and end an evacuation (None: no storage system)."""

    async def read(self, node: str) -> dict[str, bool] | None:
        """The node's storage fields, or None when it has no storage object."""
        ...

    async def write(self, node: str, fieldname: str, value: bool) -> None:
        """One update of one field."""
        ...

    async def replicas_remaining(self, node: str) -> int:
        """Replicas that still live only on this node (0 when it has no storage object)."""
        ...


class NoStorage:
    """No storage system installed: nothing to evacuate."""

    hook: EvacuationHook | None = None

    def __init__(self) -> None:
        self._logged: set[str] = set()

    def note_absent(self, node: str) -> None:
        if node not in self._logged:
            self._logged.add(node)
            log.info("node %s: no storage system; nothing to evacuate", node)

    async def read(self, node: str) -> dict[str, bool] | None:
        self.note_absent(node)
        return None

    async def write(self, node: str, fieldname: str, value: bool) -> None:
        return None

    async def replicas_remaining(self, node: str) -> int:
        return 0


async def apply_writes(storage: StoragePort, node: str, writes: Sequence[Write]) -> list[Write]:
    """Write each field in order, skipping any that already hold their value.

    Returns the writes performed. An absent storage object is nothing to evacuate.
    """
    done: list[Write] = []
    for fieldname, value in writes:
        current = await storage.read(node)
        if current is None:
            return done
        if current.get(fieldname) == value:
            continue
        await storage.write(node, fieldname, value)
        done.append((fieldname, value))
    return done
