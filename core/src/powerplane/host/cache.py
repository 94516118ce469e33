"""The rule's verdicts, cached: one object, one :meth:`RuleCache.invalidate`.

``decide`` (:func:`powerplane.recovery.decide`) is pure, so the host keeps what it said:

* per node, the :class:`~powerplane.recovery.NodeOffer` that ``offer_for`` returns;
* per node, the verdicts the rule is checked against again at dispatch (``plan``,
  ``invoke``, fleet calls), never the offer object itself;
* on ``decide``'s inputs (the node's channel views, site and classification), so nodes
  that look alike are decided once.

All three are emptied together by :meth:`RuleCache.invalidate`, which discovery calls
whenever it records anything (a capability set or an error), so no verdict is ever
older than the capabilities it was decided from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from powerplane.capabilities import Verb
from powerplane.config import Recovery
from powerplane.nodes import NodeSpec
from powerplane.recovery import ChannelView, NodeOffer, VerbOffer, decide

__all__ = ["RuleCache"]


class RuleCache:
    """What the rule decided, per node and per input, until :meth:`invalidate`."""

    __slots__ = ("_memo", "_offers", "_rules", "_views", "recovery")

    def __init__(self, recovery: Recovery,
                 views: Callable[[NodeSpec], Sequence[ChannelView]]) -> None:
        self.recovery = recovery
        """The deployment's recovery settings, one of decide's inputs."""
        self._views = views
        """The node's channel views as discovery holds them now."""
        self._offers: dict[str, NodeOffer] = {}
        self._rules: dict[str, dict[Verb, VerbOffer]] = {}
        self._memo: dict[Any, dict[Verb, VerbOffer]] = {}

    def invalidate(self) -> None:
        """Forget every verdict (discovery recorded something new)."""
        if self._offers:
            self._offers.clear()
        if self._rules:
            self._rules.clear()
        if self._memo:
            self._memo.clear()

    def offer(self, node: str, build: Callable[[], NodeOffer]) -> NodeOffer:
        """``node``'s offer, built by ``build`` when not cached."""
        offer = self._offers.get(node)
        if offer is None:
            offer = self._offers[node] = build()
        return offer

    def verdicts(self, node: str, spec: NodeSpec) -> dict[Verb, VerbOffer]:
        """The rule's verdict per verb for ``node``, from what discovery holds now."""
        offers = self._rules.get(node)
        if offers is None:
            offers = self._rules[node] = self.decide(spec)
        return offers

    def decide(self, spec: NodeSpec) -> dict[Verb, VerbOffer]:
        """``decide`` for ``spec``, memoized on its inputs."""
        views = self._views(spec)
        key = (tuple(views), spec.site, spec.classification)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = decide(views, spec.site, spec.classification,
                                             self.recovery)
        return found

    def decide_fresh(self, spec: NodeSpec) -> dict[Verb, VerbOffer]:
        """The rule evaluated now, from the discovered capabilities, without any cache."""
        return decide(self._views(spec), spec.site, spec.classification, self.recovery)
