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

__all__ = ["DEFAULT_TIER", "ENTRY_POINTS", "INTENT_ACTIONS", "REQUEST_ACTIONS", "SENDS_POWER",
           "Action", "Tier",
           "action_for_intent", "action_for_request", "action_for_verb", "parse_action"]


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


INTENT_ACTIONS: Mapping[str, Action] = {
    "cordon": Action.CORDON,
    "drain": Action.DRAIN,
    "reboot": Action.REBOOT,
    "shutdown": Action.SHUTDOWN,
}
"""A maintenance request's intent and the action it is decided and audited under (the one
map: the lifecycle, the CLI and the Servers surface read it)."""

REQUEST_ACTIONS: Mapping[str, Action] = {
    "return": Action.UNCORDON,
    "abandon": Action.ABANDON,
    "resolve": Action.RESOLVE,
}
"""What a person adds to a maintenance later, and the action of each."""


def action_for_intent(intent: str) -> Action:
    """The action of a maintenance request of ``intent`` (``cordon``, ``drain``, ``reboot``,
    ``shutdown``; an ``Intent`` is a ``str``); ``KeyError`` for any other."""
    return INTENT_ACTIONS[str(getattr(intent, "value", intent))]


def action_for_request(what: str) -> Action:
    """The action of what a person adds to a maintenance (``return``, ``abandon``,
    ``resolve``); ``KeyError`` for any other."""
    return REQUEST_ACTIONS[what]


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


SENDS_POWER: frozenset[str] = frozenset({
    "cli: invoke reboot", "cli: invoke shutdown", "cli: invoke terminate",
    "cli: maintenance run", "cli: operator run",
    "fence: off", "fence: reboot",
    "api: PowerHost.invoke", "api: PowerHost.invoke_many", "api: PowerHost.invoke_stream",
    "api: Lifecycle.reconcile", "api: Lifecycle.run_pass", "api: Lifecycle.run",
})
"""The entry points through which a reboot, shutdown or terminate may leave for a device:
each passes the lifecycle's guard where the deployment has a ``lifecycle:`` section (the
runtime attached it to the host they send through)."""

ENTRY_POINTS: Mapping[str, Action | str] = {
    # the CLI: a command (with the verb or intent that chooses its action)
    "cli: offers": Action.READ,
    "cli: state": Action.READ,
    "cli: audit": Action.READ,
    "cli: audit verify": Action.READ,
    "cli: audit export": Action.READ,
    "cli: maintenance status": Action.READ,
    "cli: maintenance list": Action.READ,
    "cli: invoke reboot": Action.REBOOT,
    "cli: invoke shutdown": Action.SHUTDOWN,
    "cli: invoke power-on": Action.POWER_ON,
    "cli: invoke terminate": Action.TERMINATE,
    "cli: maintenance request --intent cordon": Action.CORDON,
    "cli: maintenance request --intent drain": Action.DRAIN,
    "cli: maintenance request --intent reboot": Action.REBOOT,
    "cli: maintenance request --intent shutdown": Action.SHUTDOWN,
    "cli: maintenance return": Action.UNCORDON,
    "cli: maintenance abandon": Action.ABANDON,
    "cli: maintenance resolve": Action.RESOLVE,
    "cli: maintenance run": "executes recorded requests: each act is asked again for the "
                           "identity that requested it",
    "cli: operator run": "executes recorded requests: each act is asked again for the "
                         "identity that requested it",
    "cli: auth can-i": "reads the policy only; acts on no server",
    "cli: plugins": "lists the installed plugins; reads no server",
    "cli: check": "proves the deployment file; calls no device",
    "cli: operator manifests": "prints manifests; reads no server",
    "cli: conformance": "qualifies a backend on the target file's own nodes, through the "
                        "channel (the tester's file, not a deployment under policy)",
    "cli: new-plugin": "writes a plugin distribution; reads no server",
    "cli: demo": "runs on loopback peers of its own; reads no server",
    # fence_powerplane: each action of the fence-agent interface
    "fence: off": Action.SHUTDOWN,
    "fence: on": Action.POWER_ON,
    "fence: reboot": "servers:shutdown then servers:power-on (method=onoff), or "
                     "servers:reboot (method=cycle, and where power-on is withheld)",
    "fence: status": Action.READ,
    "fence: monitor": Action.READ,
    "fence: list": Action.READ,
    "fence: list-status": Action.READ,
    "fence: metadata": "prints the agent's metadata; reads no server",
    "fence: validate-all": "proves the deployment loads and the plug is a node; calls no "
                           "device",
    # the embedding API: PowerHost
    "api: PowerHost.invoke": "the verb's action (action_for_verb)",
    "api: PowerHost.invoke_many": "the verb's action (action_for_verb)",
    "api: PowerHost.invoke_stream": "the verb's action (action_for_verb)",
    "api: PowerHost.plan": "the verb's action (action_for_verb), asked; nothing is sent",
    "api: PowerHost.offer_for": Action.READ,
    "api: PowerHost.offers": Action.READ,
    "api: PowerHost.read_power_state": Action.READ,
    "api: PowerHost.read_many": Action.READ,
    "api: PowerHost.boot_marker": Action.READ,
    "api: PowerHost.confirm_power_off": Action.READ,
    "api: PowerHost.capabilities": Action.READ,
    "api: PowerHost.discovery_error": Action.READ,
    "api: PowerHost.discover": Action.READ,
    "api: PowerHost.refresh": Action.READ,
    "api: PowerHost.start": Action.READ,
    "api: PowerHost.close": "releases the host's channels; acts on no server",
    "api: PowerHost.channel": "the channel object itself: the embedder's, under no policy",
    "api: PowerHost.from_config": "builds a host; acts on no server",
    # the embedding API: the lifecycle
    "api: Lifecycle.request": "the intent's action (action_for_intent)",
    "api: Lifecycle.return_to_service": Action.UNCORDON,
    "api: Lifecycle.abandon": Action.ABANDON,
    "api: Lifecycle.resolve": Action.RESOLVE,
    "api: Lifecycle.admit": "the intent's action (action_for_intent), asked",
    "api: Lifecycle.dry_run": "the intent's action (action_for_intent), asked",
    "api: Lifecycle.preflight": Action.READ,
    "api: Lifecycle.reconcile": "executes recorded requests: each act asked again for its "
                                "requester",
    "api: Lifecycle.run_pass": "executes recorded requests: each act asked again for its "
                               "requester",
    "api: Lifecycle.run": "executes recorded requests: each act asked again for its "
                          "requester",
    "api: Lifecycle.for_host": "builds a lifecycle; acts on no server",
    "api: Lifecycle.close": "releases the store; acts on no server",
}
"""Every entry point of the CLI, ``fence_powerplane`` and the embedding API, and the one
action it is (or why it is none): a test enumerates the click tree, the agent's actions and
the public methods of ``PowerHost`` and ``Lifecycle`` and fails on one missing here, and
proves for each that acts that the policy is asked, the guard runs where a power verb is
sent (:data:`SENDS_POWER`) and the act's record is durable before the act
(``core/tests/authority/test_every_entry_point.py``; docs/reference/authority.md, "Every
entry point").
The Servers surface's routes are in ``powerplane_servers.actions``; the operator's dispatch
is ``cli: operator run``. Reads through the library are the embedder's
(it holds the channels' credentials); the CLI and the Servers surface ask ``servers:read``."""
