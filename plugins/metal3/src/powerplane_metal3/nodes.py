"""A deployment's nodes from BareMetalHosts: no channel per host in the file.

Two ways, both by the node a BareMetalHost serves (:func:`.hosts.serves_node`: its label
``powerplane.io/node``, else ``spec.consumerRef.name``):

* in the file, a node's target ``{node: NAME}`` on a ``metal3`` channel: the channel finds
  the BareMetalHost when it first asks (none, or two, is a capability set with the reason);
* generated: :func:`nodes_from_hosts` writes the ``nodes:`` section for every BareMetalHost
  that serves a node, each with the target ``NAMESPACE/NAME`` (no lookup at run time), and
  :func:`list_hosts` reads them from a channel's cluster -- for a JSON fleet file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from powerplane_metal3.hosts import NODE_LABEL, host_name

__all__ = ["list_hosts", "node_of", "nodes_from_hosts"]


def node_of(obj: Mapping[str, Any]) -> str | None:
    """The node a BareMetalHost serves (label, else consumerRef), or None."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if isinstance(labels.get(NODE_LABEL), str) and labels[NODE_LABEL]:
        return str(labels[NODE_LABEL])
    ref = (obj.get("spec") or {}).get("consumerRef") or {}
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None


def nodes_from_hosts(hosts: Iterable[Mapping[str, Any]], channel: str = "metal3",
                     ) -> tuple[dict[str, Any], list[str]]:
    """``(nodes section, problems)``: one node per served node name, its one channel the
    BareMetalHost; a node two hosts claim is left out and named among the problems."""
    claims: dict[str, list[str]] = {}
    for obj in hosts:
        node = node_of(obj)
        if node is not None:
            claims.setdefault(node, []).append(host_name(obj))
    nodes: dict[str, Any] = {}
    problems: list[str] = []
    for node, names in sorted(claims.items()):
        if len(names) > 1:
            problems.append(f"node {node} is served by {len(names)} BareMetalHosts: "
                            f"{', '.join(sorted(names))}")
            continue
        nodes[node] = {"channels": [{"channel": channel, "target": names[0]}]}
    return nodes, problems


async def list_hosts(channel: Any, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every BareMetalHost a :class:`~.channel.Metal3Channel` can see (``namespace``, else
    the channel's, else every namespace)."""
    from powerplane_metal3.channel import BMH

    where = namespace or channel.config.namespace or "*"
    hosts: list[dict[str, Any]] = await channel.api.list_custom(BMH, where)
    return hosts
