"""The crash test: ``maintenance run`` in a subprocess, SIGKILLed at each phase, restarted.

The process kills itself with SIGKILL right after the named point is committed
(``POWERPLANE_CRASH_AT``), so every phase (and the gap between persisting a dispatch and
sending it, and between sending and recording the outcome) is hit deterministically.
The simulated channel's ``state_file`` counts every dispatch across processes and keeps a
power transition running across a restart (a rebooting machine comes back on time).

Every test runs in both worlds (``lifecycle_worlds``): the simulated cluster, and the
kubernetes cluster and longhorn storage ports on a seeded kmock API server this process
serves to the runners' processes, with a kubelet thread following the machines' state file.
On the kubernetes store a request is ``Pending`` until the runner admits it: the admission's
own points (``admission:locked``, ``admission:recorded``) are hit there too, and a runner
killed at either, restarted, admits the request once (one request record, one verb sent).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle_support import ceremony
from lifecycle_worlds import WORLDS, KubernetesWorld, SimulatedWorld, make_world

from powerplane import PowerHost
from powerplane.config import load_config
from powerplane.lifecycle import Lifecycle, Phase, lifecycle_config, open_store

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"


World = SimulatedWorld | KubernetesWorld


@pytest.fixture(params=[pytest.param(w, marks=[pytest.mark.slow] if w == "kubernetes" else [])
                        for w in WORLDS])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    made = make_world(str(request.param), tmp_path)
    try:
        yield made
    finally:
        made.close()  # kubernetes: every request granted to the operator


def write_config(tmp: Path, world: World, *, blind: bool = False) -> Path:
    """``blind``: the channel publishes no boot marker and cannot see power off."""
    lab: dict[str, Any] = {
        "type": "simulated",
        "machines": {"cp1": "on", "cp2": "on", "cp3": "on", "w1": "on"},
        "state_file": str(tmp / "machines.json"),
        "transition_ms": 300,  # a reboot really takes the node away for a while
    }
    cluster: dict[str, Any] = {"type": "simulated", "pods": {"w1": ["web-1", "web-2"]},
                               "state_file": str(tmp / "cluster.json")}
    if blind:  # no boot marker anywhere: neither the channel nor the cluster has one
        lab.update(boot_marker=False, readback="on-only")
        cluster["boot_id"] = False
    cfg: dict[str, Any] = {
        "channels": {"lab": lab},
        "nodes": {
            **{cp: {"labels": {"node-role.kubernetes.io/control-plane": ""},
                    "channels": [{"channel": "lab", "target": cp}]}
               for cp in ("cp1", "cp2", "cp3")},
            "w1": {"channels": [{"channel": "lab", "target": "w1"}]},
        },
        "lifecycle": {
            "store": "lifecycle.db",
            "cluster": cluster,
            "tick_s": 0.02,
            "readback_window_s": 2,
            "readback_cadence_s": 0.02,
            "settle_window_s": 0.5,
        },
    }
    cfg = world.configure(cfg)
    world.start_kubelet()
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def powerplane(config: Path, *args: str, crash_at: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CRASH_AT"}
    if crash_at:
        env["POWERPLANE_CRASH_AT"] = crash_at
    proc = subprocess.run(
        [sys.executable, "-c", RUN, "--config", str(config), *args],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    return proc.returncode


def request(config: Path, intent: str) -> str:
    async def go() -> str:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                return (await lc.request("w1", intent, ceremony("w1"))).name
            finally:
                lc.close()
                for port in (lc.ports.cluster, lc.ports.storage):
                    aclose = getattr(port, "aclose", None)
                    if aclose is not None:
                        await aclose()

    return asyncio.run(go())


def sent(tmp: Path) -> list[list[str]]:
    """Every dispatch the simulated channel received, across all processes."""
    path = tmp / "machines.json"
    if not path.exists():  # written on the first dispatch
        return []
    return list(json.loads(path.read_text())["dispatches"])


def load(tmp: Path, name: str) -> Any:
    """The maintenance and the audit trail, from the store the deployment names."""
    deployment = load_config(tmp / "powerplane.yaml")
    store = open_store(lifecycle_config(deployment.lifecycle, deployment.source),
                       deployment.source, create=False)
    try:
        return store.get(name), store.audit()
    finally:
        store.close()


def ledger(tmp: Path, m: Any) -> Any:
    """The dispatch ledger of ``m``, from the store the deployment names."""
    deployment = load_config(tmp / "powerplane.yaml")
    store = open_store(lifecycle_config(deployment.lifecycle, deployment.source),
                       deployment.source, create=False)
    try:
        return store.ledger(m)  # type: ignore[attr-defined]
    finally:
        store.close()


REBOOT_PATH = [Phase.CORDONED, Phase.DRAINING, Phase.DRAINED, Phase.REBOOTING,
               Phase.RETURNING, Phase.COMPLETE]


def admitted(world: World) -> list[Phase]:
    """The history's admission: ``Pending -> Requested`` where the runner admits requests
    (the kubernetes store), nothing where the store made it ``Requested``."""
    return [Phase.REQUESTED] if world.created is Phase.PENDING else []


@pytest.mark.parametrize("point", [
    # no "phase:Drained": a power intent's Drained is written with its dispatch's record
    # (one write), so that point is "dispatch-recorded:reboot", tested on its own below;
    # no "phase:Returning": after an observed reboot it is written with Complete
    "phase:Cordoned", "phase:Draining", "dispatch-sent:reboot",
    "phase:Rebooting", "phase:Complete",
])
def test_sigkill_at_each_phase_of_a_reboot_sends_exactly_one(
    tmp_path: Path, world: World, point: str,
) -> None:
    config = write_config(tmp_path, world)
    name = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle", crash_at=point) \
        == -signal.SIGKILL
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert [t.to for t in m.status.history] == admitted(world) + REBOOT_PATH
    assert sent(tmp_path) == [["reboot", "w1"]]
    assert len(m.status.dispatches) == 1
    assert m.status.conditions["RebootObserved"].status == "True"
    assert [a.action.value for a in audit] == ["servers:reboot"]


def test_sigkill_between_persisting_and_sending_settles_by_the_boot_marker(
    tmp_path: Path, world: World,
) -> None:
    """The restart finds a dispatch with no outcome: the boot marker is unchanged and the
    node stayed ready through the settle window, so it was not applied and is sent once."""
    config = write_config(tmp_path, world)
    name = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle",
                      crash_at="dispatch-recorded:reboot") == -signal.SIGKILL
    m, _ = load(tmp_path, name)
    assert m.phase is Phase.DRAINED and m.status.dispatches[0].outcome is None
    before = m.status.dispatches[0].before
    assert (before.boot_marker, before.boot_marker_source) == ("w1-boot-1", "cluster")
    assert sent(tmp_path) == []
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert sent(tmp_path) == [["reboot", "w1"]]  # exactly one applied at the channel
    first, second = m.status.dispatches
    assert (first.outcome.value, first.settled_by) == ("not-applied", "evidence")
    assert "boot marker still w1-boot-1" in first.detail
    assert (second.attempt, second.outcome.value) == (2, "accepted")
    assert m.status.conditions["RebootObserved"].status == "True"
    assert "w1-boot-1 -> w1-boot-2" in m.status.conditions["RebootObserved"].message
    assert [a.action.value for a in audit] == ["servers:reboot"]


def test_sigkill_between_the_ledger_and_the_send_settles_by_evidence_once(
    tmp_path: Path, world: World,
) -> None:
    """Killed after the dispatch is in the ledger and before it leaves: the restart settles
    it by evidence (not applied), records that in the ledger, and sends attempt 2 once."""
    config = write_config(tmp_path, world)
    name = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle",
                      crash_at="dispatch-ledgered:reboot") == -signal.SIGKILL
    assert sent(tmp_path) == []
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, _ = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert sent(tmp_path) == [["reboot", "w1"]]
    assert [(d.attempt, d.outcome.value) for d in m.status.dispatches] == [
        (1, "not-applied"), (2, "accepted")]
    assert not m.is_true("StatusRegressed")
    entries = ledger(tmp_path, m)
    assert [(e.kind, e.attempt) for e in entries] == [
        ("dispatch", 1), ("not-applied", 1), ("dispatch", 2)]


def test_sigkill_between_persisting_and_sending_a_shutdown_settles_by_readback(
    tmp_path: Path, world: World,
) -> None:
    config = write_config(tmp_path, world)
    name = request(config, "shutdown")
    assert powerplane(config, "maintenance", "run", "--until-idle",
                      crash_at="dispatch-recorded:shutdown") == -signal.SIGKILL
    assert load(tmp_path, name)[0].status.dispatches[0].before.power == "on"
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, _ = load(tmp_path, name)
    assert m.phase is Phase.POWERED_OFF
    assert sent(tmp_path) == [["shutdown", "w1"]]
    assert json.loads((tmp_path / "machines.json").read_text())["machines"]["w1"] == "off"
    assert [d.outcome.value for d in m.status.dispatches] == ["not-applied", "accepted"]
    assert m.status.conditions["PowerOffConfirmed"].status == "True"


@pytest.mark.parametrize("point", [
    "phase:Drained", "dispatch-sent:shutdown", "phase:PoweredOff", "dispatch-recorded:power-on",
    "dispatch-sent:power-on", "phase:Returning",
])
def test_sigkill_around_shutdown_and_power_on(
    tmp_path: Path, world: World, point: str,
) -> None:
    config = write_config(tmp_path, world)
    name = request(config, "shutdown")
    first = powerplane(config, "maintenance", "run", "--until-idle", crash_at=point)
    if first == -signal.SIGKILL:
        assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    assert load(tmp_path, name)[0].phase is Phase.POWERED_OFF
    assert powerplane(config, "maintenance", "return", "w1", "--reason", "PSU replaced ok") == 0
    second = powerplane(config, "maintenance", "run", "--until-idle", crash_at=point)
    assert (first == -signal.SIGKILL) != (second == -signal.SIGKILL)
    if second == -signal.SIGKILL:
        assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert sent(tmp_path) == [["shutdown", "w1"], ["power-on", "w1"]]
    assert m.status.powered_off_at is not None
    assert [a.action.value for a in audit] == [
        "servers:shutdown", "servers:uncordon", "servers:power-on"]


def resolve(config: Path, *args: str) -> int:
    return powerplane(config, "maintenance", "resolve", "w1", *args,
                      "--reason", "checked at the rack console", "--on-behalf-of", "carol")


@pytest.mark.parametrize("intent", ["reboot", "shutdown"])
def test_blind_channel_parks_and_not_applied_sends_exactly_once(
    tmp_path: Path, world: World, intent: str,
) -> None:
    config = write_config(tmp_path, world, blind=True)
    name = request(config, intent)
    assert powerplane(config, "maintenance", "run", "--until-idle",
                      crash_at=f"dispatch-recorded:{intent}") == -signal.SIGKILL
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, _ = load(tmp_path, name)
    assert m.phase is Phase.DRAINED
    assert m.status.conditions["AwaitingResolution"].status == "True"
    assert sent(tmp_path) == []
    assert resolve(config, "--not-applied") == 2  # the typed node name is missing
    assert resolve(config, "--not-applied", "--confirm-node", "w1") == 0
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert sent(tmp_path) == [[intent, "w1"]]
    assert m.phase is (Phase.COMPLETE if intent == "reboot" else Phase.POWERED_OFF)
    assert [d.outcome.value for d in m.status.dispatches] == ["not-applied", "accepted"]
    assert [a.action.value for a in audit] == [f"servers:{intent}",
                                               "servers:maintenance-resolve"]
    # the actor is the OS user running the command; the text it added is recorded beside it
    assert (audit[1].actor, audit[1].on_behalf_of) == (world.user, "carol")


def test_blind_channel_resolved_applied_completes_without_sending(
    tmp_path: Path, world: World,
) -> None:
    config = write_config(tmp_path, world, blind=True)
    name = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle",
                      crash_at="dispatch-recorded:reboot") == -signal.SIGKILL
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    assert resolve(config, "--applied", "--confirm-node", "w1") == 0
    assert resolve(config, "--applied", "--confirm-node", "w1") == 2  # already resolved
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert sent(tmp_path) == []
    assert m.status.dispatches[0].settled_by == f"person:{world.user}"
    assert m.status.conditions["RebootObserved"].status == "Unknown"
    assert [a.action.value for a in audit] == ["servers:reboot", "servers:maintenance-resolve"]


# -- admission (the kubernetes store) -------------------------------------------------------
@pytest.fixture
def kube_world(tmp_path: Path) -> Iterator[KubernetesWorld]:
    """The kubernetes world on the kubernetes store: requests wait for the runner's admission."""
    made = KubernetesWorld(tmp_path)
    try:
        yield made
    finally:
        made.close()


def by_hand(world: KubernetesWorld, name: str, node: str, intent: str) -> None:
    """POST a complete request as ``kubectl apply`` would, as the world's user (the
    requester the admission policy binds): no status, no request record."""
    import urllib.request

    from powerplane_kubernetes.crd import GROUP, KIND, PLURAL, VERSION

    spec = {"node": node, "intent": intent, "reason": "kernel update for CVE",
            "requestedBy": world.user, "ackPreflight": True, "confirmNode": node}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name},
            "spec": spec}
    req = urllib.request.Request(f"{world.api.url}/apis/{GROUP}/{VERSION}/{PLURAL}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization":
                                              f"Bearer {world.api.issue_token(world.user)}"})
    with urllib.request.urlopen(req, timeout=10) as answer:
        assert answer.status == 201


def lock_holder(world: KubernetesWorld, node: str) -> str | None:
    from powerplane_kubernetes.store import lock_name

    lease = world.api.object("coordination.k8s.io/v1/leases", "powerplane-system",
                             lock_name(node)) or {}
    found = (lease.get("spec") or {}).get("holderIdentity")
    return str(found) if found else None


def node_writes(world: KubernetesWorld) -> list[Any]:
    return [r for r in world.api.requests if "/nodes/" in r.path
            and r.method in ("PATCH", "PUT", "POST")]


@pytest.mark.slow
@pytest.mark.parametrize("point", ["admission:locked", "admission:recorded"])
@pytest.mark.parametrize("made_by", ["request", "hand"])
def test_sigkill_in_admission_admits_the_request_once(
    tmp_path: Path, kube_world: KubernetesWorld, point: str, made_by: str,
) -> None:
    """A runner SIGKILLed after taking the node's lock for a request (``admission:locked``)
    or after making its request record durable (``admission:recorded``): the request is
    still ``Pending`` (no phase claims an admission not written), holding the node's lock,
    nothing done to the node or the machine; restarted, the runner admits it (its own lock)
    and carries it out: one request record (the requester's, or the one the executor wrote
    for a creator that wrote none), one reboot."""
    config = write_config(tmp_path, kube_world)
    if kube_world.created is not Phase.PENDING:
        pytest.skip("the kubernetes store is not registered: no admission by the runner")
    if made_by == "hand":
        name = "w1-reboot-by-hand"
        by_hand(kube_world, name, "w1", "reboot")
    else:
        name = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle", crash_at=point) \
        == -signal.SIGKILL
    m, audit = load(tmp_path, name)
    assert (m.phase, m.status.history) == (Phase.PENDING, [])
    assert lock_holder(kube_world, "w1") == name
    recorded = 0 if made_by == "hand" and point == "admission:locked" else 1
    assert [a.action.value for a in audit] == ["servers:reboot"] * recorded
    assert sent(tmp_path) == [] and node_writes(kube_world) == []
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    m, audit = load(tmp_path, name)
    assert m.phase is Phase.COMPLETE
    assert [t.to for t in m.status.history] == [Phase.REQUESTED, *REBOOT_PATH]
    assert sent(tmp_path) == [["reboot", "w1"]]
    assert len(m.status.dispatches) == 1
    assert [(a.action.value, a.actor, a.maintenance) for a in audit] == [
        ("servers:reboot", kube_world.user, name)]


@pytest.mark.slow
@pytest.mark.parametrize("point", ["admission:locked", "admission:recorded"])
def test_sigkill_in_admission_with_a_second_request_loses_neither(
    tmp_path: Path, kube_world: KubernetesWorld, point: str,
) -> None:
    """A runner SIGKILLed in the admission of one request while a second request for the
    same node waits: restarted, exactly one is carried out (the node's lock decides which),
    the other is ``Refused`` with the reason naming it; neither is left ``Pending``, one
    verb is sent."""
    config = write_config(tmp_path, kube_world)
    if kube_world.created is not Phase.PENDING:
        pytest.skip("the kubernetes store is not registered: no admission by the runner")
    first = request(config, "reboot")
    assert powerplane(config, "maintenance", "run", "--until-idle", crash_at=point) \
        == -signal.SIGKILL
    second = request(config, "reboot")  # a pending request holds nothing at request time
    assert powerplane(config, "maintenance", "run", "--until-idle") == 0
    (a, _), (b, audit) = load(tmp_path, first), load(tmp_path, second)
    done, refused = (a, b) if a.phase is Phase.COMPLETE else (b, a)
    assert (done.phase, refused.phase) == (Phase.COMPLETE, Phase.REFUSED)
    assert done.name == first  # the lock the dead admission took is its own: taken up again
    assert f"already has an active maintenance: {done.name}" in \
        (refused.status.refusal_reason or "")
    assert [t.to for t in refused.status.history] == [Phase.REFUSED]
    assert sent(tmp_path) == [["reboot", "w1"]]
    assert sorted(r.maintenance or "" for r in audit if r.action.value == "servers:reboot") \
        == sorted([first, second])  # each request's record, once
