"""One ``coordination.k8s.io/v1`` Lease per site: which operator replica acts for its nodes.

The Lease ``powerplane-site-<site>`` in the operator's namespace follows client-go's
leader election, read at its source (``tools/leaderelection``):

* **acquire** when the Lease is absent (``POST``; a ``409 AlreadyExists`` is a race lost),
  has no holder, or has not changed for ``leaseDurationSeconds`` *as this replica
  observed it* (its own monotonic clock from the moment it last saw the record change;
  the other replica's clock is never trusted);
* **renew** every ``retry_period`` by a ``PUT`` carrying the ``resourceVersion`` read
  (optimistic concurrency: a ``409 Conflict`` means another replica wrote first: lost);
  while this replica holds the Lease, the version read is that of its own last write, and
  the renewal is that ``PUT`` alone (client-go's optimistic fast path): only where it
  fails is the Lease read again and the attempt made as for a Lease not held;
* **stop acting** at ``renew_deadline`` after the start of the last successful renewal:
  :meth:`SiteLease.held` turns False by the clock alone, whatever the network does, and
  ``renew_deadline < lease_duration`` so a replica that cannot renew has stopped before
  any other can observe the Lease unchanged for a whole duration and take it over.

The dispatcher's record-before-send (``powerplane.lifecycle.dispatch``) makes the handover
at most once: a verb recorded by the replica that stopped is settled by evidence by the
next holder, never sent blindly again.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from powerplane_kubernetes.errors import answer_of, map_error

__all__ = ["LeaseTimings", "SiteLease", "lease_name"]

log = logging.getLogger("powerplane.operator")

_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def lease_name(site: str) -> str:
    """``powerplane-site-<site>``, the site made a DNS label (lower case, ``-`` for others)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", site.lower()).strip("-") or "default"
    return f"powerplane-site-{slug}"[:63].rstrip("-")


@dataclass(frozen=True)
class LeaseTimings:
    """``lease_duration`` > ``renew_deadline`` > ``retry_period`` (seconds)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "lease timings must satisfy lease_duration > renew_deadline > retry_period > 0 "
                f"(got {self.lease_duration:g}, {self.renew_deadline:g}, {self.retry_period:g})")


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime(_MICRO)


class SiteLease:
    """This replica's view of one site's Lease, and its attempts to hold it."""

    def __init__(self, client: AsyncClient, namespace: str, site: str, identity: str,
                 timings: LeaseTimings, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.namespace = namespace
        self.site = site
        self.name = lease_name(site)
        self.identity = identity
        self.timings = timings
        self.clock = clock
        self.holder: str | None = None
        """The holder last observed (this replica's identity when it holds it)."""
        self._record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        """Monotonic time this replica last saw the Lease's record change."""
        self._valid_until = 0.0
        """Monotonic time after which this replica must not act (renew deadline)."""
        self._transitions = 0
        self._mine: Lease | None = None
        """The Lease as this replica last wrote it (None: not held since)."""
        self.last_error: str | None = None

    # -- the one question the operator asks ------------------------------------------------
    def held(self) -> bool:
        """Whether this replica may act for the site now (by its own clock)."""
        return self.clock() < self._valid_until

    @property
    def valid_until(self) -> float:
        """Monotonic time at which :meth:`held` turns False unless renewed before."""
        return self._valid_until

    # -- acquire / renew -------------------------------------------------------------------
    def _lease(self, resource_version: str | None, acquire: bool,
               previous: LeaseSpec | None) -> Lease:
        now = _now_micro()
        transitions = (previous.leaseTransitions or 0) if previous else 0
        acquired = previous.acquireTime if previous and not acquire else None
        return Lease(
            metadata=ObjectMeta(name=self.name, namespace=self.namespace,
                                resourceVersion=resource_version,
                                labels={"app.kubernetes.io/name": "powerplane-operator",
                                        "powerplane.io/site": lease_name(self.site)[16:]}),
            spec=LeaseSpec(
                holderIdentity=self.identity,
                leaseDurationSeconds=max(1, round(self.timings.lease_duration)),
                acquireTime=dt.datetime.strptime(now, _MICRO).replace(tzinfo=dt.UTC)
                if acquire or acquired is None else acquired,
                renewTime=dt.datetime.strptime(now, _MICRO).replace(tzinfo=dt.UTC),
                leaseTransitions=transitions + (1 if acquire and previous else 0),
            ),
        )

    def _observe(self, spec: LeaseSpec | None) -> None:
        record = None if spec is None else (spec.holderIdentity, spec.renewTime,
                                             spec.acquireTime, spec.leaseTransitions)
        if record != self._record:
            self._record = record
            self._observed_at = self.clock()
        self.holder = spec.holderIdentity if spec is not None else None

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the Lease afterwards."""
        started = self.clock()
        try:
            held = await self._attempt()
        except Exception as exc:
            self.last_error = str(map_error(exc, f"lease {self.namespace}/{self.name}"))
            log.warning("%s", self.last_error)
            return self.held()
        self.last_error = None
        if held:
            self._valid_until = started + self.timings.renew_deadline
        return held

    async def _attempt(self) -> bool:
        if self.held() and self._mine is not None and await self._renew(self._mine):
            return True
        self._mine = None
        try:
            current = await self.client.get(Lease, self.name, namespace=self.namespace)
        except Exception as exc:
            answer = answer_of(exc)
            if answer is None or answer.code != 404:
                raise
            self._observe(None)
            return await self._create()
        spec = current.spec
        self._observe(spec)
        mine = spec is not None and spec.holderIdentity == self.identity
        if not mine:
            free = spec is None or not spec.holderIdentity
            duration = float((spec.leaseDurationSeconds if spec else None)
                             or self.timings.lease_duration)
            expired = self.clock() - self._observed_at >= duration
            if not (free or expired):
                self._valid_until = 0.0  # another replica holds it
                return False
        assert current.metadata is not None
        lease = self._lease(current.metadata.resourceVersion, acquire=not mine, previous=spec)
        try:
            written = await self.client.replace(lease)
        except Exception as exc:
            answer = answer_of(exc)
            if answer is not None and answer.code == 409:
                self._valid_until = 0.0  # another replica wrote first: lost the race
                return False
            raise
        if not mine:
            log.info("lease %s/%s acquired by %s (was %s)", self.namespace, self.name,
                     self.identity, spec.holderIdentity if spec else None)
        self._observe(written.spec)
        self._mine = written
        return True

    async def _renew(self, mine: Lease) -> bool:
        """The fast path of a renewal: one ``PUT`` naming the version of this replica's
        own last write (nobody else writes a Lease its holder renews in time); False on
        any failure (a ``409``: someone wrote since), the slow path then reads it."""
        assert mine.metadata is not None
        lease = self._lease(mine.metadata.resourceVersion, acquire=False, previous=mine.spec)
        try:
            written = await self.client.replace(lease)
        except Exception as exc:
            log.warning("lease %s/%s: renewal on the version last written failed (%s); "
                        "reading it again", self.namespace, self.name,
                        map_error(exc, f"lease {self.namespace}/{self.name}"))
            return False
        self._observe(written.spec)
        self._mine = written
        return True

    async def _create(self) -> bool:
        try:
            written = await self.client.create(self._lease(None, acquire=True, previous=None))
        except Exception as exc:
            answer = answer_of(exc)
            if answer is not None and answer.code == 409:
                return False  # created by another replica first
            raise
        log.info("lease %s/%s created by %s", self.namespace, self.name, self.identity)
        self._observe(written.spec)
        self._mine = written
        return True

    async def release(self) -> None:
        """Give the Lease up at a clean exit (holder emptied) so another acquires at once."""
        if not self.held():
            return
        self._valid_until = 0.0
        self._mine = None
        try:
            current = await self.client.get(Lease, self.name, namespace=self.namespace)
            if current.spec is None or current.spec.holderIdentity != self.identity:
                return
            current.spec.holderIdentity = None
            current.spec.leaseDurationSeconds = 1
            await self.client.replace(current)
        except Exception as exc:
            log.warning("%s", map_error(exc, f"releasing lease {self.namespace}/{self.name}"))
