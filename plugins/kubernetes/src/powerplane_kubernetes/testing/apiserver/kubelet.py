"""The simulated world around the API server: nodes, pods, budgets, Longhorn, and the
kubelet's side of an eviction.

The world changes (:meth:`KubeletServer.add_node`, :meth:`~KubeletServer.set_ready`,
:meth:`~KubeletServer.set_pdb_allowed`, ...) are the kubelet's, a controller's or a
person's, not requests: they run in the server's loop, need no identity and pass no
admission, and watches see them.

**The Eviction subresource** (``POST /api/v1/namespaces/{ns}/pods/{name}/eviction``,
``policy/v1``): the PodDisruptionBudgets of the pod's namespace whose selector matches the
pod decide; none allows it; two are ``500`` ("This pod has more than one
PodDisruptionBudget, which the eviction subresource does not support."); one with
``status.disruptionsAllowed`` at 0 is ``429 TooManyRequests``, "Cannot evict pod as it
would violate the pod's disruption budget.", with a ``details.causes`` entry of reason
``DisruptionBudget`` naming the budget ("The disruption budget web-pdb needs 2 healthy pods
and has 2 currently"), as the API server's eviction REST handler words it; otherwise the
budget's ``disruptionsAllowed`` drops by one and the pod goes (at once, or with
``linger=True`` it stays terminating, with a ``deletionTimestamp``, until
:meth:`KubeletServer.finish_terminating`).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.base import ServerBase
from powerplane_kubernetes.testing.apiserver.common import (
    LONGHORN_NODES,
    LONGHORN_REPLICAS,
    NODES,
    PDBS,
    PODS,
    Response,
    copy_json,
    key,
    now,
    qualified,
    status,
)
from powerplane_kubernetes.testing.apiserver.patches import match_labels

__all__ = ["KubeletServer"]


def _eviction_ok() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


class KubeletServer(ServerBase):
    """The world's objects and the eviction subresource (see the module docstring)."""

    def _init_kubelet(self, *, linger: bool) -> None:
        self.linger = linger
        """Evicted pods stay terminating until :meth:`finish_terminating`."""
        self.budget_cause = True
        """A PDB's 429 names the budget in ``details.causes`` (False: a bare 429, as an
        older API server or a proxy in between may answer)."""
        self.throttle_evictions = False
        """Answer every eviction with API Priority and Fairness' 429 ("Too many requests,
        please try again later."), whatever the budgets say."""

    # -- nodes -------------------------------------------------------------------------------
    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None,
                 ready: bool | None = True, boot_id: str | None = "boot-1",
                 unschedulable: bool = False) -> None:
        """A ``Node`` with a Ready condition (None: no condition) and a boot id."""
        node_status: dict[str, Any] = {"nodeInfo": {
            "bootID": boot_id or "", "machineID": name, "kernelVersion": "6.6",
            "osImage": "kmock", "containerRuntimeVersion": "none",
            "kubeletVersion": "v1.33.0", "kubeProxyVersion": "", "systemUUID": name,
            "operatingSystem": "linux", "architecture": "amd64"}}
        if ready is not None:
            node_status["conditions"] = [{
                "type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady", "message": "",
                "lastHeartbeatTime": now(), "lastTransitionTime": now()}]
        spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
        self._put(NODES, None, {"metadata": {"name": name, "labels": dict(labels or {})},
                                "spec": spec, "status": node_status})

    def set_ready(self, name: str, ready: bool) -> None:
        def change(obj: dict[str, Any]) -> None:
            for cond in obj["status"].get("conditions", []):
                if cond["type"] == "Ready":
                    cond["status"] = "True" if ready else "False"
        self._change(NODES, None, name, change)

    def set_boot_id(self, name: str, boot_id: str) -> None:
        self._change(NODES, None, name,
                     lambda obj: obj["status"]["nodeInfo"].update(bootID=boot_id))

    # -- pods and budgets --------------------------------------------------------------------
    def add_pod(self, namespace: str, name: str, node: str, *,
                labels: Mapping[str, str] | None = None, owner_kind: str | None = "ReplicaSet",
                mirror: bool = False) -> None:
        """A running pod on ``node``, owned by a controller of ``owner_kind`` (None: bare)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": dict(labels or {})}
        if owner_kind is not None:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind,
                                        "name": f"{name}-owner", "uid": str(uuid.uuid4()),
                                        "controller": True}]
        if mirror:
            meta["annotations"] = {"kubernetes.io/config.mirror": uuid.uuid4().hex}
        self._put(PODS, namespace, {
            "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "pause"}]},
            "status": {"phase": "Running"},
        })

    def add_pdb(self, namespace: str, name: str, match_labels: Mapping[str, str], *,
                allowed: int = 0, min_available: int = 1) -> None:
        """A PodDisruptionBudget; ``allowed`` is its ``status.disruptionsAllowed``."""
        self._put(PDBS, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available,
                     "selector": {"matchLabels": dict(match_labels)}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": min_available,
                       "desiredHealthy": min_available, "expectedPods": min_available,
                       "observedGeneration": 1},
        })

    def set_pdb_allowed(self, namespace: str, name: str, allowed: int) -> None:
        self._change(PDBS, namespace, name,
                     lambda obj: obj["status"].update(disruptionsAllowed=allowed))

    def finish_terminating(self, only: Collection[str] | None = None) -> list[str]:
        """Remove every terminating pod (their grace period is over), or only those of
        ``only`` (``ns/name``) still terminating; returns ``ns/name`` of those removed."""
        def finish() -> list[str]:
            gone = []
            for ns, obj in list(self._iter(PODS, None)):
                name = obj.raw.get("metadata", {}).get("name")
                if obj.raw.get("metadata", {}).get("deletionTimestamp") and \
                        (only is None or f"{ns}/{name}" in only):
                    self._remove(PODS, obj)
                    gone.append(f"{ns}/{name}")
            return sorted(gone)
        return self._call(finish)

    def terminating(self) -> list[str]:
        """``ns/name`` of every pod terminating now (evicted, not yet removed)."""
        def read() -> list[str]:
            return sorted(f"{ns}/{obj.raw['metadata']['name']}"
                          for ns, obj in self._iter(PODS, None)
                          if obj.raw.get("metadata", {}).get("deletionTimestamp"))
        return self._call(read)

    # -- Longhorn ----------------------------------------------------------------------------
    def add_longhorn_node(self, name: str, *, allow_scheduling: bool = True,
                          eviction_requested: bool = False,
                          namespace: str = "longhorn-system") -> None:
        self._put(LONGHORN_NODES, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"name": name, "allowScheduling": allow_scheduling,
                     "evictionRequested": eviction_requested, "disks": {}, "tags": []},
        })

    def add_replica(self, name: str, node: str, *, namespace: str = "longhorn-system") -> None:
        self._put(LONGHORN_REPLICAS, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeID": node, "volumeName": name.rsplit("-r-", 1)[0],
                     "evictionRequested": False},
        })

    def remove_replicas(self, node: str, *, namespace: str = "longhorn-system") -> int:
        """Longhorn's volume controller deleting the evicted replicas of ``node``."""
        def remove() -> int:
            n = 0
            for _, obj in list(self._iter(LONGHORN_REPLICAS, namespace)):
                if obj.raw["spec"].get("nodeID") == node:
                    self._remove(LONGHORN_REPLICAS, obj)
                    n += 1
            return n
        return self._call(remove)

    # -- the eviction subresource ------------------------------------------------------------
    def _evict(self, request: kmock.Request) -> Any:
        ns, name = request.namespace, request.name
        if ns is None or name is None or request.resource is None \
                or key(request.resource) != PODS:
            return status(404, "NotFound", "the server could not find the requested resource")
        if self.throttle_evictions:
            return status(429, "TooManyRequests", "Too many requests, please try again later.",
                          {"retryAfterSeconds": 1})
        pod = self._find(PODS, ns, name)
        if pod is None:
            plural, _ = qualified(PODS)
            return status(404, "NotFound", f'{plural} "{name}" not found',
                          {"name": name, "kind": plural})
        labels = pod.raw.get("metadata", {}).get("labels") or {}
        covering = [obj for _, obj in self._iter(PDBS, ns)
                    if match_labels(obj.raw.get("spec", {}).get("selector"), labels)]
        if len(covering) > 1:
            return status(500, "InternalError", "This pod has more than one "
                          "PodDisruptionBudget, which the eviction subresource does not "
                          "support.")
        if pod.raw.get("metadata", {}).get("deletionTimestamp"):
            return Response(status=201, payload=_eviction_ok())
        if covering:
            pdb = covering[0].raw
            budget = pdb.get("status", {})
            if int(budget.get("disruptionsAllowed", 0)) <= 0:
                pdb_name = pdb["metadata"]["name"]
                cause = (f"The disruption budget {pdb_name} needs "
                         f"{budget.get('desiredHealthy', 0)} healthy pods and has "
                         f"{budget.get('currentHealthy', 0)} currently")
                causes = [{"reason": "DisruptionBudget", "message": cause}]
                return status(429, "TooManyRequests",
                              "Cannot evict pod as it would violate the pod's disruption "
                              "budget.", {"causes": causes} if self.budget_cause else {})
            body = copy_json(pdb)
            body["status"]["disruptionsAllowed"] = int(budget["disruptionsAllowed"]) - 1
            self._store(PDBS, ns, body, new=False)
        if self.linger:
            body = copy_json(pod.raw)
            body["metadata"]["deletionTimestamp"] = now()
            self._store(PODS, ns, body, new=False)
        else:
            self._remove(PODS, pod)
        return Response(status=201, payload=_eviction_ok())
