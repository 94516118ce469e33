"""The test API server's objects, as a real API server keeps them: finalizers hold a deleted
object (``deletionTimestamp`` set, announced ``MODIFIED``) until an update empties them
(``DELETED``), and no finalizer may be added meanwhile; every ``PATCH`` shape (merge, JSON,
server-side apply, strategic merge) on the resource and on its status subresource, which
writes only ``status``; and the API server's refusals of a create naming a
``resourceVersion``, a name taken, a stale precondition."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from powerplane_kubernetes.testing.apiserver import MAINTENANCES, KubeApiServer

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
FINALIZER = "powerplane.io/abandon"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(admission=False) as server:
        yield server


@pytest.fixture
def admin(api: KubeApiServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=api.url, timeout=10,
                       headers={"Authorization": f"Bearer {api.admin_token}"}) as c:
        yield c


def maintenance(name: str = "m1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": name, **meta},
            "spec": {"node": "n1", "intent": "cordon", "reason": "replace the PSU",
                     "requestedBy": "alice"}}


def stored(api: KubeApiServer, name: str = "m1") -> dict[str, Any] | None:
    return api.object(MAINTENANCES, None, name)


def patch(c: httpx2.Client, path: str, content_type: str, body: Any,
          **params: str) -> httpx2.Response:
    return c.patch(path, content=json.dumps(body), params=params,
                   headers={"Content-Type": content_type})


class Watch:
    """The events of one watch of NodeMaintenances, in a thread."""

    def __init__(self, api: KubeApiServer) -> None:
        self.events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._client = httpx2.Client(base_url=api.url, timeout=None, headers={
            "Authorization": f"Bearer {api.admin_token}"})
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._client.stream("GET", NM, params={"watch": "true"}) as answer:
                for line in answer.iter_lines():
                    if line.strip():
                        event = json.loads(line)
                        self.events.put((event["type"], event["object"]))
                    if self._done.is_set():
                        return  # the watch closed: the server stops at once
        except httpx2.HTTPError:
            return

    def next(self) -> tuple[str, dict[str, Any]]:
        return self.events.get(timeout=10)

    def close(self, api: KubeApiServer) -> None:
        """Stop reading at the next event (one more object created, which it sees), so
        the server stops at once."""
        self._done.set()
        with httpx2.Client(base_url=api.url, headers={
                "Authorization": f"Bearer {api.admin_token}"}) as c:
            c.post(NM, json=maintenance("watch-closer"))
        self._thread.join(timeout=10)
        self._client.close()


# -- finalizers ----------------------------------------------------------------------------
def test_a_finalizer_holds_a_deleted_object_until_an_update_empties_it(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    assert admin.post(NM, json=maintenance(finalizers=[FINALIZER])).status_code == 201
    watch = Watch(api)
    try:
        assert watch.next()[0] == "ADDED"
        answer = admin.delete(f"{NM}/m1")
        assert answer.status_code == 200, answer.text
        kind, obj = watch.next()
        meta = obj["metadata"]
        assert kind == "MODIFIED" and meta["deletionTimestamp"]
        assert meta["deletionGracePeriodSeconds"] == 0 and meta["finalizers"] == [FINALIZER]
        kept = stored(api)
        assert kept is not None and kept["metadata"]["deletionTimestamp"]
        # deleting again changes nothing; the object is still read
        assert admin.delete(f"{NM}/m1").status_code == 200
        assert admin.get(f"{NM}/m1").status_code == 200
        # no new finalizer while it is being deleted, by any write
        added = patch(admin, f"{NM}/m1", MERGE,
                      {"metadata": {"finalizers": [FINALIZER, "example.com/other"]}})
        assert added.status_code == 422, added.text
        assert added.json()["message"] == (
            'NodeMaintenance.powerplane.io "m1" is invalid: metadata.finalizers: Forbidden: '
            "no new finalizers can be added if the object is being deleted, found new "
            'finalizers []string{"example.com/other"}')
        # the update that empties the finalizers removes it
        emptied = patch(admin, f"{NM}/m1", JSON_PATCH,
                        [{"op": "remove", "path": "/metadata/finalizers/0"}])
        assert emptied.status_code == 200, emptied.text
        kind, obj = watch.next()
        assert kind == "DELETED" and not obj["metadata"].get("finalizers")
        assert stored(api) is None and admin.get(f"{NM}/m1").status_code == 404
    finally:
        watch.close(api)


def test_without_finalizers_a_delete_removes_at_once(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    assert admin.post(NM, json=maintenance()).status_code == 201
    watch = Watch(api)
    try:
        assert watch.next()[0] == "ADDED"
        assert admin.delete(f"{NM}/m1").status_code == 200
        assert watch.next()[0] == "DELETED"
        assert stored(api) is None
    finally:
        watch.close(api)


def test_a_delete_honours_its_preconditions(api: KubeApiServer, admin: httpx2.Client) -> None:
    assert admin.post(NM, json=maintenance()).status_code == 201
    answer = admin.request("DELETE", f"{NM}/m1", json={
        "kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"resourceVersion": "1"}})
    assert answer.status_code == 409
    assert "Precondition failed: ResourceVersion in precondition: 1" in answer.json()["message"]
    assert stored(api) is not None


# -- creates -------------------------------------------------------------------------------
def test_a_create_naming_a_version_or_a_name_taken_is_refused(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    answer = admin.post(NM, json=maintenance(resourceVersion="7"))
    assert (answer.status_code, answer.json()["message"]) == (
        400, "resourceVersion should not be set on objects to be created")
    assert admin.post(NM, json=maintenance()).status_code == 201
    taken = admin.post(NM, json=maintenance())
    assert taken.status_code == 409 and taken.json()["reason"] == "AlreadyExists"
    assert taken.json()["message"] == 'nodemaintenances.powerplane.io "m1" already exists'
    named = admin.post(NM, json={**maintenance(), "metadata": {"generateName": "m-"}})
    assert named.status_code == 201 and named.json()["metadata"]["name"].startswith("m-")
    # a namespaced kind is created under its namespace's path, nowhere else
    lease = {"metadata": {"name": "l1", "namespace": "ops"}, "spec": {}}
    assert admin.post("/apis/coordination.k8s.io/v1/leases", json=lease).status_code == 404
    assert admin.post("/apis/coordination.k8s.io/v1/namespaces/ops/leases",
                      json=lease).status_code == 201


# -- patches -------------------------------------------------------------------------------
@pytest.mark.parametrize(("content_type", "body"), [
    (MERGE, {"status": {"phase": "Cordoned"}, "metadata": {"labels": {"x": "y"}}}),
    (JSON_PATCH, [{"op": "add", "path": "/status", "value": {"phase": "Cordoned"}},
                  {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]),
    (APPLY, {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
             "metadata": {"name": "m1", "labels": {"x": "y"}},
             "status": {"phase": "Cordoned"}}),
])
def test_a_patch_of_status_writes_only_status_and_of_the_resource_never_status(
        api: KubeApiServer, admin: httpx2.Client, content_type: str, body: Any) -> None:
    assert admin.post(NM, json=maintenance()).status_code == 201
    params = {"fieldManager": "test"} if content_type == APPLY else {}
    done = patch(admin, f"{NM}/m1/status", content_type, body, **params)
    assert done.status_code == 200, done.text
    after = stored(api)
    assert after is not None and after["status"] == {"phase": "Cordoned"}
    assert "x" not in (after["metadata"].get("labels") or {})  # metadata is not status
    done = patch(admin, f"{NM}/m1", content_type, body, **params)
    assert done.status_code == 200, done.text
    after = stored(api)
    assert after is not None and after["metadata"]["labels"] == {"x": "y"}
    assert after["status"] == {"phase": "Cordoned"}  # as the status write left it


def test_a_merge_patch_naming_a_stale_version_is_a_conflict(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    assert admin.post(NM, json=maintenance()).status_code == 201
    answer = patch(admin, f"{NM}/m1", MERGE, {"metadata": {"resourceVersion": "1",
                                                           "labels": {"x": "y"}}})
    assert answer.status_code == 409 and answer.json()["reason"] == "Conflict"
    assert "x" not in (stored(api) or {}).get("metadata", {}).get("labels", {})


def test_apply_needs_a_field_manager_and_creates_an_absent_object(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    body = maintenance("m2")
    refused = patch(admin, f"{NM}/m2", APPLY, body)
    assert refused.status_code == 400 and "fieldManager is required" in refused.text
    created = patch(admin, f"{NM}/m2", APPLY, body, fieldManager="kubectl")
    assert created.status_code == 201, created.text
    assert stored(api, "m2") is not None


def test_a_strategic_merge_patch_is_refused_for_a_custom_resource(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    assert admin.post(NM, json=maintenance()).status_code == 201
    answer = patch(admin, f"{NM}/m1", STRATEGIC, {"metadata": {"labels": {"x": "y"}}})
    assert answer.status_code == 415 and answer.json()["reason"] == "UnsupportedMediaType"
    api.add_node("n1")
    node = patch(admin, "/api/v1/nodes/n1", STRATEGIC, {"spec": {"unschedulable": True}})
    assert node.status_code == 200 and node.json()["spec"]["unschedulable"] is True


def test_an_update_that_changes_nothing_keeps_the_version(
        api: KubeApiServer, admin: httpx2.Client) -> None:
    api.add_node("n1")
    before = admin.get("/api/v1/nodes/n1").json()["metadata"]["resourceVersion"]
    same = patch(admin, "/api/v1/nodes/n1", MERGE, {"spec": {}})
    assert same.json()["metadata"]["resourceVersion"] == before
    moved = patch(admin, "/api/v1/nodes/n1", MERGE, {"spec": {"unschedulable": True}})
    assert moved.json()["metadata"]["resourceVersion"] != before
