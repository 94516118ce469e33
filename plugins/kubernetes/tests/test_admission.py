"""Admission by the executor: any ``NodeMaintenance``, by any creator, is admitted or refused
visibly. A request POSTed by hand (``kubectl apply``-style, no status) for a cordon reaches
``Cordoned`` by one PATCH of the node; one below quorum is ``Refused`` with the numbers;
one the executor cannot vouch for (its identity binding not installed), for an unknown
node, a busy node, an incomplete ceremony, a requester the policy denies: each ``Refused``
with its reason, nothing executed. A request its creator left without its request record
is admitted with the record written once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from powerplane import PowerHost, load_config
from powerplane.lifecycle import Lifecycle, Phase
from powerplane_kubernetes.audit import request_record_name
from powerplane_kubernetes.crd import AUDIT_PLURAL, GROUP, PLURAL, REQUESTER_BINDING, VERSION
from powerplane_kubernetes.operator.manifests import people_roles
from powerplane_kubernetes.testing.apiserver import KubeApiServer

CP = "node-role.kubernetes.io/control-plane"
NM = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


def write_config(tmp: Path, kubeconfig: Path, *, roles: dict[str, Any] | None = None) -> Path:
    nodes = {n: {"labels": {CP: ""} if n.startswith("cp") else {},
                 "channels": [{"channel": "lab", "target": n}]}
             for n in ("cp1", "cp2", "cp3", "w1", "w2")}
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {n: "on" for n in nodes},
                             "state_file": str(tmp / "machines.json")}},
        "nodes": nodes,
        "lifecycle": {
            "store": {"type": "kubernetes", "kubeconfig": str(kubeconfig)},
            "cluster": {"type": "kubernetes", "kubeconfig": str(kubeconfig)},
            "tick_s": 0.01, "readback_window_s": 2, "readback_cadence_s": 0.01,
        },
    }
    if roles is not None:
        (tmp / "roles.yaml").write_text(yaml.safe_dump(roles))
        cfg["policy"] = {"type": "local", "file": "roles.yaml"}
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def seed_nodes(api: KubeApiServer, *, not_ready: tuple[str, ...] = ()) -> None:
    for n in ("cp1", "cp2", "cp3", "w1", "w2"):
        api.add_node(n, labels={CP: ""} if n.startswith("cp") else {})
        if n in not_ready:
            api.set_ready(n, False)


def by_hand(api: KubeApiServer, name: str, spec: dict[str, Any]) -> None:
    """POST a NodeMaintenance as ``kubectl apply`` would, as the user ``spec.requestedBy``
    names (bound to ``powerplane-admin`` as printed: the admission policy checks the
    intent's verb): the CRD's required fields (and whatever else the creator chose), no
    status, no label, no annotation."""
    import urllib.request

    user = spec["requestedBy"]
    api.grant(user, people_roles()[0])  # ADMIN
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeMaintenance",
            "metadata": {"name": name}, "spec": spec}
    req = urllib.request.Request(api.url + NM, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {api.issue_token(user)}"},
                                 method="POST")
    with urllib.request.urlopen(req, timeout=10) as answer:
        assert answer.status == 201


def run_until_idle(config: Path) -> None:
    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                await asyncio.wait_for(lc.run(until_idle=True), 60)
            finally:
                lc.close()

    asyncio.run(go())


def status(api: KubeApiServer, name: str) -> dict[str, Any]:
    obj = api.object(f"{GROUP}/{VERSION}/{PLURAL}", None, name)
    assert obj is not None
    found: dict[str, Any] = obj.get("status") or {}
    return found


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


def test_a_cordon_posted_by_hand_reaches_cordoned_by_one_patch_of_the_node(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    seed_nodes(api)
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
    by_hand(api, "w1-cordon", {"node": "w1", "intent": "cordon", "reason": "replace the PSU",
                               "requestedBy": "erin"})
    run_until_idle(config)
    done = status(api, "w1-cordon")
    assert done["phase"] == Phase.CORDONED.value, done
    node_writes = [r for r in api.writes() if "/nodes/" in r.path]
    assert [(r.method, r.body) for r in node_writes] == [
        ("PATCH", {"spec": {"unschedulable": True}})]
    assert done["preflight"]["pods"] == []  # the creator took none: taken at admission
    [record] = [r for r in api.objects(f"{GROUP}/{VERSION}/{AUDIT_PLURAL}")
                if r["metadata"]["name"] == request_record_name("w1-cordon")]
    assert (record["spec"]["actor"], record["spec"]["action"]) == ("erin", "servers:cordon")


def test_a_request_below_quorum_is_refused_with_the_numbers(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    seed_nodes(api, not_ready=("cp2",))
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
    by_hand(api, "cp1-reboot", {"node": "cp1", "intent": "reboot", "reason": "kernel update",
                                "requestedBy": "erin", "ackPreflight": True,
                                "confirmNode": "cp1"})
    run_until_idle(config)
    done = status(api, "cp1-reboot")
    assert done["phase"] == Phase.REFUSED.value
    assert done["refusal"] == {"members": 3, "ready": 2, "quorum": 2, "margin": 0} \
        or done["refusal"]["quorum"] == 2
    assert "quorum" in done["refusalReason"]
    assert not [r for r in api.writes() if "/nodes/" in r.path]


@pytest.mark.parametrize(("spec", "words"), [
    ({"node": "w9", "intent": "cordon", "reason": "replace the PSU"},
     "node 'w9' is not in the deployment"),
    ({"node": "w1", "intent": "cordon", "reason": "psu"},
     "the request's ceremony is incomplete: the reason must have at least"),
    ({"node": "w1", "intent": "reboot", "reason": "replace the PSU"},
     "servers:reboot needs acknowledgement of the pre-flight impact"),
    ({"node": "w1", "intent": "reboot", "reason": "replace the PSU", "ackPreflight": True,
      "confirmNode": "w2"}, "the typed node name 'w2' did not match w1"),
])
def test_a_request_the_product_refuses_is_refused_with_its_reason(
    api: KubeApiServer, tmp_path: Path, spec: dict[str, Any], words: str,
) -> None:
    seed_nodes(api)
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
    by_hand(api, "m", {**spec, "requestedBy": "erin"})
    run_until_idle(config)
    done = status(api, "m")
    assert done["phase"] == Phase.REFUSED.value
    assert words in done["refusalReason"]
    assert not [r for r in api.writes() if "/nodes/" in r.path]


def test_a_second_request_for_a_busy_node_is_refused(api: KubeApiServer, tmp_path: Path) -> None:
    seed_nodes(api)
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
    by_hand(api, "first", {"node": "w1", "intent": "cordon", "reason": "replace the PSU",
                           "requestedBy": "erin"})
    run_until_idle(config)
    by_hand(api, "second", {"node": "w1", "intent": "cordon", "reason": "replace the fan",
                            "requestedBy": "erin"})
    run_until_idle(config)
    assert status(api, "first")["phase"] == Phase.CORDONED.value
    second = status(api, "second")
    assert second["phase"] == Phase.REFUSED.value
    assert "first" in second["refusalReason"]


def test_the_executor_refuses_every_request_while_the_identity_binding_is_missing(
    tmp_path: Path,
) -> None:
    with KubeApiServer(admission=False) as api:
        seed_nodes(api)
        config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
        by_hand(api, "w1-cordon", {"node": "w1", "intent": "cordon",
                                   "reason": "replace the PSU", "requestedBy": "mallory"})
        run_until_idle(config)
        done = status(api, "w1-cordon")
        assert done["phase"] == Phase.REFUSED.value
        assert f"binding {REQUESTER_BINDING} is not installed" in done["refusalReason"]
        assert not [r for r in api.writes() if "/nodes/" in r.path]


def test_a_requester_the_policy_denies_is_refused_and_the_denial_recorded(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    seed_nodes(api)
    roles = {"roles": {"eng": {"allow": ["servers:cordon"]}},
             "bindings": [{"role": "eng", "users": ["erin"]}]}
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"), roles=roles)
    by_hand(api, "w1-drain", {"node": "w1", "intent": "drain", "reason": "replace the PSU",
                              "requestedBy": "erin", "ackPreflight": True})
    run_until_idle(config)
    done = status(api, "w1-drain")
    assert done["phase"] == Phase.REFUSED.value
    assert "denied: user erin (no groups) servers:drain on w1" in done["refusalReason"]
    records = [r["spec"] for r in api.objects(f"{GROUP}/{VERSION}/{AUDIT_PLURAL}")]
    assert [(r["actor"], r["outcome"]) for r in records] == [("erin", "denied")]


def test_a_request_whose_creator_did_not_write_its_record_gets_it_once(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    """The half-written case: ``maintenance request`` POSTed the object and stopped before
    its request record (or a kubectl creator, who never writes one): the executor writes
    it before admitting; the creator's own record, where it exists, is not doubled."""
    seed_nodes(api)
    config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
    by_hand(api, "no-record", {"node": "w1", "intent": "cordon", "reason": "replace the PSU",
                               "requestedBy": "erin"})

    async def with_record() -> str:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                from powerplane.lifecycle import Ceremony

                m = await lc.request("w2", "cordon", Ceremony(reason="replace the PSU"))
                assert m.phase is Phase.PENDING
                return m.name
            finally:
                lc.close()

    made = asyncio.run(with_record())
    run_until_idle(config)
    names = sorted(r["metadata"]["name"] for r in
                   api.objects(f"{GROUP}/{VERSION}/{AUDIT_PLURAL}"))
    assert names == sorted([request_record_name("no-record"), request_record_name(made)])
    assert status(api, "no-record")["phase"] == Phase.CORDONED.value
    assert status(api, made)["phase"] == Phase.CORDONED.value
