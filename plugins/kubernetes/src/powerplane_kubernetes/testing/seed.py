"""A simulated cluster's config as objects on the kmock API server, a kubelet, and RBAC checks.

The lifecycle's tests describe a cluster the way ``lifecycle.cluster: {type: simulated}``
does (pods per node, PodDisruptionBudgets by the pods they cover, extra node labels,
``not_ready``, ``eviction_ticks``, ``boot_id``) and storage the way ``{type: simulated}``
storage does (Longhorn replicas per node). :func:`seed` puts the same world on a
:class:`~powerplane_kubernetes.testing.apiserver.KubeApiServer`:

* a ``Node`` per deployment node, with the deployment's labels and the config's ``labels``
  over them, a ``Ready`` condition and ``status.nodeInfo.bootID``;
* a pod per named pod in namespace :data:`NAMESPACE` (owned by a ReplicaSet, so a drain
  evicts it), labelled ``app: <pod>`` and, when a budget lists it, :data:`BUDGET_LABEL`
  ``: <budget>`` (the first budget listing it, as the simulated cluster takes the first);
* a ``PodDisruptionBudget`` per budget selecting that label, ``status.disruptionsAllowed``
  its ``allowed_disruptions``;
* with Longhorn installed, a ``nodes.longhorn.io`` object per node (scheduling allowed, no
  eviction requested) and the config's replicas as ``replicas.longhorn.io`` objects.

Evicted pods linger terminating when ``eviction_ticks`` is above 0 (start the server with
``linger=``:func:`lingers`); the :class:`Kubelet` removes a pod on the pass after the one that
first saw it terminating (a pass's interval at least after its eviction, so not in the
moment between an eviction and its evicter's next read of the pods).

:class:`Kubelet` is what a kubelet (and Longhorn's volume controller) would do: on every
pass it sets each node's ``Ready`` condition from its machine's true power state (``on``:
ready; anything else, or forced with :meth:`Kubelet.set_ready`: not ready) and its
``bootID`` from the machine's boot count (``<node>-boot-<count>``, the simulated cluster's
own format), removes pods whose grace period is over, and deletes the replicas of a
Longhorn node whose eviction is requested with scheduling off. It reads the machine by
:data:`MachineReader` (never through a channel request, as a kubelet knows its own boot)
and writes the world through the server's own methods, so its work is no API request of
the ports: the request log holds only what the ports asked.

:class:`ClusterWorld` offers the world changes the lifecycle's tests make on a simulated
cluster (``pod_leaves``, ``set_pdb_allowed``, ``set_ready``) on the API server.

:func:`rbac_attributes` turns a recorded request into what the API server authorizes
(verb, API group, resource, subresource, namespace, name), as its request-info resolver
does (the API server's own, :mod:`.apiserver.rbac`); :func:`ungranted` lists the requests
no rule of the given Roles and ClusterRoles allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from powerplane_kubernetes.testing.apiserver import (
    LONGHORN_NODES,
    PODS,
    KubeApiServer,
    RbacAttributes,
    RecordedRequest,
    rbac_attributes,
)

__all__ = [
    "BUDGET_LABEL",
    "NAMESPACE",
    "ClusterWorld",
    "Kubelet",
    "MachineReader",
    "Machines",
    "RbacAttributes",
    "channel_machines",
    "lingers",
    "rbac_attributes",
    "seed",
    "ungranted",
]

NAMESPACE = "default"
"""The namespace of the seeded pods and budgets."""
BUDGET_LABEL = "powerplane.io/budget"
"""The pod label a seeded budget selects (its value: the budget's name)."""
LONGHORN_NAMESPACE = "longhorn-system"

MachineReader = Callable[[str], "tuple[str, int] | None"]
"""A node's machine: (true power state, boot count); None when no machine carries it."""


class Machines(Protocol):
    """What a kubelet reads of a simulated machine (``SimulatedChannel`` has both)."""

    def state_of(self, target: str) -> str: ...

    def boots_of(self, target: str) -> int: ...


def channel_machines(channels: Mapping[str, tuple[Machines, str]]) -> MachineReader:
    """A reader over node -> (the simulated channel carrying it, its target there)."""
    def read(node: str) -> tuple[str, int] | None:
        found = channels.get(node)
        if found is None:
            return None
        channel, target = found
        try:
            return channel.state_of(target), channel.boots_of(target)
        except KeyError:
            return None
    return read


def lingers(cluster: Mapping[str, Any]) -> bool:
    """Whether evicted pods stay terminating a while (``eviction_ticks`` above 0, default 1)."""
    return int(cluster.get("eviction_ticks", 1)) > 0


def _budget_of(cluster: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, pdb in (cluster.get("pdbs") or {}).items():
        for pod in pdb.get("pods") or []:
            out.setdefault(str(pod), str(name))
    return out


def seed(api: KubeApiServer, nodes: Mapping[str, Mapping[str, str]],
         cluster: Mapping[str, Any], storage: Mapping[str, Any] | None = None, *,
         longhorn_nodes: Iterable[str] | None = None) -> None:
    """Put a simulated cluster config (and simulated storage's replicas) on ``api``.

    ``nodes`` is the deployment's nodes and their labels; ``cluster`` the mapping of
    ``lifecycle.cluster: {type: simulated, ...}``; ``storage`` that of
    ``lifecycle.storage: {type: simulated, replicas: ...}`` (or None / ``{type: none}``);
    ``longhorn_nodes`` the nodes that get a ``nodes.longhorn.io`` object (None: all).
    """
    extra = cluster.get("labels") or {}
    not_ready = set(cluster.get("not_ready") or [])
    boot = bool(cluster.get("boot_id", True))
    for node, labels in nodes.items():
        api.add_node(node, labels={**labels, **(extra.get(node) or {})},
                     ready=node not in not_ready,
                     boot_id=f"{node}-boot-1" if boot else None)
    budget_of = _budget_of(cluster)
    for node, pods in (cluster.get("pods") or {}).items():
        for pod in pods:
            labels = {"app": str(pod)}
            if pod in budget_of:
                labels[BUDGET_LABEL] = budget_of[pod]
            api.add_pod(NAMESPACE, str(pod), str(node), labels=labels)
    for name, pdb in (cluster.get("pdbs") or {}).items():
        covered = [p for p, b in budget_of.items() if b == name]
        api.add_pdb(NAMESPACE, str(name), {BUDGET_LABEL: str(name)},
                    allowed=int(pdb.get("allowed_disruptions", 0)),
                    min_available=max(1, len(covered)))
    if api.longhorn:
        replicas = (storage or {}).get("replicas") or {}
        for node in nodes if longhorn_nodes is None else longhorn_nodes:
            api.add_longhorn_node(node)
            for i in range(int(replicas.get(node, 0))):
                api.add_replica(f"pvc-{node}-{i}-r-{node}", node)


class Kubelet:
    """Node status from the machines, pods finishing, Longhorn evicting: one pass or a loop."""

    def __init__(self, api: KubeApiServer, nodes: Iterable[str], machines: MachineReader,
                 *, boot_id: bool = True, not_ready: Iterable[str] = (),
                 evict_replicas: bool = True) -> None:
        self.api = api
        self.nodes = list(nodes)
        self.machines = machines
        self.boot_id = boot_id
        self.not_ready: set[str] = set(not_ready)
        """Nodes forced not ready whatever their machine (the simulated ``not_ready``)."""
        self.evict_replicas = evict_replicas
        """Longhorn removes an evicted node's replicas (False: they are stuck)."""
        self._reported: dict[str, tuple[bool, str]] = {}
        self._terminating: set[str] = set()
        """Pods the last pass saw terminating (``ns/name``): this pass finishes them."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def status_of(self, node: str) -> tuple[bool, str]:
        """What the kubelet reports for ``node``: (ready, bootID)."""
        machine = self.machines(node)
        ready = node not in self.not_ready and (machine is None or machine[0] == "on")
        boot = f"{node}-boot-{machine[1]}" if self.boot_id and machine is not None else ""
        return ready, boot

    def sync(self) -> None:
        """One pass: report every node whose status changed, finish pods, evict replicas."""
        with self._lock:
            for node in self.nodes:
                ready, boot = self.status_of(node)
                last = self._reported.get(node)
                if last is None or last[0] != ready:
                    self.api.set_ready(node, ready)
                if self.boot_id and (last is None or last[1] != boot):
                    self.api.set_boot_id(node, boot)
                self._reported[node] = (ready, boot)
            if self.api.linger:  # a pod evicted since the last pass finishes at the next
                now = set(self.api.terminating())
                self.api.finish_terminating(only=now & self._terminating)
                self._terminating = now
            if self.api.longhorn and self.evict_replicas:
                for node in self.nodes:
                    obj = self.api.object(LONGHORN_NODES, LONGHORN_NAMESPACE, node)
                    spec = (obj or {}).get("spec") or {}
                    if spec.get("evictionRequested") and not spec.get("allowScheduling"):
                        self.api.remove_replicas(node)

    def set_ready(self, node: str, ready: bool) -> None:
        """Force ``node`` not ready (or clear that), whatever its machine; reported at once."""
        (self.not_ready.discard if ready else self.not_ready.add)(node)
        self.sync()

    async def run(self, interval_s: float = 0.005) -> None:
        """Pass after pass in the running event loop (cancel to stop)."""
        while True:
            self.sync()
            await asyncio.sleep(interval_s)

    def start(self, interval_s: float = 0.02) -> Kubelet:
        """Pass after pass in a thread of its own (for peers in other processes)."""
        if self._thread is not None:
            raise RuntimeError("the kubelet runs already")
        self.sync()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.sync()
        self._thread = threading.Thread(target=loop, name="kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (idempotent)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None

    @contextlib.contextmanager
    def running(self, interval_s: float = 0.02) -> Iterator[Kubelet]:
        self.start(interval_s)
        try:
            yield self
        finally:
            self.stop()


def _remove_pod(api: KubeApiServer, namespace: str, name: str) -> bool:
    """Delete a pod as its controller or a person would (no request in the log)."""
    return api.delete_object(PODS, namespace, name)


class ClusterWorld:
    """The simulated cluster's world changes, made on the API server."""

    def __init__(self, api: KubeApiServer, kubelet: Kubelet) -> None:
        self.api = api
        self.kubelet = kubelet

    def pod_leaves(self, pod: str) -> None:
        """A pod goes away by itself (deleted, finished)."""
        _remove_pod(self.api, NAMESPACE, pod)

    def set_pdb_allowed(self, pdb: str, allowed: int) -> None:
        """A budget's ``status.disruptionsAllowed`` changes (the disruption controller)."""
        self.api.set_pdb_allowed(NAMESPACE, pdb, allowed)

    def set_ready(self, node: str, ready: bool) -> None:
        """Force a node not ready (or clear that), whatever its machine."""
        self.kubelet.set_ready(node, ready)


# -- RBAC: the roles a request needs -----------------------------------------------------
def _matches(rule: Mapping[str, Any], a: RbacAttributes) -> bool:
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    verbs = rule.get("verbs") or []
    names = rule.get("resourceNames") or []
    if "*" not in groups and a.group not in groups:
        return False
    if "*" not in verbs and a.verb not in verbs:
        return False
    wanted = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if not ("*" in resources or wanted in resources
            or (a.subresource and f"*/{a.subresource}" in resources)):
        return False
    return not names or a.name in names


def _grants(role: Mapping[str, Any], a: RbacAttributes) -> bool:
    kind = role.get("kind")
    if kind == "Role":
        # a Role grants only in its own namespace, and never a cluster-scoped resource
        if not a.namespace or a.namespace != (role.get("metadata") or {}).get("namespace"):
            return False
    elif kind != "ClusterRole":
        raise ValueError(f"not a Role or ClusterRole: kind {kind!r}")
    return any(_matches(rule, a) for rule in role.get("rules") or [])


def ungranted(requests: Iterable[RecordedRequest],
              roles: Sequence[Mapping[str, Any]]) -> list[tuple[RecordedRequest, str]]:
    """Every resource request no rule of ``roles`` (Roles and ClusterRoles bound to the
    operator) grants, with why: its RBAC attributes, or that it is not a resource request
    the operator should make at all (a non-resource path is not granted by these roles)."""
    refused: list[tuple[RecordedRequest, str]] = []
    for request in requests:
        attrs = rbac_attributes(request)
        if attrs is None:
            refused.append((request, f"non-resource request {request.path}"))
        elif not any(_grants(role, attrs) for role in roles):
            refused.append((request, str(attrs)))
    return refused
