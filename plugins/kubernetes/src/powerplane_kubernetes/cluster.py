"""The ``kubernetes`` cluster port: nodes, cordons and drains of a real cluster.

* **labels**: every ``Node``'s labels, over the deployment's own ``nodes.<n>.labels`` (the
  cluster's value wins a key both name). Control-plane membership is not derived here: the
  lifecycle derives it from these labels with the configured ``control_plane_label``
  (``powerplane.lifecycle.quorum.derive_membership``, the one derivation).
* **readiness**: the ``Ready`` condition (``True`` / ``False``; ``Unknown``, no condition
  or no ``Node`` object: cannot tell, None).
* **boot id**: ``status.nodeInfo.bootID`` (None when empty or the node is absent).
* **cordon / uncordon**: a JSON merge patch of ``spec.unschedulable``, sent only when the
  field does not already hold the value (read first; a cordoned node gets no write).
* **drain** (one round): the node's pods by field selector ``spec.nodeName``; pods owned by
  a DaemonSet (their controller would put them back at once) and mirror pods (annotation
  ``kubernetes.io/config.mirror``: the kubelet's static pods, which the API cannot delete)
  are left; every other pod not already terminating is evicted through ``policy/v1``
  ``Eviction``. A 429 refusal is "blocked by PDB <name>": the budget named in the
  answer's ``DisruptionBudget`` cause, else the budget of the pod's namespace whose
  selector matches the pod. Never dropped: the pod stays in ``remaining`` and its budget
  in ``blocked``. A 429 with no budget covering the pod is the API server's own rate limit:
  a :class:`~powerplane.lifecycle.ports.TemporaryPortError`, tried again next pass. The
  round ends with what is still on the node (listed again when any eviction was accepted),
  so "no pods left" is what the API server showed, never assumed.

Pods and budgets are named ``namespace/name`` and ``name`` (as the API server names the
budget in its refusal). Errors follow :mod:`.errors`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powerplane.lifecycle import DrainProgress, PermanentPortError, TemporaryPortError
from powerplane_kubernetes.client import KubeApi
from powerplane_kubernetes.config import KubernetesClusterConfig
from powerplane_kubernetes.errors import answer_of, is_not_found, map_error

__all__ = ["MIRROR_ANNOTATION", "KubernetesCluster", "covers", "evictable", "pdb_named_in"]

log = logging.getLogger("powerplane.kubernetes.cluster")

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""The annotation the kubelet puts on the API's mirror of a static pod."""

_BUDGET_CAUSE = re.compile(r"The disruption budget (\S+) ")


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def evictable(pod: Mapping[str, Any]) -> bool:
    """Whether a drain evicts ``pod``: not a DaemonSet's, not a mirror pod."""
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    for owner in meta.get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") == "DaemonSet":
            return False
    return True


def covers(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``pdb`` selects ``pod`` (same namespace, its ``LabelSelector`` matches).

    A ``policy/v1`` budget with an empty selector ``{}`` selects every pod of its namespace;
    one without a selector selects none.
    """
    pmeta, bmeta = pod.get("metadata") or {}, pdb.get("metadata") or {}
    if pmeta.get("namespace") != bmeta.get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    labels = pmeta.get("labels") or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (
                op == "NotIn" and present and labels.get(key) in values) or (
                op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def pdb_named_in(exc: BaseException) -> str | None:
    """The budget an eviction's 429 names in its ``DisruptionBudget`` cause (None: none)."""
    answer = answer_of(exc)
    if answer is None:
        return None
    for cause in answer.causes:
        if cause.get("reason") == "DisruptionBudget" or cause.get("type") == "DisruptionBudget":
            found = _BUDGET_CAUSE.search(str(cause.get("message", "")))
            if found:
                return found.group(1)
    return None


class KubernetesCluster:
    """The cluster port on a Kubernetes API server."""

    applicable = True

    def __init__(self, config: KubernetesClusterConfig, *,
                 node_labels: Mapping[str, Mapping[str, str]] | None = None,
                 config_dir: Path | None = None, api: KubeApi | None = None) -> None:
        self.config = config
        self.api = api if api is not None else KubeApi(config, config_dir)
        self._deployment_labels = {n: dict(v) for n, v in (node_labels or {}).items()}

    async def aclose(self) -> None:
        await self.api.aclose()

    async def _node(self, node: str, what: str) -> dict[str, Any] | None:
        try:
            return await self.api.get_node(node)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise map_error(exc, what) from None

    # -- the port --------------------------------------------------------------------------
    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        try:
            nodes = await self.api.list_nodes()
        except Exception as exc:
            raise map_error(exc, "listing nodes") from None
        out = {n: dict(v) for n, v in self._deployment_labels.items()}
        for node in nodes:
            meta = node.get("metadata") or {}
            out.setdefault(meta["name"], {}).update(meta.get("labels") or {})
        return out

    async def is_ready(self, node: str) -> bool | None:
        found = await self._node(node, f"reading node {node}")
        if found is None:
            return None
        for cond in (found.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                return {"True": True, "False": False}.get(cond.get("status", ""))
        return None

    async def boot_id(self, node: str) -> str | None:
        found = await self._node(node, f"reading node {node}")
        if found is None:
            return None
        boot = ((found.get("status") or {}).get("nodeInfo") or {}).get("bootID")
        return str(boot) if boot else None

    async def is_cordoned(self, node: str) -> bool:
        found = await self._node(node, f"reading node {node}")
        return bool(found is not None and (found.get("spec") or {}).get("unschedulable"))

    async def _set_unschedulable(self, node: str, value: bool) -> None:
        verb = "cordoning" if value else "uncordoning"
        found = await self._node(node, f"{verb} node {node}")
        if found is None:
            raise PermanentPortError(f'{verb} node {node}: HTTP 404 NotFound: nodes "{node}" '
                                     "not found")
        if bool((found.get("spec") or {}).get("unschedulable")) == value:
            return  # already holds the value: no write
        try:
            await self.api.patch_node(node, {"spec": {"unschedulable": value}})
        except Exception as exc:
            raise map_error(exc, f"{verb} node {node}") from None

    async def cordon(self, node: str) -> None:
        await self._set_unschedulable(node, True)

    async def uncordon(self, node: str) -> None:
        await self._set_unschedulable(node, False)

    async def _pods(self, node: str) -> list[dict[str, Any]]:
        try:
            pods = await self.api.pods_on(node)
        except Exception as exc:
            raise map_error(exc, f"listing the pods on node {node}") from None
        return [p for p in pods if evictable(p)]

    async def pods_on(self, node: str) -> list[str]:
        """The pods a drain would evict (DaemonSet and mirror pods left out), ``ns/name``."""
        return sorted(_pod_key(p) for p in await self._pods(node))

    async def _budgets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        try:
            return await self.api.list_pdbs(namespace)
        except Exception as exc:
            where = f" in namespace {namespace}" if namespace else ""
            raise map_error(exc, f"listing PodDisruptionBudgets{where}") from None

    async def pdbs_for(self, pods: list[str]) -> list[str]:
        """The budgets covering any of ``pods`` (``ns/name``), by name."""
        wanted = set(pods)
        names: set[str] = set()
        for namespace in sorted({p.split("/", 1)[0] for p in wanted}):
            try:
                listed = await self.api.list_pods(namespace)
            except Exception as exc:
                raise map_error(exc, f"listing the pods of namespace {namespace}") from None
            mine = [p for p in listed if _pod_key(p) in wanted]
            if not mine:
                continue
            for pdb in await self._budgets(namespace):
                if any(covers(pdb, pod) for pod in mine):
                    names.add(pdb["metadata"]["name"])
        return sorted(names)

    async def drain(self, node: str) -> DrainProgress:
        pods = await self._pods(node)
        blocked: dict[str, str] = {}
        evicted = False
        budgets: list[dict[str, Any]] | None = None
        for pod in pods:
            key = _pod_key(pod)
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue  # terminating: waited for, not evicted again
            try:
                await self.api.evict(meta.get("namespace", ""), meta.get("name", ""))
                evicted = True
            except Exception as exc:
                answer = answer_of(exc)
                if answer is not None and answer.code == 404:
                    evicted = True  # gone already
                    continue
                if answer is None or answer.code != 429:
                    raise map_error(exc, f"evicting pod {key}") from None
                name = pdb_named_in(exc)
                if name is None:
                    if budgets is None:
                        budgets = await self._budgets(meta.get("namespace"))
                    covering = sorted(b["metadata"]["name"] for b in budgets if covers(b, pod))
                    if not covering:
                        raise TemporaryPortError(
                            f"evicting pod {key}: HTTP 429 {answer.reason} and no "
                            f"PodDisruptionBudget covers the pod (the API server's rate "
                            f"limit): {answer.message}") from None
                    name = ", ".join(covering)
                log.info("node %s: eviction of %s refused by PDB %s", node, key, name)
                blocked[key] = name
        left = await self._pods(node) if evicted else pods
        return DrainProgress(tuple(sorted(_pod_key(p) for p in left)), blocked)
