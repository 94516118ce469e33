"""The operator's Prometheus series (``prometheus-client``), and the channel call meter.

=============================================  ==========================================
series                                         labels
=============================================  ==========================================
``powerplane_channel_call_seconds`` (hist.)    ``channel_type``, ``method``
``powerplane_channel_call_errors_total``       ``channel_type``, ``method``, ``error_class``
``powerplane_channel_calls_in_flight``         ``channel_type``
``powerplane_maintenances``                    ``phase``
``powerplane_dispatches_total``                ``verb``, ``outcome``
``powerplane_site_lease_held``                 ``site``
``powerplane_reconcile_passes_total``          (none)
=============================================  ==========================================

Channel calls are measured by wrapping the methods of each channel the host creates
(:func:`metered_deployment`, on the instance, so its type is the plugin's own): core's
:class:`powerplane.PowerHost` has no observer hook, so the wrapper stands between the host
and the channel, inside the host's bounds (its
semaphores and timeout), and times exactly the plugin's own call. A call the host's
timeout cancels counts as ``error_class="Cancelled"``. Every series lives in the
operator's own :class:`~prometheus_client.CollectorRegistry`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from powerplane import Deployment
from powerplane.lifecycle import NodeMaintenance

__all__ = ["CHANNEL_METHODS", "OperatorMetrics", "metered_deployment"]

log = logging.getLogger("powerplane.operator")

CHANNEL_METHODS = frozenset({
    "capabilities", "capabilities_batch", "reboot", "shutdown", "power_on", "terminate",
    "read_power_state", "boot_marker", "invoke_many", "read_many",
})
"""The channel methods the host calls that are measured."""

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class OperatorMetrics:
    """Every series of one operator, in its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.call_seconds = Histogram(
            "powerplane_channel_call_seconds", "Channel call latency, by channel type and method.",
            ["channel_type", "method"], buckets=_BUCKETS, registry=r)
        self.call_errors = Counter(
            "powerplane_channel_call_errors", "Channel calls that failed, by error class.",
            ["channel_type", "method", "error_class"], registry=r)
        self.in_flight = Gauge(
            "powerplane_channel_calls_in_flight", "Channel calls running now.",
            ["channel_type"], registry=r)
        self.maintenances = Gauge(
            "powerplane_maintenances", "NodeMaintenance objects by phase.", ["phase"],
            registry=r)
        self.dispatches = Counter(
            "powerplane_dispatches", "Power verb dispatches by outcome, as this replica saw "
            "them settle.", ["verb", "outcome"], registry=r)
        self.lease_held = Gauge(
            "powerplane_site_lease_held", "1 while this replica holds the site's lease.",
            ["site"], registry=r)
        self.passes = Counter(
            "powerplane_reconcile_passes", "Reconcile passes of this replica.", registry=r)
        self._phases: set[str] = set()
        self._seen: set[tuple[str, str]] = set()

    def render(self) -> bytes:
        """The text exposition of every series."""
        return generate_latest(self.registry)

    # -- maintenances and dispatches -------------------------------------------------------
    def observe(self, maintenances: Iterable[NodeMaintenance], *, count: bool = True,
                phases: bool = True, terminal: Mapping[str, int] | None = None) -> None:
        """Phases now (``maintenances`` and the ``terminal`` counts by phase beside them;
        ``phases=False``: dispatches only), and dispatch outcomes not counted before
        (``count=False``: only remember them, as at start-up, so a restart does not count
        history again)."""
        by_phase: dict[str, int] = dict(terminal or {})
        for m in maintenances:
            by_phase[m.phase.value] = by_phase.get(m.phase.value, 0) + 1
            for d in m.status.dispatches:
                if d.outcome is None:
                    continue
                key = (d.attempt_id, d.outcome.value)
                if key in self._seen:
                    continue
                self._seen.add(key)
                if count:
                    self.dispatches.labels(d.verb, d.outcome.value).inc()
        if not phases:
            return
        for phase in self._phases - set(by_phase):
            self.maintenances.labels(phase).set(0)
        for phase, n in by_phase.items():
            self.maintenances.labels(phase).set(n)
        self._phases |= set(by_phase)

    # -- channel calls ---------------------------------------------------------------------
    def meter(self, channel_type: str, method: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` timed into the channel series (async stays async, sync stays sync)."""
        seconds = self.call_seconds.labels(channel_type, method)
        gauge = self.in_flight.labels(channel_type)
        errors = self.call_errors

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                gauge.inc()
                start = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                except BaseException as exc:
                    errors.labels(channel_type, method, _error_class(exc)).inc()
                    raise
                finally:
                    seconds.observe(time.perf_counter() - start)
                    gauge.dec()
            return timed_async

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            gauge.inc()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                errors.labels(channel_type, method, _error_class(exc)).inc()
                raise
            finally:
                seconds.observe(time.perf_counter() - start)
                gauge.dec()
        return timed


def _error_class(exc: BaseException) -> str:
    import asyncio

    if isinstance(exc, asyncio.CancelledError):
        return "Cancelled"
    return type(exc).__name__


def metered_deployment(deployment: Deployment, metrics: OperatorMetrics,
                       before_verb: Callable[[str, str, tuple[Any, ...]], None] | None = None,
                       ) -> Deployment:
    """The deployment with every channel wrapped in the meter.

    ``before_verb(channel, method, args)`` (optional) runs synchronously before every
    state-changing call reaches the plugin (the operator's last lease check).
    """
    channels = {}
    for name, configured in deployment.channels.items():
        ctype = configured.type
        factory = ctype.factory

        def make(name_: str, config: Any, _factory: Any = factory,
                 _type: str = ctype.name) -> Any:
            return _instrument(_factory(name_, config), name_, _type, metrics, before_verb)

        channels[name] = dataclasses.replace(
            configured, type=dataclasses.replace(ctype, factory=make))
    return dataclasses.replace(deployment, channels=channels)


_VERBS = frozenset({"reboot", "shutdown", "power_on", "terminate", "invoke_many"})


def _checked(value: Callable[..., Any], name: str, attr: str,
             before: Callable[[str, str, tuple[Any, ...]], None]) -> Callable[..., Any]:
    """``value`` with ``before(channel, method, args)`` run first (async stays async)."""
    if inspect.iscoroutinefunction(value):
        @functools.wraps(value)
        async def checked_async(*args: Any, **kwargs: Any) -> Any:
            before(name, attr, args)
            return await value(*args, **kwargs)
        return checked_async

    @functools.wraps(value)
    def checked(*args: Any, **kwargs: Any) -> Any:
        before(name, attr, args)
        return value(*args, **kwargs)
    return checked


def _instrument(channel: Any, name: str, channel_type: str, metrics: OperatorMetrics,
                before_verb: Callable[[str, str, tuple[Any, ...]], None] | None) -> Any:
    """Shadow the channel's measured methods on the instance itself (its type stays, so
    core's checks by type and protocol see the plugin's own class)."""
    for attr in CHANNEL_METHODS:
        value = getattr(channel, attr, None)
        if value is None or not callable(value):
            continue
        if before_verb is not None and attr in _VERBS:
            value = _checked(value, name, attr, before_verb)
        try:
            setattr(channel, attr, metrics.meter(channel_type, attr, value))
        except (AttributeError, TypeError):  # __slots__ or a frozen object: not measured
            log.warning("channel %s: calls cannot be measured (%s)", name, type(channel).__name__)
            return channel
    return channel
