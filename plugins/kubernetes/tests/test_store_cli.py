"""``powerplane maintenance`` against the cluster: with ``lifecycle.store: {type: kubernetes,
kubeconfig: F}`` the CLI's request, status, list, run, return and abandon read and write
NodeMaintenance objects on the (kmock) API server; a request is ``Pending`` until ``maintenance
run`` admits it, its requester the user the API server names; a second request for an
admitted node is refused (exit 2) as with SQLite; the guard of a direct verb sees the
maintenance through the same store; an admission that died holding the node's lock blocks
the node no longer than the lock's duration, and the request it was admitting is refused
visibly, never lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from powerplane import PowerHost, load_config
from powerplane.authority.identity import local_identity
from powerplane.cli import cli
from powerplane.lifecycle import Lifecycle
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.apiserver import KubeApiServer

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
NMS = "powerplane.io/v1alpha1/nodemaintenances"
RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
STORE_NS = "powerplane-system"
"""``lifecycle.store.namespace`` (the default)."""
USER = "alice"
"""Who the kubeconfig authenticates as: the requester the API server names (not the OS user)."""


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        # alice requests, returns and abandons (powerplane-maintainer and its locks Role;
        # powerplane-admin, the servers verbs the admission policy checks) and runs
        # `maintenance run`, which acts as the operator does (its ClusterRole and locks Role)
        server.grant(USER, m.maintainer_role(), m.maintainer_lock_role(STORE_NS),
                     m.people_roles()[0], m.cluster_role(), m.operator_lock_role(STORE_NS))
        yield server


@pytest.fixture
def workdir(api: KubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    api.write_kubeconfig(tmp_path / "kubeconfig", user=USER, groups=["plant-eng"])
    config = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {"m1": "on", "m2": "on", "m3": "on", "m4": "on"},
                             "state_file": "./lab-state.json"}},
        "nodes": {
            **{f"cp-{i}": {"labels": {"node-role.kubernetes.io/control-plane": ""},
                           "channels": [{"channel": "lab", "target": f"m{i}"}]}
               for i in (1, 2, 3)},
            "node-1": {"channels": [{"channel": "lab", "target": "m4"}]},
        },
        "lifecycle": {
            "store": {"type": "kubernetes", "kubeconfig": "kubeconfig"},
            "cluster": {"type": "simulated", "state_file": "./cluster-state.json"},
        },
    }
    (tmp_path / "powerplane.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POWERPLANE_CONFIG", raising=False)
    monkeypatch.delenv("POWERPLANE_ACTOR", raising=False)  # refused: the OS user asks
    return tmp_path


def run(*argv: str) -> Result:
    return CliRunner().invoke(cli, list(argv))


def test_request_status_list_run_return_through_the_cluster(
        api: KubeApiServer, workdir: Path) -> None:
    res = run("maintenance", "request", "node-1", "--intent", "cordon",
              "--reason", "rack move today", "--confirm-node", "node-1", "--ack-preflight")
    assert res.exit_code == 0, res.output
    (obj,) = api.objects(NMS)
    name = obj["metadata"]["name"]
    assert obj["spec"]["node"] == "node-1"
    # the requester is who the API server says (a SelfSubjectReview), not the OS user
    assert obj["spec"]["requestedBy"] == USER != local_identity().user
    assert obj["spec"]["requesterGroups"] == ["plant-eng", "system:authenticated"]
    assert "status" not in obj  # Pending: the executor admits it
    assert not (workdir / "powerplane.db").exists()  # nothing went to SQLite

    status = run("maintenance", "status", "node-1", "-o", "json")
    assert status.exit_code == 0, status.output
    shown = json.loads(status.output)
    assert (shown["name"], shown["phase"]) == (name, "Pending")
    assert shown["reason"] == "rack move today"

    listed = run("maintenance", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [m["name"] for m in json.loads(listed.output)["maintenances"]] == [name]

    ran = run("maintenance", "run", "--until-idle")
    assert ran.exit_code == 0, ran.output
    admitted = json.loads(run("maintenance", "status", name, "-o", "json").output)
    assert admitted["phase"] == "Cordoned"

    again = run("maintenance", "request", "node-1", "--intent", "cordon",
                "--reason", "a second request", "--confirm-node", "node-1", "--ack-preflight")
    assert again.exit_code == 2, again.output
    assert f"already has an active maintenance: {name}" in again.output

    back = run("maintenance", "return", "node-1", "--reason", "moved to rack 4")
    assert back.exit_code == 0, back.output
    assert run("maintenance", "run", "--until-idle").exit_code == 0
    final = json.loads(run("maintenance", "list", "--all", "-o", "json").output)
    assert [(m["name"], m["phase"]) for m in final["maintenances"]] == [(name, "Complete")]
    assert json.loads(run("maintenance", "list", "-o", "json").output)["maintenances"] == []
    # status went through the status subresource; the return request through the main one
    assert any(r.path == f"{NM}/{name}/status" for r in api.requests_to("PUT"))
    stored = api.object("powerplane.io/v1alpha1/nodemaintenances", None, name)
    assert stored is not None and stored["requests"]["returnRequest"]["reason"] == "moved to rack 4"
    actions = [o["spec"]["action"] for o in sorted(
        api.objects("powerplane.io/v1alpha1/maintenanceaudits"),
        key=lambda o: int(o["metadata"]["resourceVersion"]))]
    assert actions == ["servers:cordon", "servers:uncordon"]


def test_abandon_and_the_guard_of_a_direct_verb_read_the_cluster(
        api: KubeApiServer, workdir: Path) -> None:
    res = run("maintenance", "request", "node-1", "--intent", "drain",
              "--reason", "disk swap in bay 2", "--confirm-node", "node-1", "--ack-preflight")
    assert res.exit_code == 0, res.output
    direct = run("invoke", "node-1", "reboot", "--reason", "just do it right now", "--yes")
    assert direct.exit_code == 3, direct.output
    assert "under maintenance node-1-drain-" in direct.output
    gone = run("maintenance", "abandon", "node-1", "--reason", "not today after all")
    assert gone.exit_code == 0, gone.output
    shown = json.loads(run("maintenance", "status", "node-1", "-o", "json").output)
    assert shown["abandoned"]["by"] == USER
    assert run("maintenance", "run", "--until-idle").exit_code == 0
    done = json.loads(run("maintenance", "status", "node-1", "-o", "json").output)
    assert done["phase"] == "Refused"  # abandoned before it was admitted: nothing was done
    assert shown["abandoned"]["reason"] == "not today after all"


def test_a_store_without_its_crd_fails_naming_the_api_server(tmp_path: Path,
                                                             workdir: Path) -> None:
    with KubeApiServer(crds=()) as bare:
        bare.write_kubeconfig(workdir / "kubeconfig")
        res = run("maintenance", "list")
    assert res.exit_code == 1, res.output
    assert "lifecycle store kubernetes http://127.0.0.1:" in res.output
    assert "nodemaintenances.powerplane.io" in res.output
    assert "Traceback" not in res.output


def admit_only(api: KubeApiServer, config: Path, name: str) -> dict[str, Any]:
    """An executor admitting ``name`` alone (as the operator does on its watch event): its
    status after one reconcile."""
    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                await lc.reconcile(name)
            finally:
                lc.close()

    asyncio.run(go())
    return status_of(api, name)


def status_of(api: KubeApiServer, name: str) -> dict[str, Any]:
    """The stored status of ``name`` (no status: ``Pending``)."""
    obj = api.object(NMS, None, name)
    assert obj is not None
    found: dict[str, Any] = obj.get("status") or {"phase": "Pending"}
    return found


@pytest.mark.slow
def test_an_admission_killed_holding_the_lock_blocks_the_node_only_until_it_expires(
        api: KubeApiServer, workdir: Path) -> None:
    """``maintenance run`` SIGKILLed between taking the node's lock Lease for a request and
    writing its status (``admission:locked``): the request stays ``Pending`` holding the
    node until the lock's duration (1 s here) has passed with nobody renewing it; meanwhile
    a newer request admitted on its own is refused visibly, naming it; then one is
    admitted, and the dead admission's request is refused visibly, never lost."""
    config = workdir / "powerplane.yaml"
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["lifecycle"]["store"]["lock_duration_s"] = 1
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    argv = ["maintenance", "request", "node-1", "--intent", "cordon", "--reason",
            "rack move today", "--confirm-node", "node-1", "--ack-preflight"]
    assert run(*argv).exit_code == 0
    (obj,) = api.objects(NMS)
    dead = obj["metadata"]["name"]
    env = {**{k: v for k, v in os.environ.items() if k != "POWERPLANE_ACTOR"},
           "POWERPLANE_CRASH_AT": "admission:locked"}
    proc = subprocess.run([sys.executable, "-c", RUN, "maintenance", "run", "--until-idle"],
                          env=env, cwd=workdir, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert status_of(api, dead) == {"phase": "Pending"}  # the executor died before its status
    lease = api.object("coordination.k8s.io/v1/leases", "powerplane-system",
                       "nodemaintenance.node-1")
    assert lease is not None and lease["spec"]["holderIdentity"] == dead
    refused: list[str] = []
    admitted = None
    deadline = time.monotonic() + 60
    while admitted is None and time.monotonic() < deadline:
        before = {o["metadata"]["name"] for o in api.objects(NMS)}
        assert run(*argv).exit_code == 0  # a pending request holds nothing at request time
        (newer,) = {o["metadata"]["name"] for o in api.objects(NMS)} - before
        status = admit_only(api, config, newer)
        if status["phase"] == "Refused":
            assert f"already has an active maintenance: {dead}" in status["refusalReason"]
            refused.append(newer)
        else:
            assert status["phase"] in ("Requested", "Cordoned"), status
            admitted = newer
        time.sleep(0.1)
    assert admitted is not None, f"the node stayed blocked; refused: {refused}"
    lease = api.object("coordination.k8s.io/v1/leases", "powerplane-system",
                       "nodemaintenance.node-1")
    assert lease is not None and lease["spec"]["holderIdentity"] == admitted
    assert lease["spec"]["leaseTransitions"] == 1
    # the request whose admission died is not lost: the next pass refuses it, visibly
    assert run("maintenance", "run", "--until-idle").exit_code == 0
    status = status_of(api, dead)
    assert status["phase"] == "Refused"
    assert f"already has an active maintenance: {admitted}" in status["refusalReason"]
    assert status_of(api, admitted)["phase"] == "Cordoned"
    assert all(status_of(api, n)["phase"] == "Refused" for n in refused)
    assert {o["metadata"]["name"] for o in api.objects(NMS)} == {dead, admitted, *refused}
