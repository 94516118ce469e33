"""Admission: the one derivation a request is judged by, at its requester and where it runs.

:func:`derive` is what a request of an intent on a node meets now: another active
maintenance of the node, the pre-flight (pods, budgets, quorum numbers, hazard, the power
offer, storage), the guard's verdict and the power offer; it is the requester's synchronous
check (``maintenance request`` refuses at once, with the numbers) and the executor's
authoritative one.

:func:`admit` is the executor's side for a request recorded by any client and not yet
admitted (``Pending``: a ``NodeMaintenance`` POSTed by ``kubectl``, a GitOps tool, a
gateway or ``maintenance request``): an object it cannot understand, a node the deployment
does not have, a requester the policy denies (asked for the recorded, API-server-bound
identity), a store that cannot vouch for the requester's identity, a node with another
active maintenance, the guard, an incomplete ceremony (a creator that is not a person at a
terminal supplies it in the spec: ``ackPreflight``, ``confirmNode``, ``hazardReason``), a
power verb not offered: each is ``Refused`` with its reason (and the numbers). Otherwise
the pre-flight is taken where the creator took none, the request's audit record is made
durable (written when its creator's write is missing), and it becomes ``Requested``; the
store takes the node's lock as it leaves ``Pending``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from powerplane.authority.actions import action_for_intent
from powerplane.capabilities import Verb
from powerplane.errors import (
    ChannelError,
    ConfigError,
    NotOffered,
    PolicyDenied,
    PowerplaneError,
)
from powerplane.lifecycle import guard
from powerplane.lifecycle.audit import AuditRecord
from powerplane.lifecycle.ceremony import Ceremony, MaintenanceRefused, missing
from powerplane.lifecycle.crash import crashpoint
from powerplane.lifecycle.model import (
    ConditionStatus,
    ConditionType,
    Intent,
    NodeMaintenance,
    Phase,
    Preflight,
    set_condition,
)
from powerplane.lifecycle.phases import transition
from powerplane.lifecycle.ports import MaintenanceStore, Ports, TemporaryPortError, call_store
from powerplane.lifecycle.store import AlreadyActive
from powerplane.settings.lifecycle import LifecycleConfig

__all__ = ["Derivation", "NodeLocks", "RequesterBinding", "admit", "derive", "preflight",
           "verb_of"]


@runtime_checkable
class NodeLocks(Protocol):
    """A store whose one-active-maintenance-per-node rule is a lock the executor takes as a
    request leaves ``Pending`` (the ``kubernetes`` store's per-node Lease); a store that
    keeps the rule by itself at create (SQLite's unique index) has none."""

    def lock(self, m: NodeMaintenance) -> None:
        """Take ``m``'s node for ``m``; raise ``AlreadyActive`` when another holds it."""
        ...

    def record_request(self, m: NodeMaintenance, record: AuditRecord) -> None:
        """Make ``m``'s request record durable, once whoever writes it first (its creator
        or the executor): a second write of it is not a second record."""
        ...


@runtime_checkable
class RequesterBinding(Protocol):
    """A store whose objects any client may create says whether it can vouch that each
    one's ``requestedBy`` is its creator (the ``kubernetes`` store: the admission policy
    that binds it to the API server's ``userInfo`` is installed)."""

    def requester_unbound(self) -> str | None:
        """None when requesters are bound to their creators; else why not (refuse)."""
        ...


def verb_of(intent: Intent) -> Verb:
    """The power verb of a powering intent."""
    return Verb.REBOOT if intent is Intent.REBOOT else Verb.SHUTDOWN


async def preflight(
    ports: Ports, config: LifecycleConfig, store: MaintenanceStore, node: str, intent: Intent,
    active: list[tuple[str, str, Phase]] | None = None,
) -> tuple[Preflight, guard.SafetyVerdict]:
    """What a request would do: pods, budgets, quorum numbers, hazard, the power offer
    (``active``: the store's active maintenances, already read)."""
    host = ports.host
    await host.discover([node])  # what it uses, where not discovered yet
    if active is None:
        active = await call_store(store, store.active_phases)
    others = [(n, phase) for name, n, phase in active
              if n != node and phase is not Phase.PENDING]
    verdict = await guard.check(ports, config, node, others, count_requested=True)
    pods = await ports.cluster.pods_on(node)
    power: dict[str, object] = {}
    if intent.powers:
        verb = verb_of(intent)
        power = host.offer_for(node)[verb].as_dict()
        power["verb"] = verb.value
    storage = "nothing to evacuate"
    hook = ports.storage.hook
    if intent.powers and hook is not None and await ports.storage.read(node) is not None:
        storage = f"evacuate with the {hook.name} hook before drain"
    return (
        Preflight(pods=pods, pdbs=await ports.cluster.pdbs_for(pods), quorum=verdict.numbers,
                  hazard=verdict.hazard, power=power, storage=storage),
        verdict,
    )


@dataclass(frozen=True)
class Derivation:
    """What a request meets now: its pre-flight and verdict, and the error it is refused
    with (None: the rules admit it)."""

    preflight: Preflight | None
    verdict: guard.SafetyVerdict | None
    error: PowerplaneError | None


async def derive(
    ports: Ports, config: LifecycleConfig, store: MaintenanceStore, node: str, intent: Intent,
    *, name: str | None = None,
) -> Derivation:
    """The shared derivation (see the module docstring); ``name``: the request itself (it
    is not "another" maintenance of its node)."""
    every = await call_store(store, store.active_phases)  # one read for both checks
    busy = [(m, p) for m, n, p in every
            if n == node and m != name and p is not Phase.PENDING]
    if busy:
        return Derivation(None, None, AlreadyActive(node, busy[0][0]))
    pre, verdict = await preflight(ports, config, store, node, intent, every)
    if not verdict.allowed:
        return Derivation(pre, verdict, MaintenanceRefused(node, verdict.reason,
                                                           verdict.numbers))
    if intent.powers and not pre.power.get("offered"):
        if pre.power.get("cause") == "channel":  # undiscoverable: a channel failure (1)
            failed = ports.host.discovery_error(node)
            # a channel whose config is bad (e.g. at its open) is bad input (2); one that
            # failed for now (a secret its store could not give) is a failure (1)
            if isinstance(failed, ChannelError | ConfigError | TemporaryPortError):
                return Derivation(pre, verdict, failed)
        return Derivation(pre, verdict, NotOffered(node, str(pre.power.get("verb")),
                                                   str(pre.power.get("reason", ""))))
    return Derivation(pre, verdict, None)


def _refuse(m: NodeMaintenance, why: str, verdict: guard.SafetyVerdict | None = None) -> None:
    m.status.refusal_reason = why
    if verdict is not None:
        m.status.refusal = verdict.numbers
    transition(m, Phase.REFUSED, why)


async def admit(
    m: NodeMaintenance, ports: Ports, config: LifecycleConfig, store: MaintenanceStore,
) -> AuditRecord | None:
    """Admit or refuse the pending request ``m`` (see the module docstring), in place.

    Returns the request's audit record to make durable before ``m`` is written
    ``Requested`` (None when refused). A temporary failure (a channel that could not be
    discovered for now, the policy or the store that could not answer) raises: ``m``
    stays pending and is tried again."""
    host = ports.host
    spec = m.spec
    node = spec.node
    if node not in host.nodes:
        _refuse(m, f"node {node!r} is not in the deployment; the nodes: "
                   f"{', '.join(sorted(host.nodes)) or 'none'}")
        return None
    unbound = (await call_store(store, store.requester_unbound)
               if isinstance(store, RequesterBinding) else None)
    if unbound is not None:
        _refuse(m, unbound)
        return None
    action = action_for_intent(spec.intent)
    decided = (await host.authority.authorize(action, [(node, host.nodes[node])],
                                              spec.requester, reason=spec.reason))[node]
    if isinstance(decided, PolicyDenied):
        set_condition(m, ConditionType.AUTHORIZED, ConditionStatus.FALSE, "Denied",
                      str(decided))
        _refuse(m, str(decided))
        return None
    found = await derive(ports, config, store, node, spec.intent, name=m.name)
    if isinstance(found.error, AlreadyActive | MaintenanceRefused | NotOffered):
        _refuse(m, str(found.error), found.verdict)
        return None
    if found.error is not None:  # a channel failure or bad channel config: not decided
        raise found.error
    assert found.preflight is not None and found.verdict is not None
    ceremony = Ceremony(reason=spec.reason, confirm_node=spec.confirm_node,
                        ack_preflight=spec.ack_preflight, hazard_reason=spec.hazard_reason)
    problems = missing(node, action, found.verdict.hazard, ceremony, config.reason_policy)
    if problems:
        _refuse(m, "the request's ceremony is incomplete: " + "; ".join(problems),
                found.verdict)
        return None
    if _empty(spec.preflight):
        m.status.preflight = found.preflight  # the creator took none: taken at admission
    m.status.hazard = found.verdict.hazard
    m.status.quorum = found.verdict.numbers
    detail = (f"hazard acknowledged: {(spec.hazard_reason or '').strip()}"
              if found.verdict.hazard else "")
    record = host.authority.record_of(spec.requester, decided, node, spec.reason,
                                      maintenance=m.name, detail=detail)
    if isinstance(store, NodeLocks):
        try:
            await call_store(store, store.lock, m)
        except AlreadyActive as exc:
            _refuse(m, str(exc))
            return None
        crashpoint("admission:locked")
        await call_store(store, store.record_request, m, record)  # durable before admitted
        crashpoint("admission:recorded")
    transition(m, Phase.REQUESTED, f"admitted: {decided.rule}")
    return record


def _empty(pre: Preflight) -> bool:
    """A pre-flight nobody took (a creator that wrote none: its defaults)."""
    return (not pre.pods and not pre.pdbs and pre.quorum is None and not pre.power
            and not pre.storage)

