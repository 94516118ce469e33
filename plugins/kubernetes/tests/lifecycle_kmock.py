"""The lifecycle (its ``Lifecycle`` and ``Reconciler``) on the kubernetes and longhorn ports
against a seeded kmock API server: a deployment of simulated machines, a kubelet task
following them, and the least-privilege check of every request at the end.

A module of its own (not ``conftest``) so that test modules import it by a unique name.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from powerplane import PowerHost, parse_config
from powerplane.lifecycle import Ceremony, Lifecycle
from powerplane_kubernetes.operator.manifests import cluster_role, lease_role
from powerplane_kubernetes.testing.apiserver import KubeApiServer, RecordedRequest
from powerplane_kubernetes.testing.seed import (
    ClusterWorld,
    Kubelet,
    channel_machines,
    lingers,
    seed,
    ungranted,
)

CP_LABEL = "node-role.kubernetes.io/control-plane"
NODES = ("cp1", "cp2", "cp3", "w1")
LONGHORN_W1 = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes/w1"
EVICT = "/api/v1/namespaces/default/pods/"


OPERATOR = "system:serviceaccount:powerplane-system:powerplane-operator"
"""Who the lifecycle acts as: the operator's ServiceAccount, bound to :func:`roles`."""


def roles() -> list[dict[str, Any]]:
    """The operator's ClusterRole and its leases Role (namespace ``powerplane-system``)."""
    return [cluster_role(), lease_role("powerplane-system")]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def deployment(tmp: Path, kubeconfig: Path, **lifecycle: Any) -> dict[str, Any]:
    """Three control-plane nodes and a worker, one simulated machine each, on the
    kubernetes cluster port and the longhorn storage port; the SQLite store."""
    nodes = {n: {"labels": {CP_LABEL: ""} if n.startswith("cp") else {},
                 "channels": [{"channel": "lab", "target": n}]} for n in NODES}
    lc: dict[str, Any] = {
        "store": str(tmp / "lifecycle.db"),
        "cluster": {"type": "kubernetes", "kubeconfig": str(kubeconfig),
                    "timeouts": {"connect_s": 5, "read_s": 10}},
        "storage": {"type": "longhorn"},
        "readback_cadence_s": 0.01,
        "readback_window_s": 5,
        "tick_s": 0.01,
    }
    lc.update(lifecycle)
    return {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {n: "on" for n in NODES}}},
        "nodes": nodes,
        "lifecycle": lc,
    }


def ceremony(node: str, *, hazard: bool = False) -> Ceremony:
    """A complete ceremony for ``node`` (as ``maintenance request`` fills it)."""
    return Ceremony(reason="replace the PSU in slot 2", confirm_node=node,
                    ack_preflight=True,
                    hazard_reason="planned window CHG-1234" if hazard else None)


@dataclass
class Cluster:
    """A started lifecycle on a seeded API server, and the world around it."""

    api: KubeApiServer
    host: PowerHost
    lc: Lifecycle
    kubelet: Kubelet
    world: ClusterWorld
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def longhorn_puts(self, path: str = LONGHORN_W1) -> list[tuple[bool, bool]]:
        """Each PUT of a Longhorn node as (allowScheduling, evictionRequested) written."""
        return [(r.body["spec"]["allowScheduling"], r.body["spec"]["evictionRequested"])
                for r in self.api.requests_to("PUT", path)]

    def index(self, match: Callable[[RecordedRequest], bool]) -> list[int]:
        """Positions in the request log of the requests ``match`` picks."""
        return [i for i, r in enumerate(self.api.requests) if match(r)]



@contextlib.asynccontextmanager
async def open_cluster(tmp: Path, *, cluster: Mapping[str, Any] | None = None,
                       storage: Mapping[str, Any] | None = None, longhorn: bool = True,
                       longhorn_nodes: bool = True, clock: Clock | None = None,
                       **lifecycle: Any) -> AsyncIterator[Cluster]:
    """The API server seeded from a simulated ``cluster`` / ``storage`` config, a started
    lifecycle on it acting as the operator's ServiceAccount (its roles bound, and enforced
    by the API server) and a kubelet task; at the end every request is checked against the
    operator's roles (least privilege) and the server stopped."""
    spec = {"type": "simulated", **(cluster or {})}
    api = KubeApiServer(longhorn=longhorn, linger=lingers(spec)).start()
    try:
        api.grant(OPERATOR, *roles())  # the API server refuses what they do not grant
        cfg = deployment(tmp, api.write_kubeconfig(tmp / "kubeconfig", user=OPERATOR),
                         **lifecycle)
        nodes = {n: dict(s["labels"]) for n, s in cfg["nodes"].items()}
        seed(api, nodes, spec, storage, longhorn_nodes=None if longhorn_nodes else ())
        host = PowerHost(parse_config(cfg))
        await host.start()
        lc = Lifecycle.for_host(host, clock=clock) if clock else Lifecycle.for_host(host)
        channel = host.channel("lab")
        kubelet = Kubelet(api, NODES, channel_machines({n: (channel, n) for n in NODES}),
                          boot_id=bool(spec.get("boot_id", True)),
                          not_ready=spec.get("not_ready") or (),
                          evict_replicas=int((storage or {}).get("evict_per_read", 1)) > 0)
        kubelet.sync()
        c = Cluster(api, host, lc, kubelet, ClusterWorld(api, kubelet))
        c.tasks.append(asyncio.get_running_loop().create_task(kubelet.run()))
        try:
            yield c
        finally:
            for task in c.tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            lc.close()
            for port in (lc.ports.cluster, lc.ports.storage):
                aclose = getattr(port, "aclose", None)
                if aclose is not None:
                    await aclose()
            await host.close()
        refused = ungranted(api.requests, roles())
        assert not refused, "requests the operator's roles do not grant:\n" + "\n".join(
            f"  {r} -> {why}" for r, why in refused)
    finally:
        api.stop()
