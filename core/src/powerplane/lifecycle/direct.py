"""The guard the runtime attaches to every host of a deployment with a ``lifecycle:`` section.

:class:`LifecycleGuard` is what a direct ``invoke`` of reboot, shutdown or terminate passes
(``PowerHost.invoke``, ``invoke_many``, ``invoke_stream``, ``plan``): the judgement itself
is :mod:`powerplane.lifecycle.guard`'s (one derivation for the request path, the
reconciler and a direct call), imported when the guard is first asked, so a command that
only reads (``powerplane state``) imports none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from powerplane.capabilities import Verb
from powerplane.errors import PowerplaneError, UnknownNode

if TYPE_CHECKING:
    from powerplane.config import Deployment
    from powerplane.host import Host
    from powerplane.lifecycle.guard import ClusterView
    from powerplane.lifecycle.model import Phase
    from powerplane.lifecycle.ports import SharedStore
    from powerplane.settings.lifecycle import LifecycleConfig

__all__ = ["LifecycleGuard"]


class LifecycleGuard:
    """The guard of one deployment's ``lifecycle:`` section (see the module docstring).

    Composed by the runtime (:mod:`powerplane.runtime`) with the host it guards: readiness
    of the members is read through ``host``, and the active maintenances through
    ``stores`` (the store the runtime's lifecycle and audit trail share: each call opens
    it and closes it again until a lifecycle holds it open). A store that cannot be read
    raises ``StoreError`` (exit 1): nothing is decided blind.
    """

    def __init__(self, deployment: Deployment, config: LifecycleConfig,
                 stores: SharedStore) -> None:
        self.deployment = deployment
        self.config = config
        self.stores = stores
        self.host: Host | None = None
        """The host readiness is read through (set by the runtime as it builds the host)."""

    async def __call__(
        self, nodes: Sequence[str], verb: Verb, reason: str, *,
        hazard_reason: str | None = None,
    ) -> dict[str, PowerplaneError | None]:
        from powerplane.lifecycle.ceremony import (
            Ceremony,
            CeremonyRequired,
            Step,
            action_for_verb,
            required,
            step_problem,
        )
        from powerplane.lifecycle.guard import (
            GUARDED,
            GuardRefused,
            HazardReasonRequired,
            judge,
            own_maintenance,
        )

        verb = Verb(verb)
        out: dict[str, PowerplaneError | None] = {}
        wanted = list(dict.fromkeys(nodes))
        if verb not in GUARDED:
            return dict.fromkeys(wanted)
        active = self._active()
        action = action_for_verb(verb)
        policy = self.config.reason_policy
        carried = Ceremony(reason=reason, hazard_reason=hazard_reason)
        problem = step_problem(Step.REASON, "", action, carried, policy)
        own = own_maintenance()
        pending: list[str] = []
        for node in wanted:
            if node not in self.deployment.nodes:
                out[node] = UnknownNode(node, list(self.deployment.nodes))
            elif problem is not None:
                out[node] = CeremonyRequired(
                    [f"{problem} (lifecycle.reason_policy applies to every {verb.value})"]
                )
            elif node in active and active[node][0] == own:
                out[node] = None  # the maintenance's own verb: check() ran just before
            elif node in active:
                name, phase = active[node]
                out[node] = GuardRefused(
                    node, verb,
                    f"{node} is under maintenance {name} (phase {phase.value}); act through "
                    f"`powerplane maintenance` (return or abandon it) instead",
                    maintenance=name, phase=phase,
                )
            else:
                pending.append(node)
        if pending:
            view = await self._observe()
            taken = set(active)
            for node in pending:
                verdict = judge(view, self.config, node, taken)
                if not verdict.allowed:
                    out[node] = GuardRefused(node, verb, verdict.reason, verdict.numbers)
                    continue
                if Step.HAZARD_REASON in required(action, verdict.hazard):
                    lacking = step_problem(Step.HAZARD_REASON, node, action, carried, policy)
                    if lacking is not None:
                        out[node] = HazardReasonRequired(node, verb, lacking, verdict.numbers)
                        continue
                out[node] = None
                taken.add(node)  # nodes of one call count against quorum together
        return {node: out[node] for node in wanted}

    def _active(self) -> dict[str, tuple[str, Phase]]:
        """Node -> (maintenance, phase) of every active maintenance.

        A store that does not exist yet holds none (a direct call creates no store); one
        that cannot be read raises ``StoreError`` (exit 1): nothing is decided blind.
        """
        with self.stores.using(create=False) as store:
            return {node: (name, phase) for name, node, phase in store.active_phases()}

    async def _observe(self) -> ClusterView:
        from powerplane.lifecycle.guard import observe
        from powerplane.lifecycle.ports import build_ports

        if self.host is None:
            raise RuntimeError("the lifecycle guard is asked before its host is built: "
                               "compose it through powerplane.runtime")
        return await observe(build_ports(self.host, self.config).cluster, self.config)
