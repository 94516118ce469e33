"""The operator's loop: per-site leases, then every maintenance through the lifecycle's Reconciler.

One process:

1. loads the deployment file (``--config``), creates the host with every channel wrapped
   in the call meter (:mod:`.metrics`), and opens the lifecycle exactly as ``powerplane
   maintenance run`` does (:meth:`powerplane.lifecycle.Lifecycle.for_host`: the store
   ``lifecycle.store`` names, the ports, the one :class:`Reconciler`);
2. holds one :class:`~.leases.SiteLease` per site it may act for (a node's ``site``; a
   node without one is in site ``default``), tried and renewed every retry period;
3. scans: the active maintenances, each one of a site whose
   lease this replica holds gets a driver task of its own, which reconciles it through
   :meth:`powerplane.lifecycle.Lifecycle.reconcile` (``--max-in-flight`` reconciles at a time) until
   it is parked or done, trying again every ``--interval`` while it waits on the world; a
   maintenance never waits for another's reconcile. A scan runs at every NodeMaintenance
   watch event (the ``kubernetes`` store: a list, then a watch from its
   ``resourceVersion``; ``410 Gone`` lists again, other failures back off from 0.2 s to
   10 s), when a driver ends, when a site's lease becomes held, at every ``--resync``
   (which also drives parked maintenances again), and, with the SQLite store (nothing to
   watch), every ``--interval``. With the ``kubernetes`` store, a scan reads the watch's
   own cache (the active maintenances the list and the watch delivered, by name, each at
   its ``resourceVersion``; rebuilt by every list), so a watch event costs no request;
   the first scan, every ``--resync`` and any scan while the watch has not listed read
   the store. The cache only decides what to reconcile: the Reconciler reads and writes
   each maintenance through the store, with ``resourceVersion`` checks.

Every request the operator makes that fails (a 429 or 5xx answer, a refused or dropped
connection, a timeout) is tried again after core's backoff (:class:`powerplane.Backoff`:
from 0.2 s doubling to 10 s, :data:`BACKOFF`; the watch's jittered), never the end of the
run: the start's read of
the store (the first list), the watch and its list, a scan's read of the store, a
reconcile the store failed; the site leases are tried every ``--retry-period`` by their
own protocol. A node whose channel could not be discovered is discovered again before it
is reconciled (a ``{k8s:}`` secret the API server could not give for now does not park
its maintenance). Only bad input ends the run (exit 2).

A site whose lease is not held (never acquired, lost, or past its renew deadline) is not
reconciled; its reconciles still running are cancelled at the renew deadline, and every
power verb checks the lease synchronously just before the plugin is called (a replica
whose event loop stalled past its deadline does not send on waking). A cancelled
reconcile sends nothing after the cancel (the host's send gate); a verb it had already
recorded is settled by the next holder by evidence (the dispatcher), never sent blindly.

``--until-idle``: exit 0 once a scan, with no driver running, finds every maintenance of
this replica's sites parked or done (a site held by another replica with active
maintenances is not idle: the replica waits, and takes the lease over if the holder stops
renewing). ``--timeout`` is a hard bound on the whole run (exit 1, the reason on stderr):
at the deadline no verb is sent any more, the run is cancelled and the leases released (or
left to lapse); a process whose event loop is blocked in a call is ended by a watchdog
thread (:meth:`Operator.run`). The HTTP client's line per request is not logged (it was
one per lease renewal).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from powerplane import (
    Backoff,
    ConfigError,
    Deployment,
    PowerplaneError,
    load_config,
    open_deployment,
)
from powerplane.lifecycle import Lifecycle, TemporaryPortError
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.operator.health import Health, HealthServer
from powerplane_kubernetes.operator.leases import LeaseTimings, SiteLease
from powerplane_kubernetes.operator.metrics import OperatorMetrics, metered_deployment
from powerplane_kubernetes.watch import BACKOFF_MAX_S as WATCH_BACKOFF_MAX_S
from powerplane_kubernetes.watch import BACKOFF_S as WATCH_BACKOFF_S
from powerplane_kubernetes.watch import MaintenanceWatch, at_or_below

__all__ = ["CLEANUP_S", "DEFAULT_SITE", "Operator", "OperatorOptions", "main", "sites_of"]

log = logging.getLogger("powerplane.operator")

T = TypeVar("T")

DEFAULT_SITE = "default"
"""The site of a node whose ``site`` is not set."""


BACKOFF_S = WATCH_BACKOFF_S
"""The first wait before a failed request of the operator is tried again (doubled per
failure in a row): the start's read of the store, a scan's read, a reconcile the store or a
port failed, a channel's discovery that failed for a while; the watch and its list back off
the same (:mod:`powerplane_kubernetes.watch`)."""
BACKOFF_MAX_S = WATCH_BACKOFF_MAX_S
"""The longest wait before a failed request is tried again."""
BACKOFF = Backoff(BACKOFF_S, BACKOFF_MAX_S, draw=lambda: 1.0)
"""Core's backoff between the two, each wait at its ceiling (0.2 s, 0.4 s, ... 10 s): the
figures the operator logs and its tests read; one replica acts for a site, so there is no
herd of them to spread (the watch, whose replicas all reconnect at once, is jittered)."""
CLEANUP_S = 5.0
"""At ``--timeout``: how long each step of the orderly stop may take (a lease release, the
channels' close), and how long after the deadline the watchdog ends a process whose event
loop is blocked."""


@dataclass(frozen=True)
class OperatorOptions:
    """``powerplane operator run``'s options."""

    config: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    sites: tuple[str, ...] = ()
    until_idle: bool = False
    namespace: str = "powerplane-system"
    identity: str = "powerplane-operator"
    http_port: int | None = None
    http_host: str = "0.0.0.0"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    interval: float = 1.0
    max_in_flight: int = 10
    timeout: float | None = None
    resync: float = 30.0


def sites_of(deployment: Deployment) -> dict[str, str]:
    """Node -> its site (``default`` for a node without one)."""
    return {name: spec.site or DEFAULT_SITE for name, spec in deployment.nodes.items()}


@dataclass
class _SiteState:
    lease: SiteLease
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


class Operator:
    """One replica of the operator."""

    def __init__(self, options: OperatorOptions) -> None:
        self.options = options
        self.metrics = OperatorMetrics()
        self.health = Health(stale_after_s=max(60.0, 10 * options.interval))
        self.server: HealthServer | None = None
        self.sites: dict[str, _SiteState] = {}
        self.node_site: dict[str, str] = {}
        self._target_sites: dict[tuple[str, str], set[str]] = {}
        self.lifecycle: Lifecycle | None = None
        self.results: dict[str, str] = {}
        self._stop = asyncio.Event()
        self._start_error: str | None = None
        """Why the start's read of the store failed last (``--timeout``'s message)."""
        self._started = False
        """Whether the start's read of the store answered."""
        self._deadline: float | None = None
        """``time.monotonic()`` at which ``--timeout`` expires (no verb is sent after it)."""
        self._waiting: dict[str, int] = {}
        """Per site, the maintenances the last pass found not parked or done."""
        self.watchdog: _Watchdog | None = None
        self._wake = asyncio.Event()
        self._cause = "start"
        self._sem = asyncio.Semaphore(options.max_in_flight)
        self._driving: dict[str, asyncio.Task[None]] = {}
        """The maintenances being driven now, by name."""
        self._parked: dict[str, int | None] = {}
        """Parked maintenances and the version they parked at (driven again when it moves)."""
        self._terminal: dict[str, int] = {}
        """Terminal maintenances by phase (counted once: scans read active ones only)."""
        self.watch: MaintenanceWatch | None = None
        """The watch of ``nodemaintenances`` (the ``kubernetes`` store): its cache of the
        active maintenances is what scans read, and it feeds the store."""
        self.trace: collections.deque[tuple[str, str]] = collections.deque(maxlen=10_000)
        """What happened, in order: ``("watch", "ADDED nm-1")``, ``("scan", cause)``,
        ``("reconcile", name)`` (for tests and debugging)."""

    # -- set-up ----------------------------------------------------------------------------
    def _access(self, deployment: Deployment) -> tuple[ApiAccess, Path | None, str]:
        o = self.options
        if o.kubeconfig is not None:
            return (ApiAccess(kubeconfig=str(Path(o.kubeconfig).resolve()), context=o.context),
                    None, "--kubeconfig")
        cluster = deployment.lifecycle.get("cluster") if deployment.lifecycle else None
        source = Path(deployment.source)
        config_dir = source.parent if deployment.source and not deployment.source.startswith(
            "<") else None
        if isinstance(cluster, Mapping) and cluster.get("type") == "kubernetes":
            return (ApiAccess(kubeconfig=cluster.get("kubeconfig"),
                              context=o.context or cluster.get("context")),
                    config_dir, "lifecycle.cluster")
        # as kubectl and the {k8s:} secret kind: in the cluster the pod's service account,
        # else $KUBECONFIG, else ~/.kube/config (one resolution: secrets.environment_kubeconfig)
        from powerplane_kubernetes.secrets import environment_kubeconfig

        found = environment_kubeconfig()
        if found is not None:
            return (ApiAccess(kubeconfig=str(found), context=o.context), None,
                    "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "~/.kube/config")
        return ApiAccess(context=o.context), None, "--kubeconfig"

    def _map_targets(self, deployment: Deployment) -> None:
        self.node_site = sites_of(deployment)
        for node, spec in deployment.nodes.items():
            for ref in spec.channels:
                key = (ref.channel, repr(ref.target))
                self._target_sites.setdefault(key, set()).add(self.node_site[node])

    def _before_verb(self, channel: str, method: str, args: tuple[Any, ...]) -> None:
        """The last lease check, synchronous, just before a verb reaches the plugin."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            log.warning("--timeout expired at %s of %s: not sent", method, channel)
            raise asyncio.CancelledError("--timeout expired")
        key = (channel, repr(args[0]) if args else "")
        sites = self._target_sites.get(key) or set(self.sites)
        for site in sites:
            state = self.sites.get(site)
            if state is not None and not state.lease.held():
                log.warning("site %s: lease not held at %s of %s: not sent", site, method,
                            channel)
                raise asyncio.CancelledError(f"lease of site {site} not held")

    # -- the loops -------------------------------------------------------------------------
    async def _lease_loop(self) -> None:
        period = self.options.retry_period
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            for site, state in self.sites.items():
                was = state.lease.held()
                held = await state.lease.try_acquire_or_renew()
                self.metrics.lease_held.labels(site).set(1 if held else 0)
                if not held:
                    self._pause(site)
                elif not was:
                    self.trace.append(("lease", f"{site} held"))
                    self._wake_for(f"lease of site {site} held")
            # wake at the next attempt, or earlier at a renew deadline (then pause)
            wake = loop.time() + period
            deadlines = [s.lease.valid_until for s in self.sites.values() if s.lease.held()]
            while not self._stop.is_set() and loop.time() < wake:
                nearest = min([wake, *deadlines])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), max(0.0, nearest - loop.time()))
                for site, state in self.sites.items():
                    if not state.lease.held():
                        self.metrics.lease_held.labels(site).set(0)
                        self._pause(site)
                deadlines = [d for d in deadlines if d > loop.time()]

    def _pause(self, site: str) -> None:
        state = self.sites[site]
        for task in list(state.tasks):
            if not task.done():
                log.warning("site %s: lease not held: reconcile cancelled", site)
                task.cancel()

    def _wake_for(self, cause: str) -> None:
        """Ask for a scan now (the first cause since the last scan is the one recorded)."""
        if not self._wake.is_set():
            self._cause = cause
            self._wake.set()

    async def _woken(self, seconds: float) -> None:
        """Wait ``seconds`` at most, for a wake or the stop."""
        waits = [asyncio.ensure_future(e.wait()) for e in (self._wake, self._stop)]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _drive(self, lc: Lifecycle, name: str, site: str, node: str) -> None:
        """One maintenance through the Reconciler until it is parked or done, or this
        replica stops acting for its site: ``--max-in-flight`` reconciles at a time, each
        one that waits on the world tried again after ``--interval`` (outside the limit),
        one the store failed after a backoff (:data:`BACKOFF`, at least ``--interval``).

        A node whose channel could not be discovered (for any reason but bad config) is
        discovered again before its reconcile: the host keeps a failed discovery, and a
        verb withheld for it parks the maintenance. A discovery that failed temporarily
        (:class:`~powerplane.lifecycle.TemporaryPortError`: a ``{k8s:}`` secret the API
        server could not give now) does not park it: it is tried again after the
        backoff."""
        state = self.sites[site]
        task = asyncio.current_task()
        assert task is not None
        state.tasks.add(task)
        backoff = BACKOFF.retrying()
        try:
            while not self._stop.is_set() and state.lease.held():
                async with self._sem:
                    if not state.lease.held():
                        return
                    await self._rediscover(lc, node)
                    self.trace.append(("reconcile", name))
                    try:
                        result = (await lc.reconcile(name)).value
                    except PowerplaneError as exc:  # the store or a port failed: again later
                        log.warning("%s: %s", name, exc)
                        result = "error"
                if result == "parked" and isinstance(_discovery_error(lc, node),
                                                     TemporaryPortError):
                    result = "error"  # withheld while a channel failed for now: not parked
                self.results[name] = result
                if result == "done":
                    self._finished(lc, name)
                    return
                if result == "parked":
                    with contextlib.suppress(PowerplaneError):
                        self._parked[name] = lc.store.get(name).resource_version
                    return
                if result == "error":
                    await self._sleep(max(self.options.interval, backoff.next_s))
                    backoff.failed()
                    continue
                backoff.reset()
                if result != "advanced":
                    await self._sleep(self.options.interval)
        finally:
            state.tasks.discard(task)
            self._driving.pop(name, None)
            self._wake_for(f"{name} {self.results.get(name, 'stopped')}")

    async def _rediscover(self, lc: Lifecycle, node: str) -> None:
        """Discover ``node``'s channels again when one of them failed (not bad config)."""
        error = _discovery_error(lc, node)
        if error is None or isinstance(error, ConfigError):
            return
        self.trace.append(("discover", node))
        try:
            await lc.host.refresh([node])
        except PowerplaneError as exc:
            log.warning("discovering %s again: %s", node, exc)

    def _finished(self, lc: Lifecycle, name: str) -> None:
        """A maintenance that became terminal: read once more for the metrics, then only its
        phase is kept (scans read active maintenances only)."""
        try:
            m = lc.store.get(name)
        except PowerplaneError:
            return
        if self.watch is not None:  # not driven again until the watch delivers it
            self.watch.ended_at(name, m.resource_version)
        self.metrics.observe([m], phases=False)
        self._terminal[m.phase.value] = self._terminal.get(m.phase.value, 0) + 1

    def _scan(self, lc: Lifecycle, cause: str) -> bool:
        """Read the active maintenances once; start a driver for each of a held site that
        has none and is not parked unchanged. Returns whether this replica is idle (nothing
        of its sites can advance and nothing runs)."""
        self.trace.append(("scan", cause))
        if cause == "resync":
            self._parked.clear()
        cached = self.watch.active() if self.watch is not None else None
        if cached is None or cause in ("start", "resync") or self._unreadable():
            if self.watch is not None:
                self.watch.unreadable = False
            active = lc.store.active()
            refuse = getattr(lc.store, "refuse_unreadable", None)
            if callable(refuse):  # an object nobody can act on is refused, never ignored
                for name in refuse():
                    self.trace.append(("refused", name))
        else:
            active = cached
        self.metrics.passes.inc()
        self.metrics.observe(active, terminal=self._terminal)
        idle = True
        waiting: dict[str, int] = {}
        for m in active:
            site = self.node_site.get(m.node, DEFAULT_SITE)
            state = self.sites.get(site)
            if state is None:
                continue  # another replica's site
            if m.name in self._parked and at_or_below(m, self._parked[m.name]):
                continue  # parked, and nothing changed since (or the cache is behind)
            self._parked.pop(m.name, None)
            idle = False
            waiting[site] = waiting.get(site, 0) + 1
            if m.name in self._driving or not state.lease.held():
                continue  # already driven, or another replica acts for it (or nobody yet)
            self._driving[m.name] = asyncio.create_task(
                self._drive(lc, m.name, site, m.node), name=f"drive {m.name}")
        self._waiting = waiting
        self.health.tick()
        return idle and not self._driving

    async def _release(self, lc: Lifecycle) -> None:
        """Let go, audited, the maintenances of the held sites deleted after they ended
        (a deletion of an active one is its reconcile's abandon; a finished one has
        nothing to undo but is held by its finalizer until the executor says so)."""
        release = getattr(lc.store, "release_deleted", None)
        if not callable(release):
            return
        held = {site for site, state in self.sites.items() if state.lease.held()}
        if not held:
            return

        def mine(node: str) -> bool:
            return self.node_site.get(node, DEFAULT_SITE) in held

        for name in await asyncio.to_thread(release, mine):  # requests: off the loop
            self.trace.append(("released", name))

    def _unreadable(self) -> bool:
        """Whether the watch delivered an object that does not read as a maintenance (the
        next scan reads the store, which refuses it visibly)."""
        return self.watch is not None and self.watch.unreadable

    def _watched(self, what: str, wake: bool) -> None:
        """What the watch saw: traced, and a scan asked for at a list or an event."""
        self.trace.append(("watch", what))
        if wake:
            self._wake_for(f"watch {what}" if not what.startswith("listed") else
                           "watch re-listed")

    async def _answered(self, call: Callable[[], T], what: str) -> T | None:
        """``call()``'s answer, tried again after a backoff (:data:`BACKOFF`) while it
        fails with anything but bad input; None once the run is stopped first
        (``--timeout`` cancels the wait)."""
        backoff = BACKOFF.retrying()
        while not self._stop.is_set():
            try:
                return call()
            except ConfigError:
                raise
            except PowerplaneError as exc:
                self._start_error = f"{what}: {exc}"
                self.health.set_ready(False, str(exc))
                self.trace.append(("start", "failed"))
                log.warning("%s: %s; again in %g s", what, exc, backoff.next_s)
            await self._sleep(backoff.next_s)
            backoff.failed()
        return None

    def _not_idle(self) -> str:
        """Why ``--until-idle`` had not ended when ``--timeout`` expired."""
        parts = []
        for site in sorted(self.sites):
            state = self.sites[site]
            waiting = self._waiting.get(site, 0)
            if state.lease.held():
                who = "held by this replica"
            elif state.lease.holder:
                who = f"held by {state.lease.holder}"
            else:
                who = "not held" + (f" ({state.lease.last_error})"
                                    if state.lease.last_error else "")
            parts.append(f"site {site}: {waiting} maintenance(s) not parked or done, "
                         f"lease {who}")
        if not self._started and self._start_error is not None:
            return f"not started: {self._start_error}"
        return "; ".join(parts) or "not started (the API server or the store did not answer)"

    async def run(self) -> int:
        """Run until stopped, or (``--until-idle``) until idle; ``--timeout`` bounds it hard.

        At the deadline the run is cancelled: reconciles stop (no verb is sent after it:
        :meth:`_before_verb` refuses), the leases are released where the API server answers
        within :data:`CLEANUP_S` (else they lapse), and the exit code is 1 with the reason
        on stderr. A call that blocks the event loop past the deadline (a synchronous store
        request to an API server that stopped answering, a write to a full stderr pipe)
        cannot be cancelled: the watchdog thread ends the process :data:`CLEANUP_S` after the
        deadline (exit 1), its leases lapsing as a dead replica's do.
        """
        o = self.options
        loop = asyncio.get_running_loop()
        if o.timeout is None:
            return await self._run()
        self._deadline = time.monotonic() + o.timeout
        self.watchdog = _Watchdog(o.timeout + CLEANUP_S, lambda: (
            f"error: not idle after {o.timeout:g} s (--timeout) and not stopped "
            f"{CLEANUP_S:g} s later (a call is blocking the operator): exiting now; "
            f"{self._not_idle()}; the site leases lapse\n"))
        self.watchdog.start()
        try:
            async with asyncio.timeout_at(loop.time() + o.timeout) as bound:
                return await self._run()
        except TimeoutError:
            if not bound.expired():
                raise
            print(f"error: not idle after {o.timeout:g} s (--timeout): stopped dispatching; "
                  f"{self._not_idle()}", file=sys.stderr)
            return 1

    async def _run(self) -> int:
        o = self.options
        deployment = load_config(o.config)
        access, config_dir, where = self._access(deployment)
        from powerplane_kubernetes.client import KubeApi

        api = KubeApi(access, config_dir, where=where,
                      context_where="--context" if o.context else None)
        self._map_targets(deployment)
        wanted = o.sites or tuple(sorted(set(self.node_site.values())))
        unknown = [s for s in wanted if s not in set(self.node_site.values())]
        if unknown:
            raise _site_error(unknown, self.node_site)
        timings = LeaseTimings(o.lease_duration, o.renew_deadline, o.retry_period)
        client = api.client()
        for site in wanted:
            self.sites[site] = _SiteState(SiteLease(client, o.namespace, site, o.identity,
                                                    timings))
            self.metrics.lease_held.labels(site).set(0)
        if o.http_port is not None:
            self.server = HealthServer(self.health, self.metrics, o.http_host,
                                       o.http_port).start()
            log.info("serving /metrics /healthz /readyz on port %d", self.server.port)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._stop.set)
        # the one runtime: the host with the deployment's authority and the lifecycle's guard
        runtime = open_deployment(metered_deployment(deployment, self.metrics,
                                                     self._before_verb))
        host = runtime.host
        lease_task: asyncio.Task[None] | None = None
        watch_task: asyncio.Task[None] | None = None
        try:
            await host.start()
            lc = self.lifecycle = runtime.lifecycle
            if lc is None:
                raise ConfigError("the operator runs a deployment's lifecycle: this one has "
                                  "no lifecycle: section", source=deployment.source)
            from powerplane_kubernetes.store import KubernetesStore

            if isinstance(lc.store, KubernetesStore):  # the watch cache answers reads
                self.watch = MaintenanceWatch(client, lc.store, on_event=self._watched,
                                              records=True)
            # once: later scans read active maintenances only
            every = await self._answered(lc.store.all, "reading the maintenances")
            if every is None:  # stopped before the store answered
                return 0
            self._started = True
            self.metrics.observe(every, count=False)
            for m in every:
                if m.phase.terminal:
                    self._terminal[m.phase.value] = self._terminal.get(m.phase.value, 0) + 1
            del every
            self.health.set_ready(True)
            self._sem = asyncio.Semaphore(o.max_in_flight)
            lease_task = asyncio.create_task(self._lease_loop())
            if self.watch is not None:
                watch_task = asyncio.create_task(self.watch.run(sleep=self._sleep))
            cause, next_resync = "start", loop.time() + o.resync
            backoff = BACKOFF.retrying()
            retry_in: float | None = None
            while not self._stop.is_set():
                for background in (lease_task, watch_task):
                    if background is not None and background.done():
                        background.result()  # it failed: raise it here
                try:
                    await self._release(lc)
                    idle = self._scan(lc, cause)
                except PowerplaneError as exc:  # the store failed: not ready, try again
                    self.health.set_ready(False, str(exc))
                    retry_in = backoff.next_s
                    backoff.failed()
                    log.warning("%s; again in %g s", exc, retry_in)
                    idle = False
                else:
                    self.health.set_ready(True)
                    backoff.reset()
                    retry_in = None
                if o.until_idle and idle:
                    return 0
                # the next scan: at an event (the watch, a driver ending, a lease held), at
                # the resync, and (no watch: the SQLite store) every --interval
                self._wake.clear()
                wait = next_resync - loop.time()
                if watch_task is None:
                    wait = min(wait, o.interval)
                if retry_in is not None:  # the scan failed: the same scan after the backoff
                    wait = min(wait, retry_in)
                await self._woken(max(0.0, wait))
                if self._stop.is_set():
                    break
                if self._wake.is_set():
                    cause = self._cause
                elif loop.time() >= next_resync:
                    cause, next_resync = "resync", loop.time() + o.resync
                elif retry_in is None:
                    cause = "poll"
            return 0
        finally:
            self._stop.set()
            self._wake.set()
            running = [t for t in (lease_task, watch_task, *self._driving.values())
                       if t is not None]
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(BaseException):
                    await task
            for state in self.sites.values():
                await _bounded(state.lease.release(), f"releasing lease {state.lease.name}")
            if self.lifecycle is not None:
                self.lifecycle.close()
            await _bounded(host.close(), "closing the channels")
            await _bounded(api.aclose(), "closing the API client")
            if self.server is not None:
                self.server.stop()


def _discovery_error(lc: Lifecycle, node: str) -> PowerplaneError | None:
    """Why one of ``node``'s channels could not be discovered (None: all were)."""
    try:
        return lc.host.discovery_error(node)
    except PowerplaneError:
        return None


async def _bounded(work: Coroutine[Any, Any, None], what: str) -> None:
    """Await one step of the stop for at most :data:`CLEANUP_S` (a lease left is let lapse)."""
    try:
        async with asyncio.timeout(CLEANUP_S):
            await work
    except TimeoutError:
        log.warning("%s: no answer within %g s; left as it is", what, CLEANUP_S)
    except Exception as exc:
        log.warning("%s: %s", what, exc)


class _Watchdog:
    """Ends the process (exit 1) once ``after_s`` passed, unless cancelled first.

    A thread, so that it fires while the event loop is blocked in a synchronous call. Its
    message is written by a helper thread it does not wait on for long (stderr may be a
    pipe nobody reads), then ``os._exit(1)``: nothing else runs, no verb is sent.
    """

    def __init__(self, after_s: float, message: Callable[[], str]) -> None:
        self.after_s = after_s
        self.message = message
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._wait, name="powerplane-operator-watchdog",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self._cancelled.set()

    def _wait(self) -> None:
        if self._cancelled.wait(self.after_s):
            return
        text = self.message().encode("utf-8", "replace")
        writer = threading.Thread(target=_write_stderr, args=(text,), daemon=True)
        writer.start()
        writer.join(1.0)
        os._exit(1)


def _write_stderr(text: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text)


def _site_error(unknown: list[str], node_site: Mapping[str, str]) -> ConfigError:
    from powerplane import ConfigProblem

    known = ", ".join(sorted(set(node_site.values())))
    return ConfigError([ConfigProblem("--site", f"no node of the deployment is in site "
                                      f"{', '.join(unknown)} (sites: {known})")])


def main(options: OperatorOptions) -> int:
    """Run one replica; the exit code (0 done, 1 failed, 2 bad input)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx2", "httpx", "httpcore"):  # a line per request: every lease renewal
        logging.getLogger(noisy).setLevel(logging.WARNING)
    op = Operator(options)
    try:
        return asyncio.run(op.run())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PowerplaneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 1) or 1)
    except OSError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if op.watchdog is not None:
            op.watchdog.cancel()
