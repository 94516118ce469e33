"""The action names: every act of powerplane is exactly one, each independently deniable.

A product contract (never renamed), from ADR 0034 § 6 and its amendment, plus
``servers:maintenance-resolve`` (a person settles a dispatch evidence could not tell) and
``servers:terminate`` (cloud nodes)::

    action                          default tier   what it does
    servers:read                    read           offers, state, maintenance status, audit
    servers:cordon                  admin          take a node out of scheduling
    servers:uncordon                admin          return a node to service
    servers:drain                   admin          evict every pod from a node
    servers:reboot                  admin          reboot a node's machine
    servers:shutdown                admin          shut a node's machine down
    servers:power-on                admin          power a node's machine back on
    servers:terminate               admin          terminate a replaceable node's instance
    servers:maintenance-abandon     admin          abandon a maintenance (back through Returning)
    servers:maintenance-resolve     admin          settle a dispatch evidence could not tell

The default tier is what a role's ``tier`` grants without naming the action: a ``read``
role may read, an ``admin`` role may do everything; anything else is an explicit
``allow:`` line in a roles file (:mod:`powerplane.authority.roles`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import Enum

from powerplane.capabilities import Verb

__all__ = ["DEFAULT_TIER", "Action", "Tier", "action_for_verb", "parse_action"]


class Action(str, Enum):
    """The action names (a product contract: never renamed)."""

    READ = "servers:read"
    """See servers: offers, power readings, maintenances and their audit trail."""
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

    @property
    def verb(self) -> str:
        """The name without its domain (``reboot``): the RBAC verb of the action."""
        return self.value.split(":", 1)[1]


class Tier(str, Enum):
    """A role's tier: what it grants without naming actions (ordered none < read < admin)."""

    NONE = "none"
    """Nothing but the role's ``allow:`` list."""
    READ = "read"
    """Every read-tier action (``servers:read``)."""
    ADMIN = "admin"
    """Every action."""

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Tier.NONE: 0, Tier.READ: 1, Tier.ADMIN: 2}

DEFAULT_TIER: Mapping[Action, Tier] = {
    a: (Tier.READ if a is Action.READ else Tier.ADMIN) for a in Action
}
"""The tier each action sits at by default (ADR 0034 § 5: admin unless there is a reason)."""

_BY_VALUE = {a.value: a for a in Action}

_VERB_ACTIONS = {
    Verb.REBOOT: Action.REBOOT,
    Verb.SHUTDOWN: Action.SHUTDOWN,
    Verb.POWER_ON: Action.POWER_ON,
    Verb.TERMINATE: Action.TERMINATE,
}


def action_for_verb(verb: Verb) -> Action:
    """The action name of a direct call of ``verb``."""
    return _VERB_ACTIONS[verb]


def parse_action(name: str) -> Action:
    """``name`` as an :class:`Action`; a :class:`ValueError` naming the close one if not."""
    found = _BY_VALUE.get(name)
    if found is not None:
        return found
    close = difflib.get_close_matches(name, list(_BY_VALUE), n=1, cutoff=0.6)
    if not close and ":" not in name:
        close = difflib.get_close_matches(f"servers:{name}", list(_BY_VALUE), n=1, cutoff=0.6)
    mean = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown action {name!r}; the actions: {', '.join(_BY_VALUE)}{mean}")
