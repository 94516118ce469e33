"""The operator's loop: per-site leases, then every maintenance through the lifecycle's Reconciler.

One process:

1. loads the deployment file (``--config``), creates the host with every channel wrapped
   in the call meter (:mod:`.metrics`), and opens the lifecycle exactly as ``powerplane
   maintenance run`` does (:meth:`powerplane.Lifecycle.for_host`: the store
   ``lifecycle.store`` names, the ports, the one :class:`Reconciler`);
2. holds one :class:`~.leases.SiteLease` per site it may act for (a node's ``site``; a
   node without one is in site ``default``), tried and renewed every retry period;
3. makes reconcile passes: the store's maintenances read once per pass, each active one
   whose node's site lease this replica holds reconciled through
   :meth:`powerplane.Lifecycle.reconcile`, ``--max-in-flight`` at a time; a pass that
   advanced something is followed by another at once, else the loop sleeps ``--interval``.

A site whose lease is not held (never acquired, lost, or past its renew deadline) is not
reconciled; its reconciles still running are cancelled at the renew deadline, and every
power verb checks the lease synchronously just before the plugin is called (a replica
whose event loop stalled past its deadline does not send on waking). A cancelled
reconcile sends nothing after the cancel (the host's send gate); a verb it had already
recorded is settled by the next holder by evidence (the dispatcher), never sent blindly.

``--until-idle``: exit 0 once a pass finds every maintenance of this replica's sites
parked or done (a site held by another replica with active maintenances is not idle: the
replica waits, and takes the lease over if the holder stops renewing); ``--timeout``
bounds that wait (exit 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from powerplane import (
    ConfigError,
    Deployment,
    Lifecycle,
    NodeMaintenance,
    PowerHost,
    PowerplaneError,
    load_config,
)
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.operator.health import Health, HealthServer
from powerplane_kubernetes.operator.leases import LeaseTimings, SiteLease
from powerplane_kubernetes.operator.metrics import OperatorMetrics, metered_deployment

__all__ = ["DEFAULT_SITE", "Operator", "OperatorOptions", "main", "sites_of"]

log = logging.getLogger("powerplane.operator")

DEFAULT_SITE = "default"
"""The site of a node whose ``site`` is not set."""

_IDLE = frozenset({"parked", "done"})


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
        return ApiAccess(context=o.context), None, "--kubeconfig"

    def _map_targets(self, deployment: Deployment) -> None:
        self.node_site = sites_of(deployment)
        for node, spec in deployment.nodes.items():
            for ref in spec.channels:
                key = (ref.channel, repr(ref.target))
                self._target_sites.setdefault(key, set()).add(self.node_site[node])

    def _before_verb(self, channel: str, method: str, args: tuple[Any, ...]) -> None:
        """The last lease check, synchronous, just before a verb reaches the plugin."""
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
                held = await state.lease.try_acquire_or_renew()
                self.metrics.lease_held.labels(site).set(1 if held else 0)
                if not held:
                    self._pause(site)
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

    async def _reconcile(self, lc: Lifecycle, name: str, site: str,
                         sem: asyncio.Semaphore) -> str | None:
        async with sem:
            if not self.sites[site].lease.held():
                return None
            task = asyncio.current_task()
            assert task is not None
            self.sites[site].tasks.add(task)
            try:
                return (await lc.reconcile(name)).value
            finally:
                self.sites[site].tasks.discard(task)

    async def _pass(self, lc: Lifecycle, sem: asyncio.Semaphore) -> tuple[bool, bool]:
        """One pass; returns (advanced something, idle)."""
        every = lc.store.all()
        self.metrics.observe(every)
        self.metrics.passes.inc()
        mine = [m for m in every if not m.phase.terminal
                and self.node_site.get(m.node, DEFAULT_SITE) in self.sites]
        runnable: list[tuple[NodeMaintenance, str]] = []
        idle = True
        for m in mine:
            site = self.node_site.get(m.node, DEFAULT_SITE)
            if self.sites[site].lease.held():
                runnable.append((m, site))
            else:
                idle = False  # another replica acts for it (or nobody yet)
        outcomes = await asyncio.gather(
            *(self._reconcile(lc, m.name, site, sem) for m, site in runnable),
            return_exceptions=True)
        advanced = False
        for (m, _), outcome in zip(runnable, outcomes, strict=True):
            if isinstance(outcome, asyncio.CancelledError) or outcome is None:
                idle = False
                continue
            if isinstance(outcome, BaseException):
                log.warning("%s: %s", m.name, outcome)
                idle = False
                continue
            self.results[m.name] = outcome
            advanced |= outcome == "advanced"
            idle &= outcome in _IDLE
        self.health.tick()
        return advanced, idle

    async def run(self) -> int:
        o = self.options
        deployment = load_config(o.config)
        access, config_dir, where = self._access(deployment)
        from powerplane_kubernetes.client import KubeApi

        api = KubeApi(access, config_dir, where=where)
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
        host = PowerHost(metered_deployment(deployment, self.metrics, self._before_verb))
        lease_task: asyncio.Task[None] | None = None
        try:
            await host.start()
            lc = self.lifecycle = Lifecycle.for_host(host)
            self.metrics.observe(lc.store.all(), count=False)
            self.health.set_ready(True)
            lease_task = asyncio.create_task(self._lease_loop())
            sem = asyncio.Semaphore(o.max_in_flight)
            deadline = None if o.timeout is None else loop.time() + o.timeout
            while not self._stop.is_set():
                if lease_task.done():
                    lease_task.result()  # the lease loop failed: raise it here
                try:
                    advanced, idle = await self._pass(lc, sem)
                except PowerplaneError as exc:  # the store failed: not ready, try again
                    self.health.set_ready(False, str(exc))
                    log.warning("%s", exc)
                    advanced, idle = False, False
                else:
                    self.health.set_ready(True)
                if o.until_idle and idle:
                    return 0
                if deadline is not None and loop.time() >= deadline:
                    print(f"error: not idle after {o.timeout:g} s (--timeout)", file=sys.stderr)
                    return 1
                if not advanced:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), o.interval)
            return 0
        finally:
            self._stop.set()
            if lease_task is not None:
                lease_task.cancel()
                with contextlib.suppress(BaseException):
                    await lease_task
            for state in self.sites.values():
                await state.lease.release()
            if self.lifecycle is not None:
                self.lifecycle.close()
            await host.close()
            await api.aclose()
            if self.server is not None:
                self.server.stop()


def _site_error(unknown: list[str], node_site: Mapping[str, str]) -> ConfigError:
    from powerplane import ConfigProblem

    known = ", ".join(sorted(set(node_site.values())))
    return ConfigError([ConfigProblem("--site", f"no node of the deployment is in site "
                                      f"{', '.join(unknown)} (sites: {known})")])


def main(options: OperatorOptions) -> int:
    """Run one replica; the exit code (0 done, 1 failed, 2 bad input)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(Operator(options).run())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PowerplaneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 1) or 1)
    except OSError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
