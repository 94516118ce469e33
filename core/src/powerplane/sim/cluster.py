"""The simulated cluster: in-memory nodes (the deployment's), pods and PodDisruptionBudgets.

A node's readiness follows its simulated machine's power state, so a reboot really takes
the node away and brings it back; core's factory reads that state from the machine's
own model (``power_of``, no channel request, as a kubelet's Ready condition comes from
its node). Drain evicts; a PDB refusal (HTTP 429 in Kubernetes) is reported as "blocked
by PDB <name>", never dropped; evicted pods take ``eviction_ticks`` drain rounds to leave.
Each node has a boot id (``status.nodeInfo.bootID`` in Kubernetes) that changes when its
machine reboots: the simulated cluster models it from the simulated machine's own boot
count (``boot_of``, no channel request, as a kubelet reports its own boot), whatever the
channel publishes; ``boot_id: false`` in its config models a cluster without one.
Registered as the ``simulated`` cluster type by :mod:`powerplane.builtins`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from powerplane.lifecycle.cluster import BootOf, DrainProgress, ModelOf, PowerOf
from powerplane.settings.lifecycle import SimulatedClusterConfig

__all__ = ["SimulatedCluster"]


class SimulatedCluster:
    """In-memory nodes, pods and PDBs; readiness follows the machine's power state."""

    applicable = True

    def __init__(
        self,
        config: SimulatedClusterConfig,
        node_labels: Mapping[str, Mapping[str, str]],
        power_of: PowerOf | None = None,
        boot_of: BootOf | None = None,
        model_of: ModelOf | None = None,
    ) -> None:
        self.config = config
        self._power_of = power_of
        self._model_of = model_of
        self._boot_of = boot_of
        self._labels: dict[str, dict[str, str]] = {n: dict(v) for n, v in node_labels.items()}
        for node, extra in config.labels.items():
            self._labels.setdefault(node, {}).update(extra)
        self.cordoned: set[str] = set()
        self.pods: dict[str, list[str]] = {n: list(p) for n, p in config.pods.items()}
        self.terminating: dict[str, int] = {}
        self.pdb_allowed: dict[str, int] = {
            name: pdb.allowed_disruptions for name, pdb in config.pdbs.items()
        }
        self.pdb_pods: dict[str, list[str]] = {
            name: list(pdb.pods) for name, pdb in config.pdbs.items()
        }
        self.not_ready: set[str] = set(config.not_ready)
        self.evictions: list[str] = []
        """Every eviction that was accepted, in order."""
        self._load()

    # -- persistence -------------------------------------------------------------------------
    def _load(self) -> None:
        if self.config.state_file is None:
            return
        path = Path(self.config.state_file)
        if not path.exists():
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        self.cordoned = set(data["cordoned"])
        self.pods = {k: list(v) for k, v in data["pods"].items()}
        self.terminating = dict(data["terminating"])
        self.pdb_allowed = dict(data["pdb_allowed"])
        self.pdb_pods = {k: list(v) for k, v in data["pdb_pods"].items()}
        self.not_ready = set(data["not_ready"])
        self.evictions = list(data["evictions"])

    def _save(self) -> None:
        if self.config.state_file is None:
            return
        path = Path(self.config.state_file)
        body: dict[str, Any] = {
            "cordoned": sorted(self.cordoned),
            "pods": self.pods,
            "terminating": self.terminating,
            "pdb_allowed": self.pdb_allowed,
            "pdb_pods": self.pdb_pods,
            "not_ready": sorted(self.not_ready),
            "evictions": self.evictions,
        }
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, path)

    # -- the port ----------------------------------------------------------------------------
    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._labels

    def _ready_now(self, node: str) -> bool | None:
        """Readiness known without an await (forced not ready, no reader, or the machine's
        own model answers); None: it takes ``power_of``."""
        if node in self.not_ready:
            return False
        if self._power_of is None and self._model_of is None:
            return True
        state = self._model_of(node) if self._model_of is not None else None
        if state is None:
            return None if self._power_of is not None else True
        return state == "on"

    async def is_ready(self, node: str) -> bool | None:
        self._load()
        now = self._ready_now(node)
        if now is not None:
            return now
        assert self._power_of is not None
        state = await self._power_of(node)
        if state == "none":  # no machine modelled for this node
            return True
        return state == "on"

    async def ready_many(self, nodes: Sequence[str]) -> Mapping[str, bool | None]:
        """Every node's readiness at once: what the machine model answers without an
        await, the rest through ``power_of`` concurrently (the first failure in the order
        given is raised, after every read ended)."""
        self._load()
        out: dict[str, bool | None] = {}
        slow: list[str] = []
        for node in nodes:
            now = self._ready_now(node)
            if now is None:
                slow.append(node)
            out[node] = now
        if slow:
            found = await asyncio.gather(*(self.is_ready(n) for n in slow),
                                         return_exceptions=True)
            for node, value in zip(slow, found, strict=True):
                if isinstance(value, BaseException):
                    raise value
                out[node] = value
        return out

    async def boot_id(self, node: str) -> str | None:
        if self._boot_of is None:
            return None
        boots = await self._boot_of(node)
        return None if boots is None else f"{node}-boot-{boots}"

    async def cordon(self, node: str) -> None:
        self._load()
        if node not in self.cordoned:
            self.cordoned.add(node)
            self._save()

    async def uncordon(self, node: str) -> None:
        self._load()
        if node in self.cordoned:
            self.cordoned.discard(node)
            self._save()

    async def is_cordoned(self, node: str) -> bool:
        self._load()
        return node in self.cordoned

    async def pods_on(self, node: str) -> list[str]:
        self._load()
        return list(self.pods.get(node, []))

    async def pdbs_for(self, pods: list[str]) -> list[str]:
        self._load()
        wanted = set(pods)
        return sorted(n for n, covered in self.pdb_pods.items() if wanted & set(covered))

    def _pdb_of(self, pod: str) -> str | None:
        for name, covered in self.pdb_pods.items():
            if pod in covered:
                return name
        return None

    async def drain(self, node: str) -> DrainProgress:
        self._load()
        pods = self.pods.get(node, [])
        blocked: dict[str, str] = {}
        changed = False
        for pod in list(pods):
            if pod in self.terminating:
                if self.terminating[pod] <= 0:
                    pods.remove(pod)
                    del self.terminating[pod]
                else:
                    self.terminating[pod] -= 1
                changed = True
                continue
            pdb = self._pdb_of(pod)
            if pdb is not None and self.pdb_allowed.get(pdb, 0) <= 0:
                blocked[pod] = pdb  # 429 Too Many Requests: the budget refuses this eviction
                continue
            if pdb is not None:
                self.pdb_allowed[pdb] -= 1
            self.evictions.append(pod)
            changed = True
            if self.config.eviction_ticks == 0:
                pods.remove(pod)
            else:
                self.terminating[pod] = self.config.eviction_ticks - 1
        if changed:
            self._save()
        return DrainProgress(tuple(pods), blocked)

    # -- world changes (tests, demo) -----------------------------------------------------------
    def set_pdb_allowed(self, pdb: str, allowed: int) -> None:
        """Change how many evictions a PDB allows (a workload scaled up, a budget edited)."""
        self._load()
        self.pdb_allowed[pdb] = allowed
        self._save()

    def set_ready(self, node: str, ready: bool) -> None:
        """Force a node not ready (or clear that), whatever its power state."""
        self._load()
        (self.not_ready.discard if ready else self.not_ready.add)(node)
        self._save()

    def pod_leaves(self, pod: str) -> None:
        """A pod goes away by itself (deleted, finished)."""
        self._load()
        for pods in self.pods.values():
            if pod in pods:
                pods.remove(pod)
        self.terminating.pop(pod, None)
        self._save()
