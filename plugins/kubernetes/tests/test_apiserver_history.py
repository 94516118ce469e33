"""The test API server at scale: kmock's own request history holds only the requests being
answered (each reaction's match walks it, so a whole history made every request slower
than the one before), while the server's log and counts keep every request, by client."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node

from powerplane_kubernetes.operator.manifests import cluster_role, maintainer_role
from powerplane_kubernetes.testing.apiserver import NODES, KubeApiServer


def _client(api: KubeApiServer, path: Path, client: str | None = None) -> Client:
    return Client(KubeConfig.from_file(api.write_kubeconfig(path, client=client)),
                  trust_env=False)


def test_kmock_keeps_no_answered_request_and_the_log_keeps_them_all(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        api.add_node("n1")
        with _client(api, tmp_path / "kc") as k:
            for _ in range(50):
                k.get(Node, "n1")
            list(k.list(Node))
        assert api.kmock_history() == 0  # before: all 51, walked by every later request
        assert len(api.requests_to("GET", "/api/v1/nodes/n1")) == 50
        assert [str(r) for r in api.requests][-1] == "GET /api/v1/nodes"
        assert api.request_counts() == {("", "get", NODES): 50, ("", "list", NODES): 1}


def test_requests_are_told_apart_by_the_kubeconfig_that_made_them(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        api.add_node("n1")
        api.grant("operator", cluster_role())  # each reads nodes, as its role grants
        api.grant("cli", maintainer_role())
        with _client(api, tmp_path / "op", "operator") as op, \
                _client(api, tmp_path / "cli", "cli") as cli:
            op.get(Node, "n1")
            cli.get(Node, "n1")
            list(op.list(Node))
        assert [(r.client, r.path) for r in api.requests] == [
            ("operator", "/api/v1/nodes/n1"), ("cli", "/api/v1/nodes/n1"),
            ("operator", "/api/v1/nodes")]
        assert api.request_counts() == {("operator", "get", NODES): 1,
                                        ("operator", "list", NODES): 1,
                                        ("cli", "get", NODES): 1}
        for text in (tmp_path / "op").read_text(), (tmp_path / "cli").read_text():
            token = text.split('"token": "')[1].split('"')[0]
            assert token not in repr(api.requests)  # the token itself is never recorded


def test_record_false_keeps_the_counts_only(tmp_path: Path) -> None:
    with KubeApiServer(record=False) as api:
        api.add_node("n1")
        with _client(api, tmp_path / "kc") as k:
            k.get(Node, "n1")
            k.patch(Node, "n1", {"spec": {"unschedulable": True}})
        assert api.requests == []
        assert api.request_counts() == {("", "get", NODES): 1, ("", "patch", NODES): 1}
        assert api.object(NODES, None, "n1")["spec"] == {"unschedulable": True}  # type: ignore[index]


def test_a_list_walks_only_the_objects_of_its_resource(tmp_path: Path) -> None:
    from lightkube.resources.core_v1 import Pod

    with KubeApiServer() as api:
        api.add_node("n1")
        for i in range(40):
            api.add_pod("default", f"p{i}", "n1")
        with _client(api, tmp_path / "kc") as k:
            k.create(Node(metadata={"name": "n2"}))  # created by kmock's own handler
            k.delete(Pod, "p0", namespace="default")
            before = api.list_walked
            names = [n.metadata.name for n in k.list(Node)]  # type: ignore[union-attr]
            assert api.list_walked - before == 2  # before: every stored object (43)
            assert names == ["n1", "n2"]
            pods = [p.metadata.name for p in k.list(Pod, namespace="default")]  # type: ignore[union-attr]
        assert pods == [f"p{i}" for i in range(1, 40)]
