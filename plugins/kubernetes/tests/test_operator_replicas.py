"""Operator replicas on two sites, on the enforcing test API server, with the kubernetes
store (issue 36): the holder of a site's Lease is SIGKILLed between the dispatch record
and the send, and another replica takes the site over and settles by evidence.

The cluster is :mod:`cluster_users`' (every identity bound to the roles ``operator
manifests`` prints, RBAC and the admission policies enforced); its nodes are on two sites:
``w1`` (and the control plane) in ``east``, ``w2`` in ``west``. Every replica is ``powerplane
operator run`` in a process of its own as the operator's ServiceAccount (one kubeconfig,
one deployment file, as the pods of one Deployment share them), with the
``kubernetes`` store:

* ``replica-a`` may act for ``east`` only and dies (``POWERPLANE_CRASH_AT``) between the
  record of the reboot (or the shutdown) of ``w1`` and its send: at
  ``dispatch-recorded:<verb>``, the dispatch written to the maintenance's status but not
  yet to the dispatch ledger; or at ``dispatch-ledgered:<verb>``, in both;
* ``replica-b`` may act for ``west`` only; ``replica-c`` for every site: with ``replica-a``
  two replicas may hold ``east``'s Lease, and two ``west``'s.

``replica-a`` is started first and holds ``east`` before the others start, so it is the
one that acts there. ``replica-c`` takes ``east``'s Lease over once ``replica-a`` stops
renewing it, finds the recorded verb with no outcome and its runner dead, and settles it by
evidence: the boot marker unchanged and the node ready through the settle window (a
reboot), the machine read on through it (a shutdown), so not applied (written to the
ledger as such, beside replica-a's own entry where it made one), and sends it once. At
the machines: one verb to ``w1``, one reboot to ``w2``; ``west``'s maintenance, driven by
whichever replica holds its Lease, is not touched by the kill; one audit record per
request.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from cluster_users import EXECUTOR, OPS, cluster
from test_operator import finish, operator

from powerplane_kubernetes.operator.leases import lease_name
from powerplane_kubernetes.testing.apiserver import KubeApiServer

LEASES = "coordination.k8s.io/v1/leases"
TIMINGS = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "0.2",
           "--namespace", OPS]
"""Longer than ``test_operator``'s: on a loaded machine the first holder must not lose
``east`` before it reaches the crash point (the takeover waits out the lease, 6 s)."""


def holder(api: KubeApiServer, site: str) -> str | None:
    """The holder of ``site``'s Lease (None: none yet, or released)."""
    lease = api.object(LEASES, OPS, lease_name(site)) or {}
    found = (lease.get("spec") or {}).get("holderIdentity")
    return str(found) if found else None


EVIDENCE = {"reboot": "boot marker still w1-boot-1 and the node stayed ready through",
            "shutdown": "the machine read on through"}
"""How the survivor shows the dead replica's verb did not take effect: the boot marker (a
reboot), the power read back (a shutdown)."""
ENDS = {"reboot": "Complete", "shutdown": "PoweredOff"}


@pytest.mark.slow
@pytest.mark.parametrize("point", ["dispatch-recorded", "dispatch-ledgered"])
@pytest.mark.parametrize("verb", list(EVIDENCE))
def test_a_replica_killed_between_record_and_send_its_site_taken_over_one_send_each(
        tmp_path: Path, verb: str, point: str) -> None:
    with cluster(tmp_path, sites={"w2": "west"}) as w:
        east = w.request("ada", "w1", verb)
        west = w.request("ada", "w2", "reboot")
        config, kubeconfig = w.config("executor"), w.kubeconfig("executor")
        procs = {"replica-a": operator(config, kubeconfig, "replica-a", *TIMINGS,
                                       "--site", "east", crash_at=f"{point}:{verb}",
                                       timeout_s=240)}
        deadline = time.monotonic() + 120  # replica-a holds east before the others start
        while holder(w.api, "east") != "replica-a" and procs["replica-a"].poll() is None:
            assert time.monotonic() < deadline, "replica-a never held east's Lease"
            time.sleep(0.05)
        procs["replica-b"] = operator(config, kubeconfig, "replica-b", *TIMINGS,
                                      "--site", "west", timeout_s=240)
        procs["replica-c"] = operator(config, kubeconfig, "replica-c", *TIMINGS,
                                      timeout_s=240)
        results = finish(procs, timeout=300)
        logs = {who: err[-3000:] for who, (_, (_, err)) in results.items()}
        assert results["replica-a"][0] == -signal.SIGKILL, logs
        assert results["replica-b"][0] == 0 and results["replica-c"][0] == 0, logs

        # exactly one send per request at the machines
        assert sorted(w.sent()) == sorted([[verb, "w1"], ["reboot", "w2"]])
        assert w.phase(east) == ENDS[verb] and w.phase(west) == "Complete"
        assert w.unschedulable("w1") is (verb == "shutdown")  # off: cordoned until return
        assert not w.unschedulable("w2")

        # east: replica-a's record, settled by evidence by the replica that took it over
        obj = w.object(east)
        assert obj is not None
        first, second = obj["status"]["dispatches"]
        a_pid, c_pid = procs["replica-a"].pid, procs["replica-c"].pid
        assert str(a_pid) in first["runner"].split("/")
        assert (first["verb"], first["attempt"]) == (verb, 1)
        assert (first["outcome"], first["settledBy"]) == ("not-applied", "evidence")
        assert "no answer was recorded (the runner stopped)" in first["detail"]
        assert EVIDENCE[verb] in first["detail"]
        assert str(c_pid) in second["runner"].split("/")
        assert (second["verb"], second["attempt"], second["outcome"]) == (
            verb, 2, "accepted")
        assert "acquired by replica-c (was replica-a)" in logs["replica-c"]
        # the ledger: replica-a's entry where it died after making it; attempt 1 as not
        # applied (the survivor's settling of replica-a's attempt); attempt 2 before its send
        ledger = sorted((e["kind"], e["attempt"], e["attemptId"], e["runner"])
                        for e in w.ledger(east))
        assert ledger == sorted([
            *([("dispatch", 1, first["attemptId"], first["runner"])]
              if point == "dispatch-ledgered" else []),
            ("not-applied", 1, first["attemptId"], first["runner"]),
            ("dispatch", 2, second["attemptId"], second["runner"]),
        ])

        # west: one attempt, sent by the replica that held its Lease, untouched by the kill
        obj = w.object(west)
        assert obj is not None
        (only,) = obj["status"]["dispatches"]
        assert (only["attempt"], only["outcome"], only["settledBy"]) == (
            1, "accepted", "channel")
        assert str(a_pid) not in only["runner"].split("/")
        assert [(e["kind"], e["attempt"]) for e in w.ledger(west)] == [("dispatch", 1)]

        # one audit record per act: each request's, nothing for the crash or the takeover
        for name, node, act in ((east, "w1", verb), (west, "w2", "reboot")):
            (record,) = [a for a in w.audits() if a["maintenance"] == name]
            assert (record["node"], record["action"]) == (node, f"servers:{act}")

        # every replica acted as the operator's ServiceAccount (one kubeconfig, as one
        # Deployment's pods share it); the Leases released at their clean exits
        by_replicas = [r for r in w.api.requests if r.client == "executor"]
        assert by_replicas and {r.user for r in by_replicas} == {EXECUTOR}
        for site in ("east", "west"):
            lease = w.api.object(LEASES, OPS, lease_name(site))
            assert lease is not None and not lease["spec"].get("holderIdentity")
        east_lease = w.api.object(LEASES, OPS, lease_name("east"))
        assert east_lease is not None and east_lease["spec"]["leaseTransitions"] >= 1
