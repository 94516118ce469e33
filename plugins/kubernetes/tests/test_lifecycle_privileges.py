"""Least privilege, checked: every API request the lifecycle makes on kmock is one the
operator's ClusterRole (or its leases Role) grants.

Each request is mapped to what the API server authorizes (verb, group, resource,
subresource, namespace) the way its request-info resolver does, and matched against the
rules of ``powerplane_kubernetes.operator.manifests.cluster_role()`` and ``lease_role()``.
Besides the lifecycle run here, every kmock-backed lifecycle test (``lifecycle_kmock``, and
core's property and crash tests in their ``kubernetes`` world) makes the same check on all
of its requests when it ends.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from lifecycle_kmock import ceremony, open_cluster, roles

from powerplane.lifecycle import Phase
from powerplane_kubernetes.testing.apiserver import RecordedRequest
from powerplane_kubernetes.testing.seed import RbacAttributes, rbac_attributes, ungranted


def req(method: str, path: str, **query: str) -> RecordedRequest:
    return RecordedRequest(method, path, query)


@pytest.mark.parametrize(("request_", "expected"), [
    (req("GET", "/api/v1/nodes/w1"), RbacAttributes("get", "", "nodes", name="w1")),
    (req("GET", "/api/v1/nodes"), RbacAttributes("list", "", "nodes")),
    (req("GET", "/api/v1/nodes", watch="true"), RbacAttributes("watch", "", "nodes")),
    (req("GET", "/api/v1/nodes", watch="false"), RbacAttributes("list", "", "nodes")),
    (req("GET", "/api/v1/watch/nodes"), RbacAttributes("watch", "", "nodes")),
    (req("GET", "/api/v1/nodes", fieldSelector="metadata.name=w1"),
     RbacAttributes("list", "", "nodes", name="w1")),
    (req("GET", "/api/v1/pods", fieldSelector="spec.nodeName=w1"),
     RbacAttributes("list", "", "pods")),
    (req("PATCH", "/api/v1/nodes/w1"), RbacAttributes("patch", "", "nodes", name="w1")),
    (req("POST", "/api/v1/namespaces/default/pods/web-1/eviction"),
     RbacAttributes("create", "", "pods", "eviction", "default", "web-1")),
    (req("GET", "/apis/policy/v1/poddisruptionbudgets"),
     RbacAttributes("list", "policy", "poddisruptionbudgets")),
    (req("PUT", "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes/w1"),
     RbacAttributes("update", "longhorn.io", "nodes", "", "longhorn-system", "w1")),
    (req("PUT", "/apis/powerplane.io/v1alpha1/nodemaintenances/m1/status"),
     RbacAttributes("update", "powerplane.io", "nodemaintenances", "status", "", "m1")),
    (req("DELETE", "/api/v1/namespaces/default/pods/web-1"),
     RbacAttributes("delete", "", "pods", "", "default", "web-1")),
    (req("DELETE", "/api/v1/namespaces/default/pods"),
     RbacAttributes("deletecollection", "", "pods", "", "default")),
    (req("GET", "/api/v1/namespaces/default"),
     RbacAttributes("get", "", "namespaces", "", "default", "default")),
    (req("POST", "/apis/coordination.k8s.io/v1/namespaces/ops/leases"),
     RbacAttributes("create", "coordination.k8s.io", "leases", "", "ops")),
])
def test_requests_map_to_rbac_attributes_as_the_api_server_does(
    request_: RecordedRequest, expected: RbacAttributes,
) -> None:
    assert rbac_attributes(request_) == expected


def test_non_resource_requests_are_not_granted() -> None:
    assert rbac_attributes(req("GET", "/version")) is None
    assert rbac_attributes(req("GET", "/apis")) is None
    refused = ungranted([req("GET", "/version")], roles())
    assert [why for _, why in refused] == ["non-resource request /version"]


def test_what_the_roles_do_not_grant_is_flagged() -> None:
    asked = [
        req("GET", "/api/v1/nodes/w1"),  # granted
        req("POST", "/api/v1/namespaces/default/pods/web-1/eviction"),  # granted
        req("DELETE", "/api/v1/namespaces/default/pods/web-1"),  # no pods delete
        req("PUT", "/api/v1/nodes/w1"),  # nodes patch, not update
        req("GET", "/api/v1/namespaces/default/pods/web-1"),  # pods list, not get
        req("GET", "/api/v1/namespaces/kube-system/secrets/token"),  # no secrets at all
        req("PATCH", "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes/w1"),
        req("GET", "/apis/coordination.k8s.io/v1/namespaces/powerplane-system/leases/site-a"),
        req("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/site-a"),
        req("GET", "/apis/coordination.k8s.io/v1/leases"),  # the Role is one namespace's
    ]
    refused = [why for _, why in ungranted(asked, roles())]
    assert refused == [
        "delete pods in namespace default",
        "update nodes",
        "get pods in namespace default",
        "get secrets in namespace kube-system",
        "patch nodes.longhorn.io in namespace longhorn-system",
        "get leases.coordination.k8s.io in namespace default",
        "list leases.coordination.k8s.io",
    ]


def without(role: dict[str, Any], resource: str) -> dict[str, Any]:
    out = copy.deepcopy(role)
    out["rules"] = [r for r in out["rules"] if resource not in r["resources"]]
    return out


async def test_every_request_of_a_full_lifecycle_is_granted(tmp_path: Path) -> None:
    """Reboot (evacuation, a PDB that refuses then allows, the uncordon), shutdown with
    return and power-on, drain with return, an abandoned cordon: every request granted, and
    the check is real: the role without ``pods/eviction`` refuses the evictions made."""
    cluster = {"pods": {"w1": ["web-1", "db-0"]},
               "pdbs": {"db-pdb": {"pods": ["db-0"], "allowed_disruptions": 0}}}
    async with open_cluster(tmp_path, cluster=cluster,
                            storage={"type": "simulated", "replicas": {"w1": 1}}) as c:
        m = await c.lc.request("w1", "reboot", ceremony("w1"))
        await c.lc.run(max_passes=3)
        c.world.set_pdb_allowed("db-pdb", 1)
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(m.name).phase is Phase.COMPLETE
        s = await c.lc.request("w1", "shutdown", ceremony("w1"))
        await c.lc.run(until_idle=True)
        await c.lc.return_to_service("w1", ceremony("w1"))
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(s.name).phase is Phase.COMPLETE
        d = await c.lc.request("cp1", "drain", ceremony("cp1", hazard=True))
        await c.lc.run(until_idle=True)
        await c.lc.return_to_service("cp1", ceremony("cp1"))
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(d.name).phase is Phase.COMPLETE
        a = await c.lc.request("cp2", "cordon", ceremony("cp2", hazard=True))
        await c.lc.run(until_idle=True)
        await c.lc.abandon("cp2", ceremony("cp2"))
        await c.lc.run(until_idle=True)
        assert c.lc.store.get(a.name).phase is Phase.COMPLETE
        asked = c.api.requests
        used = {str(rbac_attributes(r)) for r in asked}
    assert ungranted(asked, roles()) == []
    assert used == {
        "get nodes", "list nodes", "patch nodes",
        "list pods", "list pods in namespace default",
        "create pods/eviction in namespace default",
        "list poddisruptionbudgets.policy in namespace default",
        "get nodes.longhorn.io in namespace longhorn-system",
        "update nodes.longhorn.io in namespace longhorn-system",
        "list replicas.longhorn.io in namespace longhorn-system",
    }
    cluster_role, lease_role = roles()
    narrower = [without(cluster_role, "pods/eviction"), lease_role]
    refused = {why for _, why in ungranted(asked, narrower)}
    assert refused == {"create pods/eviction in namespace default"}
