"""Deleting a NodeMaintenance is an abandon, never a silent drop (issue 36), on the enforcing
test API server with ``maintenance run`` as the executor.

At each phase (``Requested``, ``Cordoned``, ``Draining``, ``Drained``, ``Rebooting``,
``PoweredOff``, ``Returning``), two maintenances are taken to it side by side: the one of
``w1`` is deleted by its requester, the one of ``w2`` abandoned by her with ``maintenance
abandon``. The deleted object stays (its finalizer) until the abandon path has run
(``Returning`` -> ``Complete``: the node back in service), then goes; the node is never
cordoned with no object; the machines receive for ``w1`` exactly what they receive for
``w2`` (the deletion sends nothing an abandon from that phase would not); the deletion is
audited (actor ``(deletion)``, recorded by the executor). A deleter who may not abandon a
maintenance of the node is refused by the requester admission policy; a request not
admitted yet, deleted by its own creator, goes at once; one deleted while its admission
runs leaves its node as it found it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_users import EXECUTOR, NM, OPS, REASON, World, cluster

from powerplane.lifecycle import Phase
from powerplane.lifecycle.crash import set_hook
from powerplane.lifecycle.phases import transition
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.crd import FINALIZER
from powerplane_kubernetes.store import KubernetesStore

INTENT = {"Requested": "cordon", "Cordoned": "cordon", "Draining": "drain",
          "Drained": "drain", "Rebooting": "reboot", "PoweredOff": "shutdown",
          "Returning": "shutdown"}
"""The intent that takes a maintenance to each phase (and parks or waits there)."""
SENT = {"Requested": [], "Cordoned": [], "Draining": [], "Drained": [],
        "Rebooting": ["reboot"], "PoweredOff": ["shutdown", "power-on"],
        "Returning": ["shutdown", "power-on"]}
"""What reaches each node's machine in all, from its request to ``Complete``, whether its
maintenance was deleted or abandoned at that phase (the power-on: the return's)."""
PODS = {"w1": ["web-1"], "w2": ["web-2"]}
PDBS = {"web": {"pods": ["web-1", "web-2"], "allowed_disruptions": 0}}


def admitted_only(w: World, name: str) -> None:
    """``Requested`` as a runner that stopped after writing the admission leaves it (the
    executor's store: the node's lock, then the status), before any cordon."""
    store = KubernetesStore(ApiAccess(kubeconfig=str(w.kubeconfig("executor"))),
                            namespace=OPS)
    try:
        m = store.get(name)
        store.lock(m)
        transition(m, Phase.REQUESTED, "admitted (the runner stopped here)")
        store.update(m)
    finally:
        store.close()


def take_to(w: World, phase: str) -> dict[str, str]:
    """A maintenance of ``w1`` and one of ``w2`` (ada's), each in ``phase``."""
    names = {node: w.request("ada", node, INTENT[phase]) for node in ("w1", "w2")}
    if phase == "Requested":
        for name in names.values():
            admitted_only(w, name)
    elif phase in ("Draining", "Rebooting"):
        assert w.kubelet is not None
        if phase == "Rebooting":  # the nodes do not come back until the test says so
            for node in names:
                w.kubelet.not_ready.add(node)
        w.run("--max-passes", "4")
    elif phase == "Returning":
        w.run()
        assert w.kubelet is not None
        for node in names:
            res = w.cli("ada", "maintenance", "return", node, "--reason", REASON)
            assert res.exit_code == 0, res.output
            w.kubelet.not_ready.add(node)  # powered on, not ready yet: Returning waits
        w.run("--max-passes", "4")
    else:
        w.run()
    for name in names.values():
        assert w.phase(name) == phase, w.object(name)
    return names


def verbs_for(w: World, node: str) -> list[str]:
    return [verb for verb, target in w.sent() if target == node]


@pytest.mark.slow
@pytest.mark.parametrize("phase", list(INTENT))
def test_deleting_a_maintenance_abandons_it_as_maintenance_abandon_does(
        tmp_path: Path, phase: str) -> None:
    with cluster(tmp_path, pods=PODS if phase == "Draining" else None,
                 pdbs=PDBS if phase == "Draining" else None) as w:
        names = take_to(w, phase)
        cordoned = phase != "Requested"
        assert w.unschedulable("w1") is cordoned and w.unschedulable("w2") is cordoned
        sent_before = list(w.sent())
        # one who may not abandon a maintenance of w1 may not delete it either
        with w.http("eng") as c:
            answer = c.delete(f"{NM}/{names['w1']}")
        assert answer.status_code == 403, answer.text
        assert answer.json()["message"].endswith(
            f"deleting {names['w1']} abandons it (it has not ended): user eng may not "
            "abandon the maintenance of node w1 (no RBAC rule grants the verb "
            "maintenance-abandon on servers.powerplane.io named it)")
        with w.http("ada") as c:
            answer = c.delete(f"{NM}/{names['w1']}")
        assert answer.status_code == 200, answer.text
        res = w.cli("ada", "maintenance", "abandon", "w2", "--reason", REASON)
        assert res.exit_code == 0, res.output
        kept = w.object(names["w1"])
        assert kept is not None and kept["metadata"].get("deletionTimestamp")
        assert FINALIZER in kept["metadata"]["finalizers"]  # kept until the abandon ran
        assert w.sent() == sent_before  # the deletion itself sends nothing
        assert w.kubelet is not None
        w.kubelet.not_ready.clear()  # the nodes may come back now
        w.run()
        # gone once the abandon path ran; its twin abandoned by hand is Complete
        assert w.object(names["w1"]) is None
        assert w.phase(names["w2"]) == "Complete"
        assert not w.unschedulable("w1") and not w.unschedulable("w2")
        assert verbs_for(w, "w1") == verbs_for(w, "w2") == SENT[phase]
        deletions = [a for a in w.audits() if a["actor"] == "(deletion)"]
        assert len(deletions) == 1
        (record,) = deletions
        assert record["maintenance"] == names["w1"] and record["node"] == "w1"
        assert record["action"] == "servers:maintenance-abandon"
        assert record["recordedBy"] == EXECUTOR
        assert record["detail"].startswith(f"deleted in phase {phase}: ")


@pytest.mark.slow
def test_a_maintenance_deleted_after_it_ended_goes_audited(tmp_path: Path) -> None:
    with cluster(tmp_path) as w:
        name = w.request("ada", "w1", "cordon")
        w.run()
        res = w.cli("ada", "maintenance", "return", "w1", "--reason", REASON)
        assert res.exit_code == 0, res.output
        w.run()
        assert w.phase(name) == "Complete"
        with w.http("eng") as c:  # nothing to abandon: whoever may delete it, may
            assert c.delete(f"{NM}/{name}").status_code == 200
        assert w.object(name) is not None  # the executor lets it go
        w.run()
        assert w.object(name) is None
        (record,) = [a for a in w.audits() if a["actor"] == "(deletion)"]
        assert record["detail"] == "deleted after it ended (Complete): nothing to undo"
        assert record["recordedBy"] == EXECUTOR


def strip_finalizer(w: World, who: str, name: str) -> Any:
    obj = w.object(name)
    assert obj is not None
    obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or []
                                     if f != FINALIZER]
    with w.http(who) as c:
        return c.put(f"{NM}/{name}", json=obj)


@pytest.mark.slow
def test_a_pending_request_deleted_by_its_creator_goes_at_once(tmp_path: Path) -> None:
    with cluster(tmp_path) as w:
        name = w.request("ada", "w1", "cordon")
        assert w.phase(name) == "Pending"
        # not hers: eng may neither take its finalizer off nor delete it
        answer = strip_finalizer(w, "eng", name)
        assert answer.status_code == 403, answer.text
        assert "only the executor removes it (once the abandon ran), or the creator of a " \
               "request not admitted yet; eng is neither" in answer.json()["message"]
        # its creator: nothing was done, so nothing to undo
        assert strip_finalizer(w, "ada", name).status_code == 200
        with w.http("ada") as c:
            assert c.delete(f"{NM}/{name}").status_code == 200
        assert w.object(name) is None
        w.run()
        assert not w.unschedulable("w1") and w.sent() == []


@pytest.mark.slow
def test_a_request_taken_back_while_its_admission_runs_leaves_no_cordon(
        tmp_path: Path) -> None:
    """Its creator takes it back (the finalizer off, then deleted) between the executor's
    read and its first write, after the admission took the node's lock and cordoned it:
    the write finds it gone, and the executor undoes the cordon it made."""
    with cluster(tmp_path) as w:
        name = w.request("ada", "w1", "cordon")
        taken: list[str] = []

        def take_back(point: str) -> None:
            if point == "admission:recorded" and not taken:
                taken.append(point)
                assert strip_finalizer(w, "ada", name).status_code == 200
                with w.http("ada") as c:
                    assert c.delete(f"{NM}/{name}").status_code == 200

        set_hook(take_back)
        try:
            w.run()
        finally:
            set_hook(None)
        assert taken and w.object(name) is None
        assert not w.unschedulable("w1")
        # it did cordon (and then uncordon): the node's PATCHes, as the executor sent them
        patches = [r.body["spec"]["unschedulable"] for r in w.api.requests
                   if r.method == "PATCH" and r.path == "/api/v1/nodes/w1"]
        assert patches == [True, False]
