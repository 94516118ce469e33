"""The Longhorn storage port against the kmock API server: ADR 0025's order, read off the
PUTs it received; skip-when-set; Longhorn absent or the node's object absent proceeds."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from powerplane.lifecycle.evacuation import LonghornHook
from powerplane.lifecycle.ports import PermanentPortError
from powerplane.lifecycle.storage import apply_writes
from powerplane_kubernetes.config import KubernetesClusterConfig, LonghornConfig
from powerplane_kubernetes.longhorn import LonghornStorage
from powerplane_kubernetes.testing.apiserver import LONGHORN_NODES, KubeApiServer
from powerplane_kubernetes.testing.schemas import validate_written

NODE_PATH = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes/n1"


def puts(api: KubeApiServer) -> list[tuple[bool, bool]]:
    """Each PUT of n1's Longhorn node as (allowScheduling, evictionRequested), in order."""
    return [(r.body["spec"]["allowScheduling"], r.body["spec"]["evictionRequested"])
            for r in api.requests_to("PUT", NODE_PATH)]


async def test_begin_then_end_write_in_adr_0025_order(api: KubeApiServer,
                                                      longhorn: LonghornStorage) -> None:
    api.add_longhorn_node("n1")
    assert await longhorn.read("n1") == {"allowScheduling": True, "evictionRequested": False}
    done = await apply_writes(longhorn, "n1", LonghornHook().begin())
    assert done == [("allowScheduling", False), ("evictionRequested", True)]
    assert puts(api) == [(False, False), (False, True)]  # scheduling off first, two updates
    done = await apply_writes(longhorn, "n1", LonghornHook().end())
    assert done == [("evictionRequested", False), ("allowScheduling", True)]
    assert puts(api)[2:] == [(False, False), (True, False)]  # eviction cancelled first
    stored = api.object(LONGHORN_NODES, "longhorn-system", "n1")
    assert stored is not None and stored["spec"]["allowScheduling"] is True


async def test_a_field_already_holding_its_value_is_not_written(
        api: KubeApiServer, longhorn: LonghornStorage) -> None:
    api.add_longhorn_node("n1", allow_scheduling=False)
    await apply_writes(longhorn, "n1", LonghornHook().begin())
    assert puts(api) == [(False, True)]
    await apply_writes(longhorn, "n1", LonghornHook().begin())
    assert len(puts(api)) == 1
    await longhorn.write("n1", "evictionRequested", True)  # the port itself skips too
    assert len(puts(api)) == 1


async def test_the_reverse_order_is_refused_by_the_webhook(api: KubeApiServer,
                                                           longhorn: LonghornStorage) -> None:
    api.add_longhorn_node("n1")
    with pytest.raises(PermanentPortError, match="need to disable scheduling on node n1"):
        await longhorn.write("n1", "evictionRequested", True)


async def test_replicas_remaining_counts_spec_node_id(api: KubeApiServer,
                                                      longhorn: LonghornStorage) -> None:
    api.add_longhorn_node("n1")
    api.add_replica("pvc-a-r-1", "n1")
    api.add_replica("pvc-b-r-1", "n1")
    api.add_replica("pvc-a-r-2", "n2")
    assert await longhorn.replicas_remaining("n1") == 2
    assert api.remove_replicas("n1") == 2
    assert await longhorn.replicas_remaining("n1") == 0
    assert await longhorn.replicas_remaining("n2") == 1


async def test_longhorn_not_installed_is_nothing_to_evacuate(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with KubeApiServer(longhorn=False) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = KubernetesClusterConfig(type="kubernetes", kubeconfig=str(kubeconfig))
        port = LonghornStorage(LonghornConfig(type="longhorn"), cluster=cluster)
        try:
            with caplog.at_level(logging.INFO, "powerplane.kubernetes.longhorn"):
                assert await port.read("n1") is None
                assert await apply_writes(port, "n1", LonghornHook().begin()) == []
                assert await port.replicas_remaining("n1") == 0
                await port.write("n1", "allowScheduling", False)
            assert api.requests_to("PUT") == []
            said = [r.getMessage() for r in caplog.records]
            assert said == ["node n1: Longhorn is not installed (the API has no "
                            "nodes.longhorn.io); nothing to evacuate"]  # once per node
        finally:
            await port.aclose()


async def test_node_object_absent_is_nothing_to_evacuate(
        api: KubeApiServer, longhorn: LonghornStorage, caplog: pytest.LogCaptureFixture) -> None:
    api.add_longhorn_node("other")
    with caplog.at_level(logging.INFO, "powerplane.kubernetes.longhorn"):
        assert await longhorn.read("n1") is None
        assert await longhorn.read("n1") is None
        assert await longhorn.replicas_remaining("n1") == 0
    assert [r.getMessage() for r in caplog.records] == [
        "node n1: no nodes.longhorn.io object n1 in namespace longhorn-system; nothing to "
        "evacuate"]
    assert api.requests_to("PUT") == []


async def test_longhorn_writes_are_not_schema_checked_and_say_so(
        api: KubeApiServer, longhorn: LonghornStorage) -> None:
    api.add_longhorn_node("n1")
    await apply_writes(longhorn, "n1", LonghornHook().begin())
    checked, unchecked = validate_written(api.writes())
    assert checked == 0 and unchecked == [f"PUT {NODE_PATH}?fieldManager=powerplane"] * 2
