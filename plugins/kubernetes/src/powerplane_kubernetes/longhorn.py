"""The ``longhorn`` storage port: Longhorn's own objects, exactly as ADR 0025 settles them.

* The fields are ``spec.allowScheduling`` and ``spec.evictionRequested`` of the node's
  ``nodes.longhorn.io/v1beta2`` object in Longhorn's namespace (``longhorn-system``).
* Begin writes ``allowScheduling=false``, then ``evictionRequested=true``; end writes
  ``evictionRequested=false`` first, then ``allowScheduling=true``. The order is the
  lifecycle's (:class:`~powerplane.lifecycle.evacuation.LonghornHook` through
  :func:`~powerplane.lifecycle.storage.apply_writes`); this port makes each field one
  update of its own (a ``PUT`` of the object as read, with its ``resourceVersion``), so
  every intermediate state is one Longhorn's node webhook accepts, whatever its version
  does with a combined write. A field already holding its value is not written (read
  first, and read again after a ``409 Conflict``: Longhorn's controllers update the same
  object, so a conflict is re-read and the one field applied again, up to three times).
* Replicas remaining: the ``replicas.longhorn.io`` objects whose ``spec.nodeID`` names the
  node (Longhorn's volume controller deletes an evicted replica once a healthy copy exists
  elsewhere, so the count is of objects, not a status field).
* Longhorn's API absent (its CRDs not installed: the API server's ``404 page not found``)
  or the node's object NotFound: nothing to evacuate, zero replicas, logged once per node
  at info level. Any other error fails the step (:mod:`.errors`: temporary or permanent).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from powerplane.lifecycle import EvacuationHook, LonghornHook
from powerplane_kubernetes.client import KubeApi, custom_resource
from powerplane_kubernetes.config import ApiAccess, LonghornConfig
from powerplane_kubernetes.errors import answer_of, is_not_found, map_error

__all__ = ["FIELDS", "LonghornNode", "LonghornReplica", "LonghornStorage"]

log = logging.getLogger("powerplane.kubernetes.longhorn")

LonghornNode = custom_resource("longhorn.io", "v1beta2", "Node", "nodes")
"""``nodes.longhorn.io/v1beta2``."""
LonghornReplica = custom_resource("longhorn.io", "v1beta2", "Replica", "replicas")
"""``replicas.longhorn.io/v1beta2``."""

FIELDS = ("allowScheduling", "evictionRequested")
"""The two fields of ``spec`` the evacuation writes."""

_CONFLICT_TRIES = 3


class LonghornStorage:
    """The storage port on Longhorn's ``nodes.longhorn.io`` and ``replicas.longhorn.io``."""

    def __init__(self, config: LonghornConfig, *, cluster: ApiAccess | None = None,
                 config_dir: Path | None = None, api: KubeApi | None = None) -> None:
        self.config = config
        self.namespace = config.namespace
        self.api = api if api is not None else KubeApi(config.access(cluster), config_dir,
                                                       where="lifecycle.storage")
        self.hook: EvacuationHook | None = LonghornHook()
        self._logged: set[str] = set()

    async def aclose(self) -> None:
        await self.api.aclose()

    def _absent(self, node: str, exc: BaseException) -> None:
        if node in self._logged:
            return
        self._logged.add(node)
        answer = answer_of(exc)
        if answer is not None and answer.reason == "NotFound" and answer.details.get("name"):
            log.info("node %s: no nodes.longhorn.io object %s in namespace %s; nothing to "
                     "evacuate", node, node, self.namespace)
        else:
            log.info("node %s: Longhorn is not installed (the API has no nodes.longhorn.io); "
                     "nothing to evacuate", node)

    async def _get(self, node: str) -> dict[str, Any] | None:
        try:
            return await self.api.get_custom(LonghornNode, self.namespace, node)
        except Exception as exc:
            if is_not_found(exc):
                self._absent(node, exc)
                return None
            raise map_error(exc, f"reading nodes.longhorn.io {self.namespace}/{node}") from None

    @staticmethod
    def _fields(obj: dict[str, Any]) -> dict[str, bool]:
        spec = obj.get("spec") or {}
        return {"allowScheduling": bool(spec.get("allowScheduling", True)),
                "evictionRequested": bool(spec.get("evictionRequested", False))}

    # -- the port --------------------------------------------------------------------------
    async def read(self, node: str) -> dict[str, bool] | None:
        obj = await self._get(node)
        return None if obj is None else self._fields(obj)

    async def write(self, node: str, fieldname: str, value: bool) -> None:
        if fieldname not in FIELDS:
            raise ValueError(f"not a Longhorn evacuation field: {fieldname!r}")
        what = f"setting {fieldname}={str(value).lower()} on nodes.longhorn.io " \
               f"{self.namespace}/{node}"
        for attempt in range(1, _CONFLICT_TRIES + 1):
            obj = await self._get(node)
            if obj is None:
                return  # gone: nothing to evacuate
            if self._fields(obj)[fieldname] == value:
                return  # already holds the value: no write
            obj.setdefault("spec", {})[fieldname] = value
            try:
                await self.api.replace_custom(LonghornNode, obj)
                return
            except Exception as exc:
                answer = answer_of(exc)
                if answer is not None and answer.code == 409 and attempt < _CONFLICT_TRIES:
                    continue  # changed under us: read again, apply the one field again
                if is_not_found(exc):
                    self._absent(node, exc)
                    return
                raise map_error(exc, what) from None

    async def replicas_remaining(self, node: str) -> int:
        try:
            replicas = await self.api.list_custom(LonghornReplica, self.namespace)
        except Exception as exc:
            if is_not_found(exc):
                self._absent(node, exc)
                return 0
            raise map_error(exc, f"listing replicas.longhorn.io in {self.namespace}") from None
        return sum(1 for r in replicas if (r.get("spec") or {}).get("nodeID") == node)
