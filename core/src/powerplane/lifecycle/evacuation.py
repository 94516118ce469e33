"""Storage evacuation (ADR 0025): the hook's ordered writes and the status function.

Begin writes scheduling off, then eviction requested; end writes eviction cancelled
first, then scheduling on (Longhorn's webhook refuses any state with both true). Each
write is its own update, and a field already holding its value is not rewritten.

``evacuation_status`` is one function for every storage system: no replica left is
done; otherwise a reached timeout is paused (never done: a paused evacuation never
proceeds to drain); otherwise waiting.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

__all__ = [
    "EvacuationHook",
    "EvacuationStatus",
    "LonghornHook",
    "Write",
    "evacuation_status",
    "hook_for",
]

Write = tuple[str, bool]
"""One field and the value to write."""


class EvacuationStatus(str, Enum):
    """Where an evacuation stands."""

    WAITING = "waiting"
    """Replicas still live only on this node; the timeout has not passed."""
    DONE = "done"
    """No replica lives only on this node."""
    PAUSED = "paused"
    """The timeout passed with replicas left: pause, end the evacuation, never drain."""

    def __str__(self) -> str:
        return self.value


class EvacuationHook(Protocol):
    """What a storage system writes to begin and end evacuating a node, in order."""

    name: str

    def begin(self) -> list[Write]:
        """The writes that start an evacuation, in order."""
        ...

    def end(self) -> list[Write]:
        """The writes that end an evacuation, in order."""
        ...


class LonghornHook:
    """Longhorn's ``nodes.longhorn.io`` fields: ``allowScheduling`` and ``evictionRequested``."""

    name = "longhorn"

    def begin(self) -> list[Write]:
        return [("allowScheduling", False), ("evictionRequested", True)]

    def end(self) -> list[Write]:
        return [("evictionRequested", False), ("allowScheduling", True)]


def hook_for(preset: str) -> EvacuationHook:
    """The hook of a named preset."""
    if preset == "longhorn":
        return LonghornHook()
    raise ValueError(f"unknown storage preset {preset!r}; expected: longhorn")


def evacuation_status(
    replicas_remaining: int, elapsed: float, timeout: float
) -> EvacuationStatus:
    """Done when nothing remains; else paused once ``elapsed >= timeout``; else waiting."""
    if replicas_remaining <= 0:
        return EvacuationStatus.DONE
    if elapsed >= timeout:
        return EvacuationStatus.PAUSED
    return EvacuationStatus.WAITING
