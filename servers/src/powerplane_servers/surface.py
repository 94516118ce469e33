"""The surface's one backend: a deployment's host, its lifecycle, and its authority.

Every method takes the caller's authenticated :class:`~powerplane.Identity` and hands it to
the policy and the lifecycle (``Ceremony(identity=...)``): nothing in a request chooses the
actor. Reads ask ``servers:read`` (the list shows only the nodes the caller may read); acts
are maintenance requests through :class:`~powerplane.lifecycle.Lifecycle`, which decides,
checks the ceremony and records the audit record with the request.

The list never reads power: it shows offers (capabilities from discovery, taken once at
start and on an explicit refresh, with their time) and maintenance phases from the store.
A power reading is taken only by the lifecycle's own readback for a shutdown just sent,
at the lifecycle's cadence and within its window (ADR 0034 § 7).

Kubernetes mode (a :class:`~powerplane_servers.gateway.Gateway` serves the deployment's
store): reads use the deployment's store (the server's own ServiceAccount: reads only);
every act (a request; a return, abandon or resolution added to one) is made through a
lifecycle whose store acts *as the caller* (:meth:`Surface.acting`), so the API server
records the caller as the creator and its admission policy binds ``spec.requestedBy`` to
them. Nothing is run here: the operator admits and executes.

A caller who may not read a node gets the same answer for it as for a node that does not
exist (:meth:`Surface.require_read`: 404, the same title and detail, never a list of
names), and so for a maintenance (:meth:`Surface.readable_maintenance`); the denial is
audited. :meth:`Surface.verification` says whether the audit trail verifies.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from powerplane import Identity, PolicyDenied, PowerHost, Verb
from powerplane.lifecycle import (
    Action,
    AuditRecord,
    Ceremony,
    Intent,
    Lifecycle,
    NodeMaintenance,
    NotFound,
    Phase,
    action_for_intent,
    action_for_request,
)
from powerplane_servers.gateway import Gateway, find_gateway
from powerplane_servers.problems import ProblemError
from powerplane_servers.settings import KubernetesSettings

if TYPE_CHECKING:
    from powerplane import NodeSpec

__all__ = ["INTENTS", "MEANINGS", "Surface", "maintenance_doc", "open_surface"]

INTENTS = ("cordon", "drain", "reboot", "shutdown")
"""The requests the surface offers (each decided and audited under its intent's action)."""

log = logging.getLogger("powerplane.servers")

_VERB_OF = {"reboot": Verb.REBOOT, "shutdown": Verb.SHUTDOWN}

MEANINGS = {
    "True": "the channel observed the machine off",
    "False": "the readback is still running: not yet observed off",
    "Unknown": "settled without an observation: the channel cannot see the machine off, "
               "or it never reported it off before the readback window closed",
}
"""What each status of ``PowerOffConfirmed`` claims (ADR 0034 § 7, amendment)."""

TERMINAL = {Phase.COMPLETE, Phase.REFUSED, Phase.FAILED}


class Surface:
    """One deployment served (see the module docstring)."""

    def __init__(self, host: PowerHost, lifecycle: Lifecycle,
                 gateway: Gateway | None = None) -> None:
        self.host = host
        self.lifecycle = lifecycle
        self.gateway = gateway
        """Kubernetes mode: acts are made as the caller through it (None: a local store)."""
        self.discovered_at: dt.datetime | None = None
        nodes = host.nodes
        self._pairs: list[tuple[str, NodeSpec]] = list(nodes.items())
        """Every node and its spec, in the deployment's order (the list's order)."""
        self._index: dict[str, int] = {n: i for i, (n, _) in enumerate(self._pairs)}
        self._by_site: dict[str | None, list[int]] = {}
        for i, (_, spec) in enumerate(self._pairs):
            self._by_site.setdefault(spec.site, []).append(i)
        self._runner: asyncio.Task[None] | None = None
        self._folds: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()

    # -- life --------------------------------------------------------------------------------
    async def start(self, *, runner: bool) -> None:
        await self.host.start()
        self.discovered_at = dt.datetime.now(dt.UTC)
        if self.gateway is not None:
            await self.gateway.start()
        if runner:
            self._runner = asyncio.create_task(self._run(), name="powerplane-serve-runner")
        self._folds = asyncio.create_task(self._write_folds(), name="powerplane-serve-folds")

    async def _write_folds(self) -> None:
        """The counts of repeated denials written when their window closes, even when no
        other request comes (:meth:`~powerplane.Authority.flush_denials`)."""
        authority = self.host.authority
        while True:
            await asyncio.sleep(min(5.0, authority.folder.window_s))
            try:
                authority.flush_denials(due_only=True)
            except Exception:
                log.exception("the counts of repeated denials could not be written")

    async def _run(self) -> None:
        """The local runner: the lifecycle's reconcile loop, kept alive across errors."""
        tick = self.lifecycle.config.tick_s
        while True:
            try:
                results = await self.lifecycle.run_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("maintenance pass failed; trying again")
                results = {}
            if any(r.value == "advanced" for r in results.values()):
                continue
            self.wake.clear()
            waiter = asyncio.ensure_future(self.wake.wait())
            try:  # not wait_for: on 3.11 it can swallow the cancellation that stops us
                await asyncio.wait([waiter], timeout=tick)
            finally:
                waiter.cancel()

    async def close(self) -> None:
        for task in (self._runner, self._folds):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.gateway is not None:
            await self.gateway.stop()
            self.gateway.close()
        self.host.authority.flush_denials()  # before the store that may be their trail
        self.lifecycle.close()
        await self.host.close()

    # -- reads -------------------------------------------------------------------------------
    @staticmethod
    def unseen(identity: Identity, what: str, name: str) -> ProblemError:
        """The one answer for a ``what`` (server, maintenance) that does not exist or that
        ``identity`` may not read: the same status, title and detail either way."""
        return ProblemError(404, "Not found", f"no {what} named {name[:253]!r} that "
                            f"{identity.user} may read", "usage", error="NotFound")

    async def require_read(self, identity: Identity, node: str,
                           acting: Action | None = None) -> NodeSpec:
        """The node's spec where ``identity`` may read it; else :meth:`unseen` (a node the
        deployment does not have, or one the policy denies: that denial recorded, and
        where the read was asked for an act, ``acting``, the act's denial too: the trail
        says what was tried)."""
        spec = self.host.nodes.get(node)
        if spec is None:
            raise self.unseen(identity, "server", node)
        authority = self.host.authority
        found = await authority.authorize(Action.READ, [(node, spec)], identity)
        if isinstance(found[node], PolicyDenied):
            if acting is not None and acting is not Action.READ:
                await authority.authorize(acting, [(node, spec)], identity)
            raise self.unseen(identity, "server", node)
        return spec

    async def readable_maintenance(self, identity: Identity, name: str,
                                   acting: Action | None = None) -> NodeMaintenance:
        """The maintenance where ``identity`` may read its node; else :meth:`unseen`
        (never 403 for one that exists against 404 for one that does not; ``acting`` as
        :meth:`require_read`'s)."""
        try:
            m = self.lifecycle.store.get(name)
        except NotFound:
            raise self.unseen(identity, "maintenance", name) from None
        spec = self.host.nodes.get(m.node)
        if spec is None:
            raise self.unseen(identity, "maintenance", name)
        found = await self.host.authority.authorize(Action.READ, [(m.node, spec)], identity)
        if isinstance(found[m.node], PolicyDenied):
            if acting is not None and acting is not Action.READ:
                await self.host.authority.authorize(acting, [(m.node, spec)], identity)
            raise self.unseen(identity, "maintenance", name)
        return m

    async def readable(self, identity: Identity, nodes: Sequence[str]) -> list[str]:
        specs = self.host.nodes
        return await self.host.authority.permitted(Action.READ,
                                                   [(n, specs[n]) for n in nodes], identity)

    def record_denial(self, identity: Identity, action: Action, node: str, rule: str) -> None:
        """A denial no policy decision made (the list refused outright, a caller over the
        rate limit, an unsafe request from another origin): recorded, its repeats folded."""
        self.host.authority.record_denial(identity, action, node, rule)

    def record_unauthenticated(self, where: str, node: str, action: Action,
                               why: str) -> None:
        """An authentication failure (or an unauthenticated caller over the rate limit):
        recorded under no identity, its repeats counted per address."""
        self.host.authority.record_denial(
            Identity("(unauthenticated)", via="none"), action, node,
            f"authentication failed from {where}: {why[:300]}",
            limit_key=f"unauthenticated@{where}")

    def select(self, site: str | None, labels: dict[str, str]) -> list[tuple[str, NodeSpec]]:
        """The nodes of ``site`` carrying every label of ``labels``, in the list's order."""
        pairs = self._pairs
        chosen = pairs if site is None else [pairs[i] for i in self._by_site.get(site, [])]
        if not labels:
            return chosen
        want = labels.items()
        return [p for p in chosen if all(p[1].labels.get(k) == v for k, v in want)]

    async def actions_for(self, identity: Identity, nodes: Sequence[str]
                          ) -> dict[str, dict[str, dict[str, Any]]]:
        """Per node and request: whether this caller may request it (the policy)."""
        pairs = [(n, self.host.nodes[n]) for n in nodes]
        out: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in nodes}
        for intent in INTENTS:
            action = action_for_intent(intent)
            decisions = await self.host.authority.decide(action, pairs, identity)
            for n, d in zip(nodes, decisions, strict=True):
                out[n][intent] = {"allowed": d.allowed, "rule": d.rule}
        return out

    def server_doc(self, node: str, phases: dict[str, tuple[str, Phase]],
                   allowed: dict[str, dict[str, Any]]) -> dict[str, Any]:
        spec = self.host.nodes[node]
        offer = self.host.offer_for(node)
        verbs = {v.value: offer[v].as_dict() for v in Verb}
        actions: dict[str, Any] = {}
        for intent in INTENTS:
            verb = _VERB_OF.get(intent)
            may = allowed[intent]
            if verb is None:
                available, why = True, ""
            else:
                vo = offer[verb]
                available, why = vo.offered, ("" if vo.offered else (vo.brief or vo.reason))
            actions[intent] = {"offered": available, "withheldReason": why or None,
                               "allowed": bool(may["allowed"]), "rule": str(may["rule"])}
        active = phases.get(node)
        return {
            "name": node,
            "site": spec.site,
            "labels": dict(spec.labels),
            "classification": spec.classification,
            "channels": [c.channel for c in spec.channels],
            "offers": verbs,
            "discoveredAt": self.discovered_at.isoformat() if self.discovered_at else None,
            "actions": actions,
            "maintenance": ({"name": active[0], "phase": active[1].value}
                            if active else None),
        }

    def active_phases(self) -> dict[str, tuple[str, Phase]]:
        return {node: (name, phase)
                for name, node, phase in self.lifecycle.store.active_phases()}

    async def servers(self, identity: Identity, *, site: str | None, labels: dict[str, str],
                      offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        chosen = self.select(site, labels)
        readable = await self.host.authority.permitted(Action.READ, chosen, identity)
        page = readable[offset: offset + limit]
        allowed = await self.actions_for(identity, page)
        phases = self.active_phases()
        return [self.server_doc(n, phases, allowed[n]) for n in page], len(readable)

    async def server(self, identity: Identity, node: str) -> dict[str, Any]:
        await self.require_read(identity, node)
        allowed = await self.actions_for(identity, [node])
        doc = self.server_doc(node, self.active_phases(), allowed[node])
        history = [m for m in self.lifecycle.store.all() if m.node == node]
        doc["history"] = [maintenance_doc(m) for m in history[-20:]]
        readings: list[dict[str, Any]] = []
        for m in history[-20:]:
            for d in m.status.dispatches:
                ev = d.model_dump(mode="json", by_alias=True)
                readings.append({"maintenance": m.name, "verb": d.verb, "dispatch": ev})
        doc["readings"] = readings
        return doc

    # -- requests ----------------------------------------------------------------------------
    @staticmethod
    def ceremony(identity: Identity, body: Any) -> Ceremony:
        return Ceremony(reason=body.reason or "", identity=identity,
                        confirm_node=body.confirmNode, ack_preflight=bool(body.ackPreflight),
                        hazard_reason=body.hazardReason, on_behalf_of=body.onBehalfOf)

    @contextlib.contextmanager
    def acting(self, identity: Identity, credential: str | None, action: Action,
               node: str) -> Iterator[Lifecycle]:
        """The lifecycle an act of ``identity`` goes through: the deployment's (a local
        store), or in Kubernetes mode one whose store acts as the caller on the API server.
        A caller the gateway cannot act as (passthrough, and no bearer token: a session or
        the auth proxy) is refused, and the denial recorded."""
        if self.gateway is None:
            yield self.lifecycle
            return
        store = self.gateway.store_for(identity, credential)
        if store is None:
            rule = (f"{identity.describe()} authenticated by {identity.via}, and the "
                    "Kubernetes API server is sent the caller's own bearer token "
                    "(kubernetes.credentials: passthrough): act with a bearer token the API "
                    "server accepts")
            self.record_denial(identity, action, node, rule)
            raise ProblemError(403, "Acting needs the caller's own credentials",
                               f"denied: {rule}", "policy", error="CredentialsRequired",
                               exit_code=3)
        lc = Lifecycle(self.host, self.lifecycle.config, store, ports=self.lifecycle.ports,
                       clock=self.lifecycle.clock)
        try:
            yield lc
        finally:
            store.close()

    async def preflight(self, identity: Identity, node: str, intent: str,
                        body: Any) -> dict[str, Any]:
        await self.require_read(identity, node, action_for_intent(intent))
        doc, _ = await self.lifecycle.dry_run(node, Intent(intent), self.ceremony(identity, body))
        return doc

    async def request(self, identity: Identity, node: str, intent: str,
                      body: Any, credential: str | None = None) -> NodeMaintenance:
        await self.require_read(identity, node, action_for_intent(intent))
        with self.acting(identity, credential, action_for_intent(intent), node) as lc:
            m = await lc.request(node, Intent(intent), self.ceremony(identity, body))
        self.wake.set()
        return m

    def maintenance(self, name: str) -> NodeMaintenance:
        return self.lifecycle.store.get(name)

    async def person(self, identity: Identity, name: str, what: str, body: Any,
                     credential: str | None = None) -> NodeMaintenance:
        m = await self.readable_maintenance(identity, name, action_for_request(what))
        if m.phase in TERMINAL:
            raise NotFound(f"maintenance {name} is {m.phase.value}: it takes no more requests")
        ceremony = self.ceremony(identity, body)
        action = action_for_request(what)
        with self.acting(identity, credential, action, m.node) as lc:
            if what == "return":
                out = await lc.return_to_service(
                    m.node, ceremony, machine_on=bool(getattr(body, "machineOn", False)))
            elif what == "abandon":
                out = await lc.abandon(m.node, ceremony)
            else:
                out = await lc.resolve(m.node, ceremony,
                                       applied=bool(getattr(body, "applied", False)))
        self.wake.set()
        return out

    # -- audit -------------------------------------------------------------------------------
    def audit(self, node: str | None) -> list[AuditRecord]:
        records = list(self.lifecycle.store.audit(node))
        if self.host.deployment.audit.path is not None:
            # an audit file of its own: denials and direct acts there, requests in the store
            records.extend(self.host.authority.sink.records(node))
            records.sort(key=lambda r: r.at)
        return records

    async def verification(self, identity: Identity) -> dict[str, Any]:
        """Whether the trail the audit view shows verifies (the authority's
        :meth:`~powerplane.authority.service.Authority.verify`, as ``powerplane audit
        verify`` checks it): per trail, intact or the first bad entry and what is wrong
        with it; never raises (a trail that cannot be read is reported so).
        What is wrong names a record (its action, node and actor):
        it, the summary and the count of records are shown only to a caller who may read
        every node the trail names (as ``audit verify`` asks); anyone else is told
        whether each trail is intact and the position of its first bad entry."""
        authority = self.host.authority
        sink = authority.sink
        # each source gives its trails by name: a store's audit every trail it keeps (one
        # per writer in the kubernetes store), an audit file its one
        sink_trails = getattr(sink, "trails", None)
        sources: list[tuple[str, Callable[[], dict[str, Sequence[Any]]]]] = [
            (sink.description, sink_trails if callable(sink_trails)
             else (lambda: {sink.description: sink.entries()}))]
        store = self.lifecycle.store
        if self.host.deployment.audit.path is not None:
            # an audit file of its own: the maintenances' records are the store's trails
            where = "the lifecycle store's audit"
            by_writer = getattr(store, "audit_trails", None)
            one = getattr(store, "audit_entries", None)
            if callable(by_writer):
                sources.append((where, lambda: {f"{where}, trail {name}": entries
                                                for name, entries in by_writer().items()}))
            elif callable(one):
                sources.append((where, lambda: {where: one()}))
        out = []
        named: set[str] = set()
        trails: list[tuple[str, Sequence[Any]]] = []
        for where, read in sources:
            try:
                trails.extend(read().items())
            except Exception as exc:  # a trail that cannot be read is not intact
                out.append(_unreadable(where, exc))
        for where, found in trails:
            try:
                verdict = authority.verify(found)
            except Exception as exc:  # a trail that cannot be read is not intact
                out.append(_unreadable(where, exc))
                continue
            named.update(str(e.doc["node"]) for e in found
                         if e.doc is not None and isinstance(e.doc.get("node"), str))
            doc = verdict.as_dict()
            out.append({"trail": where, "intact": doc["intact"], "records": doc["records"],
                        "firstBad": doc["firstBad"], "problem": doc["problem"],
                        "checkpoints": doc["checkpoints"], "sealed": doc["sealed"],
                        "summary": verdict.words(where)})
        nodes = sorted(named & set(self.host.nodes))
        if len(await self.readable(identity, nodes)) < len(nodes):
            for t in out:
                t["records"] = None
                t["summary"] = "intact" if t["intact"] else "NOT intact"
                if not t["intact"] and t["firstBad"] is not None:
                    t["problem"] = ("an entry is not intact (what is wrong is shown to a "
                                    "reader of every node the trail names)")
        return {"intact": all(t["intact"] for t in out), "trails": out}


def _unreadable(where: str, exc: BaseException) -> dict[str, Any]:
    """A trail that could not be read or verified: not intact, and why in one word."""
    return {"trail": where, "intact": False, "records": None, "firstBad": None,
            "problem": f"the trail could not be read ({type(exc).__name__})",
            "checkpoints": 0, "sealed": False, "summary": ""}


def maintenance_doc(m: NodeMaintenance) -> dict[str, Any]:
    """The maintenance as the API shows it: the CLI's summary, and PowerOffConfirmed with
    what its status means."""
    doc = m.summary()
    cond = m.status.conditions.get("PowerOffConfirmed")
    doc["powerOffConfirmed"] = (
        {"status": cond.status.value, "reason": cond.reason, "message": cond.message,
         "meaning": MEANINGS[cond.status.value]}
        if cond is not None else None)
    doc["terminal"] = m.phase in TERMINAL
    doc["createdAt"] = m.created_at.isoformat()
    return doc


@contextlib.asynccontextmanager
async def open_surface(config: str | None, *, runner: bool = True,
                       kubernetes: KubernetesSettings | None = None,
                       ) -> AsyncIterator[Surface]:
    """The deployment at ``config`` served: its host started (discovery, once), its
    lifecycle's store open, and (``runner``) its maintenances run in this process. A store
    a gateway serves (Kubernetes mode) is served through it, with no runner here (the
    operator executes)."""
    from powerplane import ConfigError, ConfigProblem, open_deployment

    runtime = open_deployment(config)  # the one runtime: policy, audit, the guard
    host = runtime.host
    if not runtime.has_lifecycle:
        raise ConfigError([ConfigProblem(
            "lifecycle", "this deployment has no lifecycle: section, and `powerplane serve` "
            "records maintenances in its store (for example: lifecycle: {store: "
            "./powerplane.db, cluster: {type: simulated}})")], source=host.deployment.source)
    lifecycle = runtime.lifecycle
    assert lifecycle is not None
    try:
        options = (kubernetes or KubernetesSettings()).model_dump()
        gateway = find_gateway(lifecycle.store, options)
    except BaseException:
        lifecycle.close()
        await host.close()
        raise
    if gateway is not None:
        log.info("Kubernetes mode: %s; no runner in this process (the operator executes)",
                 gateway.description)
    surface = Surface(host, lifecycle, gateway)
    try:
        await surface.start(runner=runner and gateway is None)
        yield surface
    finally:
        await surface.close()
