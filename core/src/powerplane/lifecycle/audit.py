"""Audit records: what a person asked for, kept apart from the status (what the machine did).

One record per accepted request: the actor, the action name (``servers:reboot``), the
reason, the node, the maintenance it joins to, the source ``Server/<node>`` and the time.
Records are append-only and never hold a secret (no config value is ever copied in).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from powerplane.lifecycle.model import utcnow

__all__ = ["Action", "AuditRecord"]


class Action(str, Enum):
    """The action names of infrastructure requests (a product contract: never renamed)."""

    CORDON = "servers:cordon"
    """Take a node out of scheduling."""
    UNCORDON = "servers:uncordon"
    """Return a node to service."""
    DRAIN = "servers:drain"
    """Evict every pod from a node."""
    REBOOT = "servers:reboot"
    """Reboot a node's machine."""
    SHUTDOWN = "servers:shutdown"
    """Shut a node's machine down."""
    POWER_ON = "servers:power-on"
    """Power a node's machine back on."""
    TERMINATE = "servers:terminate"
    """Terminate a replaceable (cloud) node's instance (a direct call only)."""
    ABANDON = "servers:maintenance-abandon"
    """Abandon a maintenance; it returns the node through ``Returning``."""
    RESOLVE = "servers:maintenance-resolve"
    """A person settles a power verb whose outcome evidence could not tell (applied: move
    on; not applied: send it once more)."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class AuditRecord:
    """One accepted request, as a person made it."""

    actor: str
    action: Action
    reason: str
    node: str
    maintenance: str
    source: str = ""
    at: dt.datetime = field(default_factory=utcnow)
    detail: str = ""
    """What the ceremony added (``hazard acknowledged: ...``), never a secret."""

    def __post_init__(self) -> None:
        if not self.source:
            object.__setattr__(self, "source", f"Server/{self.node}")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["action"] = self.action.value
        out["at"] = self.at.isoformat()
        return out
