"""The worlds the lifecycle's property and crash tests run in: ``simulated`` and ``kubernetes``.

* ``simulated``: the deployment as written (``lifecycle.cluster: {type: simulated}``), the
  SQLite store; world changes go to the in-memory cluster.
* ``kubernetes``: the same deployment with ``lifecycle.cluster: {type: kubernetes}`` and
  ``lifecycle.storage: {type: longhorn}`` on a kmock API server (powerplane-kubernetes'
  ``KubeApiServer``) seeded with the equivalent nodes, pods, budgets, labels and Longhorn
  objects (``powerplane_kubernetes.testing.seed``); a kubelet keeps every node's ``Ready``
  condition and ``bootID`` on its simulated machine's power state and boot count. The store
  is ``lifecycle.store: {type: kubernetes}`` where powerplane-kubernetes registers it (else
  SQLite): a request is then ``Pending`` until the runner admits it (``Requested``, in its
  history), and the requester is the user the API server names (:attr:`KubernetesWorld.user`,
  the kubeconfig's), not the OS user. Closing the world checks every request the ports made
  against the operator's ClusterRole and leases Role, the person's roles and the cluster's
  default ``system:basic-user`` (least privilege).

powerplane-kubernetes is imported only when the ``kubernetes`` world is made: without it
that world skips, except under ``CI`` (the variable set), where it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from powerplane import PowerHost
from powerplane.authority.identity import local_identity
from powerplane.lifecycle import Lifecycle, Phase

WORLDS = ("simulated", "kubernetes")

OPERATOR_NAMESPACE = "powerplane-system"
"""The namespace the lease Role is made for in the privilege check."""

KUBE_USER = "erin"
"""The user the kubernetes world's kubeconfig authenticates as (a SelfSubjectReview's answer)."""

BASIC_USER: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "system:basic-user"},
    "rules": [{"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
               "verbs": ["create"]}]}
"""The cluster's own default role bound to every authenticated user (not the operator's to
print): a client may ask who it is (the kubernetes store names its requester so)."""


def need_kubernetes() -> None:
    """Skip (under CI: fail) when powerplane-kubernetes and its test peers are absent."""
    missing = [m for m in ("powerplane_kubernetes", "kmock", "lightkube")
               if importlib.util.find_spec(m) is None]
    if missing:
        why = (f"the kubernetes world needs {', '.join(missing)} (install "
               "plugins/kubernetes with its 'test' extra)")
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must have it", pytrace=False)
        pytest.skip(why)


def kubernetes_store_available() -> bool:
    """Whether powerplane-kubernetes registers its ``kubernetes`` store type (yet)."""
    from powerplane.plugins import registry

    return "kubernetes" in registry().port_types("store")


def operator_roles() -> list[dict[str, Any]]:
    """The roles this world's one kubeconfig acts under, from the operator's own manifests:
    the operator's ClusterRole and site-leases Role, and the person's (``maintenance
    request``: the store's create, node locks, audit records and events)."""
    from powerplane_kubernetes.operator.manifests import (
        cluster_role,
        lease_role,
        maintainer_lock_role,
        maintainer_role,
    )

    return [cluster_role(), lease_role(OPERATOR_NAMESPACE), maintainer_role(),
            maintainer_lock_role(OPERATOR_NAMESPACE), BASIC_USER]


class SimulatedWorld:
    """The deployment as written; the cluster object outlives a runner's restart."""

    name = "simulated"
    created = Phase.REQUESTED
    """The phase a request is created in (the SQLite store admits it at once)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cluster: Any = None
        self.user = local_identity().user
        """Who a request and a person's command are recorded as: the OS user."""

    def configure(self, cfg: dict[str, Any]) -> dict[str, Any]:
        return cfg

    async def attach(self, host: PowerHost, lc: Lifecycle) -> None:
        self.cluster = lc.ports.cluster

    async def restarted(self, old: Lifecycle, new: Lifecycle) -> None:
        new.ports.cluster = self.cluster  # the in-memory cluster outlives the runner

    def start_kubelet(self) -> None:
        return None

    def pod_leaves(self, pod: str) -> None:
        self.cluster.pod_leaves(pod)

    def set_pdb_allowed(self, pdb: str, allowed: int) -> None:
        self.cluster.set_pdb_allowed(pdb, allowed)

    def set_ready(self, node: str, ready: bool) -> None:
        self.cluster.set_ready(node, ready)

    async def finish(self, lc: Lifecycle) -> None:
        return None

    def close(self) -> None:
        return None


class KubernetesWorld:
    """The deployment on the kubernetes and longhorn ports against a seeded kmock server."""

    name = "kubernetes"

    def __init__(self, tmp: Path) -> None:
        need_kubernetes()
        self.tmp = tmp
        self.api: Any = None
        self.kubelet_: Any = None
        self.world: Any = None
        self.requests: list[Any] = []
        """Every request the server received (kept at close)."""
        self._task: asyncio.Task[None] | None = None
        self._cfg: dict[str, Any] = {}
        self.created = Phase.REQUESTED
        """The phase a request is created in: ``Pending`` on the kubernetes store (set by
        :meth:`configure`), admitted by the runner."""
        self.user = local_identity().user
        """Who a request and a person's command are recorded as: the kubeconfig's user on
        the kubernetes store (:data:`KUBE_USER`), else the OS user."""

    # -- the deployment ------------------------------------------------------------------
    def configure(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """Seed the API server with ``cfg``'s simulated cluster; point its ports at it."""
        from powerplane_kubernetes.testing.apiserver import KubeApiServer
        from powerplane_kubernetes.testing.seed import lingers, seed

        lifecycle = cfg["lifecycle"]
        cluster = dict(lifecycle.get("cluster") or {"type": "simulated"})
        storage = dict(lifecycle.get("storage") or {"type": "none"})
        assert cluster["type"] == "simulated", cluster
        self.api = KubeApiServer(linger=lingers(cluster)).start()
        nodes = {n: dict(spec.get("labels") or {}) for n, spec in cfg["nodes"].items()}
        seed(self.api, nodes, cluster, storage if storage["type"] == "simulated" else None)
        store = kubernetes_store_available()
        if store:  # the API server enforces them: erin holds exactly these, and
            # powerplane-admin (the servers verbs the admission policy checks)
            from powerplane_kubernetes.operator.manifests import people_roles

            self.api.grant(KUBE_USER, *operator_roles()[:-1], people_roles()[0])
        kubeconfig = self.api.write_kubeconfig(self.tmp / "kubeconfig",
                                               user=KUBE_USER if store else None)
        self._cfg = cfg
        self._boot_id = bool(cluster.get("boot_id", True))
        self._not_ready = list(cluster.get("not_ready") or [])
        self._evict = int(storage.get("evict_per_read", 1)) > 0
        lifecycle["cluster"] = {"type": "kubernetes", "kubeconfig": str(kubeconfig),
                                "timeouts": {"connect_s": 5, "read_s": 10}}
        lifecycle["storage"] = {"type": "longhorn"}
        if store:
            lifecycle["store"] = {"type": "kubernetes", "kubeconfig": str(kubeconfig)}
            self.created, self.user = Phase.PENDING, KUBE_USER
        return cfg

    def _kubelet(self, channels: dict[str, Any]) -> Any:
        from powerplane_kubernetes.testing.seed import (
            ClusterWorld,
            Kubelet,
            channel_machines,
        )

        machines: dict[str, tuple[Any, str]] = {}
        for node, spec in self._cfg["nodes"].items():
            for ref in spec.get("channels") or []:
                if ref["channel"] in channels:
                    machines[node] = (channels[ref["channel"]], ref["target"])
                    break
        self.kubelet_ = Kubelet(self.api, list(self._cfg["nodes"]), channel_machines(machines),
                                boot_id=self._boot_id, not_ready=self._not_ready,
                                evict_replicas=self._evict)
        self.world = ClusterWorld(self.api, self.kubelet_)
        return self.kubelet_

    async def attach(self, host: PowerHost, lc: Lifecycle) -> None:
        """A kubelet task in this loop, reading the host's own simulated machines."""
        from powerplane.sim.channel import SimulatedChannel

        channels = {name: ch for name in self._cfg["channels"]
                    if isinstance(ch := host.channel(name), SimulatedChannel)}
        kubelet = self._kubelet(channels)
        kubelet.sync()
        self._task = asyncio.get_running_loop().create_task(kubelet.run())

    def start_kubelet(self) -> None:
        """A kubelet thread reading the machines' shared ``state_file`` (for runners in
        other processes); stopped by :meth:`close`."""
        from powerplane.sim.channel import SimulatedChannel, SimulatedConfig

        channels = {}
        for name, spec in self._cfg["channels"].items():
            assert spec.get("state_file"), "a kubelet beside other processes needs state_file"
            body = {k: v for k, v in spec.items() if k != "type"}
            channels[name] = SimulatedChannel(name, SimulatedConfig(**body))
        self._kubelet(channels).start()

    async def restarted(self, old: Lifecycle, new: Lifecycle) -> None:
        await self.detach(old)  # the cluster is the API server: nothing to carry over

    # -- world changes -------------------------------------------------------------------
    def pod_leaves(self, pod: str) -> None:
        self.world.pod_leaves(pod)

    def set_pdb_allowed(self, pdb: str, allowed: int) -> None:
        self.world.set_pdb_allowed(pdb, allowed)

    def set_ready(self, node: str, ready: bool) -> None:
        self.world.set_ready(node, ready)

    # -- the end -------------------------------------------------------------------------
    async def detach(self, lc: Lifecycle) -> None:
        """Close the ports' API clients of ``lc`` (its loop is running)."""
        for port in (lc.ports.cluster, lc.ports.storage, lc.store):
            aclose = getattr(port, "aclose", None)
            if aclose is not None:
                await aclose()

    async def finish(self, lc: Lifecycle) -> None:
        """The last runner's clients closed, the kubelet task stopped (its loop running)."""
        await self.detach(lc)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def close(self) -> None:
        """Stop the server; fail when a request was not granted to the operator."""
        from powerplane_kubernetes.testing.seed import ungranted

        if self.kubelet_ is not None:
            self.kubelet_.stop()
        if self.api is None:
            return
        self.requests = self.api.requests
        self.api.stop()
        self.api = None
        refused = ungranted(self.requests, operator_roles())
        assert not refused, "requests the operator's roles do not grant:\n" + "\n".join(
            f"  {r} -> {why}" for r, why in refused)


def make_world(name: str, tmp: Path) -> SimulatedWorld | KubernetesWorld:
    if name == "kubernetes":
        return KubernetesWorld(tmp)
    return SimulatedWorld(tmp)
