"""A cluster with people and an executor in it, on the enforcing test API server.

Every identity holds exactly the roles ``operator manifests`` prints for it (and the API
server enforces them and the three admission policies): the executor is the operator's
ServiceAccount (its ClusterRole, its site-lease Role, its node-lock Role), as
``maintenance run`` and ``operator run`` act; the people are bound to
``powerplane-maintainer`` and its Events Role, and to one people role each:

* ``ada``: ``powerplane-admin`` (she requests the maintenances the others attack);
* ``bea``: ``powerplane-admin`` too, an admin who is not the executor;
* ``cora``: a cordon-only role (``servers`` cordon, nothing else);
* ``eng``: ``powerplane-maintenance-engineer`` (cordon and uncordon);
* ``vic``: ``powerplane-viewer`` only (no maintainer role);
* ``mallory``: ``powerplane-admin`` and a role a cluster admin might write by hand, granting
  ``nodemaintenances/status`` update and patch: RBAC lets her write status, only the
  executor admission policy stands in her way.

Each identity has its own kubeconfig (a bearer token of its own) and its own deployment
file naming it for the store and the cluster (:meth:`World.config`), so ``powerplane
--config <that file> maintenance ...`` (:meth:`World.cli`) acts as that identity. The
machines are one simulated channel with a ``state_file``: :meth:`World.sent` is what
reached the machines, in order, whoever sent it. A kubelet thread follows the machines
(ready when on, the boot id from the boot count) unless a node is held not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
import yaml
from click.testing import CliRunner, Result

from powerplane import PowerHost, load_config
from powerplane.cli import cli
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.apiserver import MAINTENANCES, KubeApiServer
from powerplane_kubernetes.testing.seed import Kubelet, Machines, channel_machines, seed

OPS = "powerplane-system"
"""The operator's namespace, and the store's (the default)."""
EXECUTOR = f"system:serviceaccount:{OPS}:{m.NAME}"
"""The operator's ServiceAccount: the executor."""
GATEWAY = f"system:serviceaccount:{OPS}:{m.SERVER}"
"""The Servers gateway's ServiceAccount."""
CP = "node-role.kubernetes.io/control-plane"
NODES = ("cp1", "cp2", "cp3", "w1", "w2")
NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
AUDITS = "powerplane.io/v1alpha1/maintenanceaudits"
DISPATCHES = "powerplane.io/v1alpha1/maintenancedispatches"
REASON = "replace the PSU in slot 2"

CORDON_ONLY = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cordon-only"},
               "rules": [{"apiGroups": ["powerplane.io"], "resources": ["servers"],
                          "verbs": ["cordon"]}]}
"""A delegation narrower than the engineer's: cordon, nothing else."""
STATUS_WRITER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "status-writer"},
                 "rules": [{"apiGroups": ["powerplane.io"],
                            "resources": ["nodemaintenances/status"],
                            "verbs": ["update", "patch"]}]}
"""Not printed: what a cluster admin might grant by hand (RBAC then lets its holder write
status; the executor admission policy still refuses)."""


def executor_roles() -> list[dict[str, Any]]:
    """What ``operator manifests`` binds to the operator's ServiceAccount."""
    return [m.cluster_role(), m.lease_role(OPS), m.operator_lock_role(OPS)]


def requester_roles() -> list[dict[str, Any]]:
    """``powerplane-maintainer`` and its Events Role (printed unbound)."""
    return [m.maintainer_role(), m.maintainer_lock_role(OPS)]


def people() -> dict[str, list[dict[str, Any]]]:
    """Each person and the roles bound to them (see the module docstring)."""
    admin, viewer, engineer = m.people_roles()
    return {
        "ada": [*requester_roles(), admin],
        "bea": [*requester_roles(), admin],
        "cora": [*requester_roles(), CORDON_ONLY],
        "eng": [*requester_roles(), engineer],
        "vic": [viewer],
        "mallory": [*requester_roles(), admin, STATUS_WRITER],
    }


@dataclass
class World:
    """The API server, the identities' files, the machines and their kubelet."""

    api: KubeApiServer
    tmp: Path
    kubelet: Kubelet | None = None
    sites: dict[str, str] = field(default_factory=dict)
    """Node -> its site (a node not named is in ``east``)."""
    _kubeconfigs: dict[str, Path] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)

    # -- identities ----------------------------------------------------------------------
    def kubeconfig(self, who: str) -> Path:
        """``who``'s kubeconfig (``executor``: the operator's ServiceAccount; ``gateway``:
        the Servers gateway's)."""
        if who not in self._kubeconfigs:
            user = {"executor": EXECUTOR, "gateway": GATEWAY}.get(who, who)
            path = self.api.write_kubeconfig(self.tmp / f"{who}.kubeconfig", client=who,
                                             user=user)
            self._kubeconfigs[who] = path
            doc = json.loads(path.read_text(encoding="utf-8"))
            self._tokens[who] = str(doc["users"][0]["user"]["token"])
        return self._kubeconfigs[who]

    def token(self, who: str) -> str:
        self.kubeconfig(who)
        return self._tokens[who]

    def http(self, who: str) -> httpx2.Client:
        """A plain HTTP client of the API server as ``who``."""
        return httpx2.Client(base_url=self.api.url, timeout=10,
                             headers={"Authorization": f"Bearer {self.token(who)}"})

    def config(self, who: str, **lifecycle: Any) -> Path:
        """``who``'s deployment file: the store and the cluster reached as ``who``."""
        kc = str(self.kubeconfig(who))
        path = self.tmp / f"{who}.yaml"
        lc: dict[str, Any] = {
            "store": {"type": "kubernetes", "namespace": OPS, "kubeconfig": kc},
            "cluster": {"type": "kubernetes", "kubeconfig": kc},
            "storage": {"type": "none"},
            "tick_s": 0.02, "readback_window_s": 2, "readback_cadence_s": 0.02,
            "settle_window_s": 0.3, "ready_timeout_s": 120,
        }
        lc.update(lifecycle)
        cfg = {
            "channels": {"lab": {"type": "simulated",
                                 "verbs": ["reboot", "shutdown", "power-on"],
                                 "machines": dict.fromkeys(NODES, "on"),
                                 "state_file": str(self.tmp / "machines.json")}},
            "nodes": {n: {"site": self.sites.get(n, "east"),
                          "labels": {CP: ""} if n.startswith("cp") else {},
                          "channels": [{"channel": "lab", "target": n}]} for n in NODES},
            "lifecycle": lc,
        }
        path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        return path

    def cli(self, who: str, *argv: str) -> Result:
        """``powerplane --config <who's file> ARGV`` in this process."""
        path = self.tmp / f"{who}.yaml"
        if not path.exists():
            self.config(who)
        return CliRunner().invoke(cli, ["--config", str(path), *argv])

    # -- acts ----------------------------------------------------------------------------
    def request(self, who: str, node: str, intent: str) -> str:
        """``who``'s request (the CLI's whole ceremony); the new object's name."""
        before = {o["metadata"]["name"] for o in self.api.objects(MAINTENANCES)}
        res = self.cli(who, "maintenance", "request", node, "--intent", intent,
                       "--reason", REASON, "--confirm-node", node, "--ack-preflight")
        assert res.exit_code == 0, res.output
        (name,) = {o["metadata"]["name"] for o in self.api.objects(MAINTENANCES)} - before
        return name

    def run(self, *args: str) -> Result:
        """``maintenance run`` as the executor (``--until-idle`` unless told otherwise)."""
        res = self.cli("executor", "maintenance", "run", *(args or ("--until-idle",)))
        assert res.exit_code == 0, res.output
        return res

    def object(self, name: str) -> dict[str, Any] | None:
        return self.api.object(MAINTENANCES, None, name)

    def phase(self, name: str) -> str | None:
        obj = self.object(name)
        return None if obj is None else (obj.get("status") or {}).get("phase", "Pending")

    def sent(self) -> list[list[str]]:
        """Every verb that reached a machine, in order (the channel's state file)."""
        path = self.tmp / "machines.json"
        if not path.exists():
            return []
        return [list(d) for d in json.loads(path.read_text(encoding="utf-8"))["dispatches"]]

    def unschedulable(self, node: str) -> bool:
        obj = self.api.object("v1/nodes", None, node)
        assert obj is not None
        return bool((obj.get("spec") or {}).get("unschedulable"))

    def audits(self) -> list[dict[str, Any]]:
        """Every MaintenanceAudit's spec, in the order they were stored."""
        objs = sorted(self.api.objects(AUDITS),
                      key=lambda o: int(o["metadata"]["resourceVersion"]))
        return [o["spec"] for o in objs]

    def ledger(self, name: str) -> list[dict[str, Any]]:
        """The dispatch ledger entries of maintenance ``name`` (their specs)."""
        return [o["spec"] for o in self.api.objects(DISPATCHES)
                if o["spec"]["maintenance"] == name]


def _machines(config: Path) -> Machines:
    async def go() -> Machines:
        host = PowerHost(load_config(config))
        await host.start()
        try:
            return cast(Machines, host.channel("lab"))
        finally:
            await host.close()
    return asyncio.run(go())


@contextlib.contextmanager
def cluster(tmp: Path, *, pods: dict[str, list[str]] | None = None,
            pdbs: dict[str, Any] | None = None,
            sites: dict[str, str] | None = None) -> Iterator[World]:
    """The enforcing API server with every identity bound to its printed roles (the three
    admission policies stored as the manifests print them), the nodes seeded, and the
    kubelet following the machines; ``sites``: node -> site where not ``east``."""
    with KubeApiServer(linger=False) as api:
        api.grant(EXECUTOR, *executor_roles())
        for who, roles in people().items():
            api.grant(who, *roles)
        world = World(api, tmp, sites=dict(sites or {}))
        seed(api, {n: ({CP: ""} if n.startswith("cp") else {}) for n in NODES},
             {"pods": pods or {}, "pdbs": pdbs or {}}, None)
        channel = _machines(world.config("executor"))
        world.kubelet = Kubelet(api, NODES, channel_machines({n: (channel, n) for n in NODES}))
        with world.kubelet.running(0.01):
            yield world
