"""The recoverability rule: which verbs are offered for a node, and why the others are not.

This module holds the rule's one decision function, :func:`decide`. The host calls
it from exactly two places, ``offer_for`` and ``invoke`` (which decides again at
dispatch, so no caller can skip the rule).

The rule, per node and per verb:

* the first channel in the node's preference order that advertises the verb carries it;
  for shutdown a graceful channel is preferred over a hard one;
* shutdown is offered only where it is recoverable: some channel *of that node*
  advertises power-on, or ``recovery.attendedRack`` is true, or the node's site is
  declared attended;
* terminate is offered only for nodes classified ``replaceable``;
* a node with no channel configured is offered nothing;
* a channel whose discovery failed advertises nothing, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from powerplane.capabilities import CapabilitySet, Verb

if TYPE_CHECKING:
    from powerplane.config import Recovery

__all__ = ["NodeOffer", "VerbOffer", "decide"]

VERBS: tuple[Verb, ...] = tuple(Verb)
_KEYED: tuple[tuple[str, Verb], ...] = tuple((v.value, v) for v in VERBS)
"""Each verb with its JSON key, read once: ``Verb.value`` is a descriptor call per read,
which a fleet's ``as_dict`` (four verbs a node) would pay for every node."""


@dataclass(frozen=True, slots=True)
class VerbOffer:
    """One verb for one node: offered (with the channel that carries it) or withheld (why)."""

    verb: Verb
    offered: bool
    channel: str | None = None
    graceful: bool | None = None
    reason: str = ""
    """Why it is withheld; empty when offered."""
    recovery: str | None = None
    """For an offered shutdown: what makes it recoverable."""
    cause: str | None = None
    """Why withheld: ``"rule"`` (the rule withholds it) or ``"channel"`` (a channel of the
    node could not be discovered, so the rule could not be decided on what it offers)."""
    brief: str = ""
    """The reason without the discovery errors (stated once per channel in ``offers``)."""

    def as_dict(self) -> dict[str, Any]:
        if not self.offered:
            return {"offered": False, "cause": self.cause or "rule",
                    "reason": self.brief or self.reason}
        out: dict[str, Any] = {
            "offered": True,
            "channel": self.channel,
            "graceful": self.graceful,
        }
        if self.recovery is not None:
            out["recovery"] = self.recovery
        return out


@dataclass(frozen=True, slots=True)
class NodeOffer:
    """Every verb for one node."""

    node: str
    site: str | None
    verbs: Mapping[Verb, VerbOffer]
    channels: tuple[tuple[str, str | None, str], ...] = ()
    """Each channel of the node: (name, discovery error class or None, error message).

    ``as_dict`` lists them (``"channels"``) only when one could not be discovered: each
    discovery error is stated there once, and the verbs' reasons refer to it."""

    def __getitem__(self, verb: Verb) -> VerbOffer:
        return self.verbs[verb]

    def offered(self) -> list[Verb]:
        """The verbs offered, in verb order."""
        return [v for v in VERBS if self.verbs[v].offered]

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane offers -o json``, for one node."""
        verbs = self.verbs
        out: dict[str, Any] = {
            "node": self.node,
            "site": self.site,
            "verbs": {key: verbs[v].as_dict() for key, v in _KEYED},
        }
        if any(error is not None for _, error, _ in self.channels):
            out["channels"] = [
                {"channel": name, "discovered": error is None}
                | ({} if error is None else {"error": error, "message": message})
                for name, error, message in self.channels
            ]
        return out


ChannelView = tuple[str, CapabilitySet | str]
"""A node's channel as the rule sees it: its name and its capability set, or why none."""


def _quote_list(names: Sequence[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _not_advertised(verb: Verb, views: Sequence[ChannelView], brief: bool = False) -> str:
    parts = []
    for name, caps in views:
        if isinstance(caps, str):
            parts.append(f"channel '{name}' could not be discovered"
                         + ("" if brief else f" ({caps})"))
        elif verb in caps.withheld:
            parts.append(f"channel '{name}' does not advertise {verb.value}: "
                         f"{caps.withheld[verb]}")
        elif not caps.verbs and caps.detail:
            parts.append(f"channel '{name}' advertises nothing ({caps.detail})")
        else:
            parts.append(f"channel '{name}' does not advertise {verb.value}")
    return f"{verb.value} withheld: " + "; ".join(parts)


def decide(
    views: Sequence[ChannelView],
    site: str | None,
    classification: str,
    recovery: Recovery,
) -> dict[Verb, VerbOffer]:
    """Decide every verb for a node with these channels, site and classification.

    Pure: the same inputs always give the same offers (the host memoizes on them).
    """
    out: dict[Verb, VerbOffer] = {}
    if not views:
        for verb in VERBS:
            out[verb] = VerbOffer(verb, False, reason=f"{verb.value} withheld: "
                                  "the node has no channel configured", cause="rule")
        return out
    known = [(n, c) for n, c in views if isinstance(c, CapabilitySet)]
    blind = len(known) < len(views)  # some channel could not be discovered
    cause = "channel" if blind else "rule"
    for verb in VERBS:
        carriers = [(n, c) for n, c in known if c.advertises(verb)]
        if verb is Verb.SHUTDOWN:
            carriers.sort(key=lambda nc: not nc[1].is_graceful(verb))  # stable: graceful first
        if not carriers:
            # a channel that could not be discovered is the cause for every verb alike
            # (exit 1, terminate too); a repairable node is never terminated either way
            out[verb] = VerbOffer(verb, False, reason=_not_advertised(verb, views), cause=cause,
                                  brief=_not_advertised(verb, views, brief=True))
            continue
        name, caps = carriers[0]
        graceful = caps.is_graceful(verb)
        if verb is Verb.TERMINATE and classification != "replaceable":
            out[verb] = VerbOffer(
                verb, False,
                reason=f"terminate withheld: the node is {classification}; "
                "terminate is offered only for replaceable nodes",
                cause="rule",
            )
            continue
        if verb is Verb.SHUTDOWN:
            powerers = [n for n, c in known if c.advertises(Verb.POWER_ON)]
            if powerers:
                how = f"channel {powerers[0]} can power on"
            elif recovery.attended_rack:
                how = "the rack is declared attended (recovery.attendedRack)"
            elif recovery.site_attended(site):
                how = f"site {site} is declared attended"
            else:
                names = [n for n, _ in views]
                who = (
                    f"channel {_quote_list(names)} cannot power on"
                    if len(names) == 1
                    else f"no channel of the node ({_quote_list(names)}) can power on"
                )
                where = (
                    f"site '{site}' is not declared attended"
                    if site
                    else "the node has no site declared attended"
                )
                out[verb] = VerbOffer(
                    verb, False, reason=f"shutdown withheld: {who}, and {where}", cause=cause
                )
                continue
            out[verb] = VerbOffer(verb, True, name, graceful, recovery=how)
            continue
        out[verb] = VerbOffer(verb, True, name, graceful)
    return out
