"""The ``metal3`` channel: a BareMetalHost's power, asked of the baremetal-operator.

Every verb reads the host first and decides from what it reads (:func:`.hosts.capabilities_of`:
a host the operator does not drive now is refused with :class:`~powerplane.NotSupported` and
the reason), then writes once, after :func:`powerplane.about_to_send`:

* **power-on / shutdown** set ``spec.online`` by a JSON merge patch that names the
  ``resourceVersion`` the decision was read at: the API server applies it only to the object
  that was judged (``409 Conflict`` otherwise: nothing was applied, the host is read and
  judged again, at most :data:`WRITE_ATTEMPTS` times). A merge patch touches ``spec.online``
  alone (a ``PUT`` would write back every field read, and a strategic or apply patch needs
  the schema on the client); the version makes it conditional. ``spec.online`` already
  as asked is accepted without a write (the operator re-applies it).
* **reboot** adds the phased reboot annotation ``reboot.metal3.io/powerplane-<id>`` (a key of
  this request alone, so no other requester's annotation is touched) with
  ``{"mode": "soft"}`` (or ``hard``), again naming the version read; the operator powers the
  host off and keeps it off while the annotation is there; once ``status.poweredOn`` reads
  false the channel removes its annotation and the operator powers the host on again
  (``spec.online`` is true). The removal is made whatever happens to the wait (the host
  would stay off): a timeout, an error, a cancellation; a removal that fails is
  :class:`~powerplane.OutcomeUnknown` naming the annotation to remove by hand.

Readback is ``status.poweredOn`` (:func:`.hosts.reading_of`). The BMC's credentials are
never read: they stay in the BareMetalHost's Secret, for the operator.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping
from typing import Any

from lightkube.generic_resource import GenericNamespacedResource
from lightkube.types import PatchType

from powerplane import (
    Acceptance,
    Backoff,
    CapabilitySet,
    OutcomeUnknown,
    Reading,
    RefusedByDevice,
    Verb,
    about_to_send,
    require,
)
from powerplane_kubernetes.client import KubeApi, custom_resource
from powerplane_kubernetes.errors import answer_of
from powerplane_metal3.config import (
    DEFAULT_NAMESPACE,
    Metal3ChannelConfig,
    Metal3Target,
)
from powerplane_metal3.errors import raise_mapped
from powerplane_metal3.hosts import (
    NODE_LABEL,
    REBOOT_PREFIX,
    capabilities_of,
    host_name,
    reading_of,
    serves_node,
)

__all__ = ["BMH", "REBOOT_KEY_PREFIX", "UNANNOTATE_BACKOFF", "WRITE_ATTEMPTS", "Metal3Channel"]

BMH: type[GenericNamespacedResource] = custom_resource(
    "metal3.io", "v1alpha1", "BareMetalHost", "baremetalhosts")
"""``metal3.io/v1alpha1`` ``BareMetalHost``."""
REBOOT_KEY_PREFIX = f"{REBOOT_PREFIX}/powerplane-"
"""The annotation key of a reboot by this channel: this prefix and the request's id."""
WRITE_ATTEMPTS = 3
"""Writes refused ``409 Conflict`` (the host changed since it was read) before giving up."""
UNANNOTATE_BACKOFF = Backoff(0.2, 0.8, retries=2)
"""The removal of a reboot's annotation: tried three times, core's backoff between."""


class _Conflict(Exception):
    """A write answered 409: not applied."""


class Metal3Channel:
    """A ``metal3`` channel: the BareMetalHosts of one cluster."""

    def __init__(self, name: str, config: Metal3ChannelConfig) -> None:
        self.name = name
        self.config = config
        # a kubeconfig that cannot be used is bad input now (exit 2), at open
        self.api = KubeApi(config.access(), None, where=f"channels.{name}")
        self._nodes: dict[str, tuple[str, str]] = {}

    # -- reading -----------------------------------------------------------------------------
    def _where(self, target: Metal3Target) -> tuple[str, str] | None:
        if target.node is not None:
            return self._nodes.get(target.node)
        assert target.name is not None
        return target.namespace or self.config.namespace or DEFAULT_NAMESPACE, target.name

    async def _get(self, namespace: str, name: str, target: Metal3Target) -> dict[str, Any] | None:
        try:
            return await self.api.get_custom(BMH, namespace, name)
        except Exception as exc:
            answer = answer_of(exc)
            if answer is not None and answer.code == 404 and answer.details.get("name"):
                return None  # the object is absent (not the whole metal3.io API)
            raise raise_mapped(exc, f"reading BareMetalHost {namespace}/{name}",
                               channel=self.name, target=target) from exc

    async def _find_node(self, target: Metal3Target) -> tuple[str, str] | str:
        """The BareMetalHost that serves ``target.node``, or why there is none."""
        node = target.node
        assert node is not None
        namespace = self.config.namespace or "*"
        try:
            hosts = await self.api.list_custom(BMH, namespace)
        except Exception as exc:
            raise raise_mapped(exc, "listing BareMetalHosts", channel=self.name,
                               target=target) from exc
        found = [h for h in hosts if serves_node(h, node)]
        if not found:
            return (f"no BareMetalHost serves node {node} (label {NODE_LABEL}={node}, or "
                    f"spec.consumerRef.name {node})")
        if len(found) > 1:
            return (f"{len(found)} BareMetalHosts serve node {node}: "
                    f"{', '.join(sorted(host_name(h) for h in found))}")
        meta = found[0]["metadata"]
        where = (str(meta.get("namespace", DEFAULT_NAMESPACE)), str(meta["name"]))
        self._nodes[node] = where
        return where

    async def _host(self, target: Metal3Target) -> tuple[str, dict[str, Any] | None, str]:
        """``(NAMESPACE/NAME, object or None, why none)`` of the target's host."""
        where = self._where(target)
        if where is None:
            found = await self._find_node(target)
            if isinstance(found, str):
                return str(target), None, found
            where = found
        name = f"{where[0]}/{where[1]}"
        obj = await self._get(where[0], where[1], target)
        if obj is None and target.node is not None:
            self._nodes.pop(target.node, None)  # found again next time
        return name, obj, f"no BareMetalHost {name}"

    def _caps(self, name: str, obj: Mapping[str, Any] | None, why: str) -> CapabilitySet:
        if obj is None:
            return CapabilitySet.empty(why)
        return capabilities_of(obj, name, reboot_mode=self.config.reboot,
                               soft_off_timeout_s=self.config.soft_off_timeout_s)

    async def capabilities(self, target: Metal3Target) -> CapabilitySet:
        """What the operator will do for the host now, read from the host."""
        name, obj, why = await self._host(target)
        return self._caps(name, obj, why)

    async def read_power_state(self, target: Metal3Target) -> Reading:
        """``status.poweredOn``; unknown where the operator does not read it now."""
        name, obj, why = await self._host(target)
        if obj is None:
            raise RefusedByDevice(why, channel=self.name, target=target)
        return reading_of(obj, name)

    # -- writing -----------------------------------------------------------------------------
    async def _patch(self, where: tuple[str, str], body: dict[str, Any], target: Metal3Target,
                     what: str) -> None:
        """One merge patch; 409 raises :class:`_Conflict` (nothing was applied)."""
        try:
            await self.api.client().patch(BMH, where[1], body, namespace=where[0],
                                                patch_type=PatchType.MERGE)
        except Exception as exc:
            answer = answer_of(exc)
            if answer is not None and answer.code == 409:
                raise _Conflict() from exc
            raise raise_mapped(exc, what, channel=self.name, target=target,
                               writing=True) from exc

    async def _judged(self, target: Metal3Target, verb: Verb
                      ) -> tuple[tuple[str, str], str, dict[str, Any]]:
        """The host read and judged for ``verb`` (NotSupported with the reason)."""
        name, obj, why = await self._host(target)
        require(self._caps(name, obj, why), verb, self.name)
        assert obj is not None
        ns, _, short = name.partition("/")
        return (ns, short), name, obj

    async def _set_online(self, target: Metal3Target, verb: Verb, online: bool) -> Acceptance:
        for _ in range(WRITE_ATTEMPTS):
            where, name, obj = await self._judged(target, verb)
            if (obj.get("spec") or {}).get("online") is online:
                return Acceptance(f"BareMetalHost {name}: spec.online is {str(online).lower()} "
                                  "already; the baremetal-operator keeps it so")
            version = obj["metadata"].get("resourceVersion")
            about_to_send()
            try:
                await self._patch(where, {"metadata": {"resourceVersion": version},
                                          "spec": {"online": online}},
                                  target, f"setting spec.online of BareMetalHost {name}")
            except _Conflict:
                continue  # changed since it was read: read and judge again
            how = "powers it on" if online else (
                "powers it off (soft, hard after Ironic's soft power-off timeout, worst case "
                f"{self.config.soft_off_timeout_s:g} s)")
            return Acceptance(f"BareMetalHost {name}: spec.online set "
                              f"{str(online).lower()}; the baremetal-operator {how}")
        raise RefusedByDevice(f"BareMetalHost {name} changed under every one of "
                              f"{WRITE_ATTEMPTS} writes (409 Conflict); nothing was applied",
                              channel=self.name, target=target)

    async def power_on(self, target: Metal3Target) -> Acceptance:
        """``spec.online: true``."""
        return await self._set_online(target, Verb.POWER_ON, True)

    async def shutdown(self, target: Metal3Target) -> Acceptance:
        """``spec.online: false`` (a soft power-off, hard after the operator's timeout)."""
        return await self._set_online(target, Verb.SHUTDOWN, False)

    async def reboot(self, target: Metal3Target) -> Acceptance:
        """The phased reboot annotation, held until the operator reports the host off."""
        key = f"{REBOOT_KEY_PREFIX}{uuid.uuid4().hex[:16]}"
        mode = self.config.reboot
        for _ in range(WRITE_ATTEMPTS):
            where, name, obj = await self._judged(target, Verb.REBOOT)
            if (obj.get("spec") or {}).get("online") is not True:
                raise RefusedByDevice(
                    f"BareMetalHost {name} has spec.online false: it is meant to be off, and "
                    "a reboot would leave it off (power-on starts it)",
                    channel=self.name, target=target)
            version = obj["metadata"].get("resourceVersion")
            about_to_send()
            try:
                await self._patch(where, {"metadata": {
                    "resourceVersion": version,
                    "annotations": {key: json.dumps({"mode": mode})}}},
                    target, f"annotating BareMetalHost {name} with {key}")
            except _Conflict:
                continue
            break
        else:
            raise RefusedByDevice(f"BareMetalHost {name} changed under every one of "
                                  f"{WRITE_ATTEMPTS} writes (409 Conflict); nothing was "
                                  "applied", channel=self.name, target=target)
        seen_off = False
        waited: BaseException | None = None
        try:
            seen_off = await self._wait_off(where, target)
        except BaseException as exc:  # a cancellation too: the annotation must go
            waited = exc
        removal = asyncio.ensure_future(self._unannotate(where, key, target, name))
        try:
            await asyncio.shield(removal)
        except asyncio.CancelledError:
            await removal  # finish the removal, then be cancelled
            raise
        if waited is not None:
            raise waited
        if not seen_off:
            raise OutcomeUnknown(
                f"BareMetalHost {name}: the baremetal-operator did not report the host off "
                f"within {self.config.reboot_wait_s:g} s of {key}; the annotation is removed, "
                "so a power-off it had begun is followed by a power-on",
                channel=self.name, target=target)
        return Acceptance(f"BareMetalHost {name}: the baremetal-operator powered it off "
                          f"({mode} reboot, {key}); annotation removed, it powers the host "
                          "on again (spec.online true)")

    async def _wait_off(self, where: tuple[str, str], target: Metal3Target) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.reboot_wait_s
        while True:
            obj = await self._get(where[0], where[1], target)
            if obj is not None and (obj.get("status") or {}).get("poweredOn") is False:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(self.config.poll_s, left))

    async def _unannotate(self, where: tuple[str, str], key: str, target: Metal3Target,
                          name: str) -> None:
        """Remove this request's annotation (no version named: it is ours alone); tried
        three times, then OutcomeUnknown naming the command that removes it."""
        last: BaseException | None = None
        for attempt in range(UNANNOTATE_BACKOFF.retries + 1):
            try:
                await self._patch(where, {"metadata": {"annotations": {key: None}}}, target,
                                  f"removing {key} from BareMetalHost {name}")
                return
            except Exception as exc:
                last = exc
                await asyncio.sleep(UNANNOTATE_BACKOFF.delay(attempt))
        raise OutcomeUnknown(
            f"BareMetalHost {name}: {key} could not be removed, and the host stays off while "
            f"it is there: kubectl annotate baremetalhost -n {where[0]} {where[1]} {key}-",
            channel=self.name, target=target) from last

    async def close(self) -> None:
        await self.api.aclose()
