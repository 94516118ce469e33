"""Issue 36's first attack, on the enforcing test API server: a shutdown an admin requested
has gone out (``PoweredOff``, one ``shutdown`` at the machine), and someone rewrites its
status to look as if it had not (the phase back to ``Drained``, the dispatch history
removed), hoping the executor sends it again.

* A person (the cordon-only requester, the maintenance engineer, an admin who is not the
  executor) is refused every shape of the write (``PUT``, merge patch, JSON patch,
  server-side apply) on ``…/status``: no requester role holds a status verb (403 from
  RBAC); a person whose RBAC was widened by hand to write status is refused by the executor
  admission policy (403); the executor's own identity is refused by the same policy for a
  status that moves the phase back and drops a dispatch (422), and holds no ``patch``
  (403). A status smuggled through the main resource is dropped there. The status stays
  as the executor wrote it, and ``maintenance run`` then sends nothing more.
* The honest form of the attack, a restore below the API server (an etcd snapshot, a
  backup tool) that brings the old status back where no admission sees it: the executor
  holds the status against the dispatch ledger, sends nothing, parks the maintenance for a
  person with the evidence (``StatusRegressed``, the lost dispatch back as
  ``indeterminate``) and audits the regression once.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cluster_users import EXECUTOR, NM, OPS, World, cluster

from powerplane_kubernetes.testing.apiserver import MAINTENANCES

SHAPES = ("put", "merge", "json", "apply")
REWRITE = {"phase": "Drained", "dispatches": []}


def rewrite(w: World, who: str, name: str, shape: str, path: str = "/status") -> httpx2.Response:
    """``who`` writes the rewrite of ``name``'s status in one of the four shapes."""
    url = f"{NM}/{name}{path}"
    with w.http(who) as c:
        if shape == "put":
            obj = w.object(name)
            assert obj is not None
            obj["status"] = {**obj["status"], **REWRITE}
            return c.put(url, json=obj)
        if shape == "merge":
            return c.patch(url, json={"status": REWRITE},
                           headers={"Content-Type": "application/merge-patch+json"})
        if shape == "json":
            ops = [{"op": "replace", "path": f"/status/{k}", "value": v}
                   for k, v in REWRITE.items()]
            return c.patch(url, content=json.dumps(ops),
                           headers={"Content-Type": "application/json-patch+json"})
        body = {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
                "metadata": {"name": name}, "status": REWRITE}
        return c.patch(url, content=json.dumps(body),
                       params={"fieldManager": who, "force": "true"},
                       headers={"Content-Type": "application/apply-patch+yaml"})


def refused(answer: httpx2.Response, code: int) -> str:
    assert answer.status_code == code, answer.text
    message: str = answer.json()["message"]
    return message


@pytest.fixture
def shut_down(tmp_path: Path) -> Any:
    """An admin's shutdown of w1, carried out by the executor: ``PoweredOff``."""
    with cluster(tmp_path) as w:
        name = w.request("ada", "w1", "shutdown")
        w.run()
        assert w.phase(name) == "PoweredOff", w.object(name)
        assert w.sent() == [["shutdown", "w1"]]
        assert [e["kind"] for e in w.ledger(name)] == ["dispatch"]
        yield w, name


@pytest.mark.slow
def test_no_one_but_the_executor_rewrites_the_status_and_nothing_is_sent_again(
        shut_down: tuple[World, str]) -> None:
    w, name = shut_down
    before = w.object(name)
    assert before is not None
    for who in ("cora", "eng", "bea"):  # no requester role holds a status verb
        for shape in SHAPES:
            verb = "update" if shape == "put" else "patch"
            message = refused(rewrite(w, who, name, shape), 403)
            assert message == (f'nodemaintenances.powerplane.io "{name}" is forbidden: User '
                               f'"{who}" cannot {verb} resource "nodemaintenances/status" in '
                               'API group "powerplane.io" at the cluster scope'), shape
    for shape in SHAPES:  # RBAC widened by hand: the executor policy refuses her
        message = refused(rewrite(w, "mallory", name, shape), 403)
        assert message.endswith(
            "denied request: only the executor writes a maintenance's status: mallory may not "
            "create maintenancedispatches.powerplane.io (the operator's ClusterRole grants "
            "it)"), shape
    # the executor's own identity: the policy refuses a phase moved back and a dispatch
    # dropped (its role holds update of status, no patch)
    message = refused(rewrite(w, "executor", name, "put"), 422)
    assert f"the phase of {name} cannot move back from PoweredOff to Drained" in message
    for shape in ("merge", "json", "apply"):
        refused(rewrite(w, "executor", name, shape), 403)
    # through the main resource, status is not written at all (the server drops it)
    answer = rewrite(w, "ada", name, "put", path="")
    assert answer.status_code == 200, answer.text
    after = w.object(name)
    assert after is not None and after["status"] == before["status"]
    w.run()
    assert w.sent() == [["shutdown", "w1"]]  # nothing sent again
    assert w.phase(name) == "PoweredOff"
    assert not [a for a in w.audits() if a.get("outcome") == "regression"]


@pytest.mark.slow
def test_a_restore_below_the_api_server_parks_for_a_person_and_sends_nothing(
        shut_down: tuple[World, str]) -> None:
    w, name = shut_down
    stored = w.object(name)
    assert stored is not None
    (dispatch,) = stored["status"]["dispatches"]
    restored = copy.deepcopy(stored)
    restored["status"] = {**restored["status"], **REWRITE}
    w.api.restore_object(MAINTENANCES, None, restored)  # no request, no admission
    asked = len(w.api.requests)
    w.run()
    # maintenance run keeps no watch: it lists the ledger it holds the status against
    assert any(r.client == "executor" and r.method == "GET"
               and r.path.endswith("/maintenancedispatches") for r in w.api.requests[asked:])
    assert w.sent() == [["shutdown", "w1"]]  # nothing sent again
    parked = w.object(name)
    assert parked is not None
    status = parked["status"]
    assert status["phase"] == "Drained"  # as restored: the executor moves nothing back
    conditions = status["conditions"]
    assert conditions["StatusRegressed"]["status"] == "True"
    assert "the status contradicts the dispatch ledger" in \
        conditions["StatusRegressed"]["message"]
    assert conditions["AwaitingResolution"]["status"] == "True"
    assert "powerplane maintenance resolve w1" in conditions["AwaitingResolution"]["message"]
    (back,) = status["dispatches"]  # the lost dispatch, back from the ledger
    assert back["attemptId"] == dispatch["attemptId"]
    assert back["verb"] == "shutdown" and back["outcome"] == "indeterminate"
    assert back["detail"].startswith("put back from the ledger: the status lost shutdown "
                                     "attempt 1")
    regressions = [a for a in w.audits() if a.get("outcome") == "regression"]
    assert len(regressions) == 1
    (record,) = regressions
    assert record["maintenance"] == name and record["node"] == "w1"
    assert "the status lost shutdown attempt 1" in record["detail"]
    # the executor as the API server authenticated it, on its own behalf
    assert (record["actor"], record["via"]) == (EXECUTOR, "kubernetes")
    assert not record.get("recordedBy")
    (event,) = [e for e in w.api.objects("v1/events")
                if e["involvedObject"].get("name") == name and "regression" in e["message"]]
    assert event["metadata"]["namespace"] == OPS
    # again: parked already, audited once, still nothing sent
    w.run()
    assert w.sent() == [["shutdown", "w1"]]
    assert len([a for a in w.audits() if a.get("outcome") == "regression"]) == 1
