"""Least privilege of the operator's own run, checked: ``powerplane operator run`` (a
process of its own, its own kubeconfig) drives a reboot requested by a person (``maintenance
request``, another kubeconfig) through the kubernetes cluster port, Longhorn and the
kubernetes store on kmock: the watch, the site Lease, the status writes, the evictions and
Longhorn's updates are the operator's, and so is the node's lock Lease (admission by the
operator); the request and its audit record are the person's, but for a second request
made by hand (``kubectl apply``-style, no record), whose record the operator writes. A
second run has the policy ``{type: kubernetes}`` (the operator's SubjectAccessReviews) and a
channel password that is a ``{k8s:}`` Secret (its ``get``, granted by ``resourceNames``).
Each client's requests are checked against the roles generated for it (``operator
manifests``) with the RBAC checker of ``testing.seed``: every request granted, and every
verb the operator's roles grant used (a verb taken away fails the check).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from powerplane import PowerHost, load_config
from powerplane.lifecycle import Lifecycle
from powerplane.lifecycle.ceremony import Ceremony
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.operator.admission import policies
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_kubernetes.testing.seed import (
    Kubelet,
    Machines,
    channel_machines,
    rbac_attributes,
    seed,
    ungranted,
)

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
CP = "node-role.kubernetes.io/control-plane"
NODES = ("cp1", "cp2", "cp3", "w1")
OPS = "ops"  # the operator's namespace
LOCKS = "maint"  # lifecycle.store.namespace: the node locks and Events
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
TAKE_OVER = {(m.OPERATOR_LOCKS, "get"), (m.OPERATOR_LOCKS, "update")}
"""The node lock's take-over of a finished holder (a read, then a PUT naming its version):
granted for it, and not reached by one maintenance per node, so not asked to be used."""
REREAD = {(m.NAME, "get", "nodemaintenances"), (m.NAME, "get", "maintenancedispatches"),
          (m.NAME, "list", "maintenancedispatches"), (m.NAME, "record", "auditrecorders"),
          (m.OPERATOR_LOCKS, "create", "events")}
"""Granted, and not reached by an uncontended run on this server: the operator's read of one
maintenance after a write lost a race (409) or while its watch is down (its watch feeds
every other read; test_store's watched-store test shows the GET); of a dispatch ledger
entry whose create was a 409 (a retry of its own, or another runner's record); the list of
a maintenance's ledger made before the operator's watch began (kmock's watch replays every
stored object as ``ADDED``, so here the watch delivers it; ``maintenance run``, which keeps
no watch, lists it: test_status_rewrite shows it). ``record`` on the virtual
``auditrecorders`` is asked by the audit admission policy's authorizer, never by a request
(test_audit_actor shows it used); the Events of the records the executor writes itself, a
deletion's or a regression's (test_status_rewrite shows one)."""


def write_config(tmp: Path, who: str, kubeconfig: Path) -> Path:
    access = {"kubeconfig": str(kubeconfig)}
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": dict.fromkeys(NODES, "on"),
                             "state_file": str(tmp / "machines.json"), "transition_ms": 100}},
        "nodes": {n: {"site": "east", "labels": {CP: ""} if n.startswith("cp") else {},
                      "channels": [{"channel": "lab", "target": n}]} for n in NODES},
        "lifecycle": {
            "store": {"type": "kubernetes", "namespace": LOCKS, **access},
            "cluster": {"type": "kubernetes", **access},
            "storage": {"type": "longhorn"},
            "tick_s": 0.02, "readback_window_s": 5, "readback_cadence_s": 0.02,
            "settle_window_s": 0.5,
        },
    }
    path = tmp / f"{who}.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def by_hand(api: KubeApiServer, kubeconfig: Path, name: str, spec: dict[str, Any]) -> None:
    """POST a NodeMaintenance as ``kubectl apply`` would with ``kubeconfig``'s token: the
    spec, no status, no label, no request record."""
    import httpx2

    token = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))["users"][0]["user"]["token"]
    body = {"apiVersion": "powerplane.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": name}, "spec": spec}
    answer = httpx2.post(f"{api.url}/apis/powerplane.io/v1alpha1/nodemaintenances",
                         json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 201, answer.text


def used(requests: list[Any]) -> set[str]:
    return {str(rbac_attributes(r)) for r in requests}


def without_verb(roles: list[dict[str, Any]], role_i: int, rule_i: int,
                 resource: str, verb: str) -> list[dict[str, Any]]:
    """The roles with one (resource, verb) of one rule taken away."""
    import copy

    out = copy.deepcopy(roles)
    rule = out[role_i]["rules"][rule_i]
    rest = [r for r in rule["resources"] if r != resource]
    out[role_i]["rules"][rule_i] = {**rule, "verbs": [v for v in rule["verbs"] if v != verb]}
    if rest:
        out[role_i]["rules"].append({**rule, "resources": rest})
    out[role_i]["rules"][rule_i]["resources"] = [resource]
    return out


@pytest.mark.slow
def test_the_operators_run_and_a_persons_request_use_exactly_their_roles(
        tmp_path: Path) -> None:
    with KubeApiServer(linger=False) as api:
        op_config = write_config(tmp_path, "operator",
                                 api.write_kubeconfig(tmp_path / "op-kc", client="operator"))
        cli_config = write_config(tmp_path, "cli",
                                  api.write_kubeconfig(tmp_path / "cli-kc", client="cli"))
        api.add_rbac(*policies())  # identities bound, status and the ledger the executor's
        # each client holds exactly the roles printed for it (and the API server enforces
        # them): the operator its ClusterRole, site-lease Role and node-lock Role; the
        # person powerplane-maintainer, its locks Role, and powerplane-admin (the servers
        # verbs the admission policy checks)
        api.grant("operator", m.cluster_role(), m.lease_role(OPS), m.operator_lock_role(LOCKS))
        api.grant("cli", m.maintainer_role(), m.maintainer_lock_role(LOCKS), m.people_roles()[0])
        seed(api, {n: ({CP: ""} if n.startswith("cp") else {}) for n in NODES},
             {"pods": {"w1": ["web-1", "db-0"]},
              "pdbs": {"db-pdb": {"pods": ["db-0"], "allowed_disruptions": 0}}},
             {"type": "simulated", "replicas": {"w1": 1}})

        async def person() -> tuple[str, Kubelet]:
            host = PowerHost(load_config(cli_config))
            await host.start()
            lc = Lifecycle.for_host(host)
            try:
                made = await lc.request("w1", "reboot", Ceremony(
                    reason="replace the PSU in slot 2", confirm_node="w1",
                    ack_preflight=True))
            finally:
                lc.close()
                await host.close()
            return made.name, Kubelet(api, NODES, channel_machines(
                {n: (cast(Machines, host.channel("lab")), n) for n in NODES}))

        name, kubelet = asyncio.run(person())
        # and one made by hand as kubectl would (no record: the operator writes it)
        by_hand(api, tmp_path / "cli-kc", "cp1-by-hand", {
            "node": "cp1", "intent": "cordon", "reason": "replace the PSU in slot 2",
            "requestedBy": "cli", "confirmNode": "cp1",
            "hazardReason": "the PSU is failing; planned"})
        # a bare 429 (an older API server): the operator lists the budgets to name the one
        api.budget_cause = False
        with kubelet.running(), open(tmp_path / "operator.log", "w+") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", RUN, "--config", str(op_config), "operator", "run",
                 "--kubeconfig", str(tmp_path / "op-kc"), "--namespace", OPS,
                 "--identity", "replica-a", "--until-idle", "--timeout", "120",
                 "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period",
                 "0.2", "--interval", "0.05"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, text=True)
            try:
                # the budget refuses until the operator has listed budgets to name it
                deadline = time.monotonic() + 120
                while not [r for r in api.requests_to("GET", PDBS) if r.client == "operator"] \
                        and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                api.set_pdb_allowed("default", "db-pdb", 1)
                code = proc.wait(timeout=180)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
            log.seek(0)
            err = log.read()
        assert code == 0, err[-3000:]
        final = api.object("powerplane.io/v1alpha1/nodemaintenances", None, name)
        assert final is not None and final["status"]["phase"] == "Complete", final
        hand = api.object("powerplane.io/v1alpha1/nodemaintenances", None, "cp1-by-hand")
        assert hand is not None and hand["status"]["phase"] == "Cordoned", \
            hand["status"].get("refusalReason")
        asked = api.requests
    by = {who: [r for r in asked if r.client == who] for who in ("operator", "cli", "")}
    assert by[""] == []  # every request came from one of the two
    operator_roles = [m.cluster_role(), m.lease_role(OPS), m.operator_lock_role(LOCKS)]
    person_roles = [m.maintainer_role(), m.maintainer_lock_role(LOCKS)]
    refused = ungranted(by["operator"], [*operator_roles, BASIC_USER])
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    refused = ungranted(by["cli"], [*person_roles, BASIC_USER])
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    assert {"watch nodemaintenances.powerplane.io", "update nodemaintenances/status.powerplane.io",
            # the record of the request made by hand, and the watch of the records
            "create maintenanceaudits.powerplane.io", "watch maintenanceaudits.powerplane.io",
            f"update leases.coordination.k8s.io in namespace {OPS}",
            "create pods/eviction in namespace default",
            "update nodes.longhorn.io in namespace longhorn-system",
            # admission by the operator: it takes the node's lock
            f"create leases.coordination.k8s.io in namespace {LOCKS}"} <= used(by["operator"])
    # the person writes the request and its record (no Event: a notification the status
    # history of the admission replaces)
    assert {"create nodemaintenances.powerplane.io",
            "create maintenanceaudits.powerplane.io"} <= used(by["cli"])
    assert f"create events in namespace {LOCKS}" not in used(by["cli"])
    # every verb the operator's roles grant is used: taking any one away refuses a request
    for role_i, role in enumerate(operator_roles):
        for rule_i, rule in enumerate(role["rules"]):
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if (role["metadata"]["name"], verb) in TAKE_OVER or \
                            (role["metadata"]["name"], verb, resource) in REREAD or \
                            resource == "subjectaccessreviews":  # no kubernetes policy here
                        continue
                    narrower = without_verb(operator_roles, role_i, rule_i, resource, verb)
                    assert ungranted(by["operator"], [*narrower, BASIC_USER]), \
                        f"{verb} {resource} ({rule['apiGroups']}) is granted but never used"


SECRET_NS, SECRET = "vault", "bmc-credentials"
BASIC_USER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "system:basic-user"},
              "rules": [{"apiGroups": ["authentication.k8s.io"],
                         "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                        {"apiGroups": ["authorization.k8s.io"],
                         "resources": ["selfsubjectaccessreviews"], "verbs": ["create"]}]}
"""The cluster's own default role bound to every authenticated user (not ours to print):
a client may ask who it is, and what it may do itself."""


@pytest.mark.slow
def test_the_kubernetes_policy_and_a_k8s_secret_use_exactly_the_operators_roles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator run whose policy is ``{type: kubernetes}`` (its SubjectAccessReviews) and
    whose channel password is a ``{k8s:}`` reference (a ``get`` of that one Secret): every
    request it made is granted by the printed roles (the ClusterRole, the lease Role, the
    Secret's Role by ``resourceNames``), and every verb those grant was used."""
    secret = {"k8s": f"{SECRET_NS}/{SECRET}/password"}
    with KubeApiServer(linger=False) as api:
        op_kc = api.write_kubeconfig(tmp_path / "op-kc", client="operator",
                                     user=f"system:serviceaccount:{OPS}:{m.NAME}")
        cli_kc = api.write_kubeconfig(tmp_path / "cli-kc", client="cli", user="alice",
                                      groups=["plant-eng"])
        configs = {}
        for who, kc in (("operator", op_kc), ("cli", cli_kc)):
            path = write_config(tmp_path, who, kc)
            cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
            cfg["channels"]["lab"].update(password=secret, expect_password=secret)
            # the operator's policy finds its access as kubectl does ($KUBECONFIG here)
            cfg["policy"] = ({"type": "kubernetes"} if who == "operator"
                             else {"type": "kubernetes", "kubeconfig": str(kc)})
            path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
            configs[who] = path
        api.add_secret(SECRET_NS, SECRET, {"password": "hunter2"})
        # what operator manifests prints for this file (its state_file, a test world
        # outside the pod's data directory, is why the whole set is not asked for here)
        secrets = m.referenced_secrets(load_config(configs["operator"]))
        printed = [*policies(), m.cluster_role(),
                   m.lease_role(OPS), *m.secret_roles(OPS, secrets), *m.people_roles()]
        api.add_rbac(*printed)  # the roles, the admission policy and its binding
        api.add_rbac({"apiVersion": "rbac.authorization.k8s.io/v1",
                      "kind": "ClusterRoleBinding", "metadata": {"name": "alice-admin"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": m.ADMIN},
                      "subjects": [{"kind": "User", "name": "alice"}]})
        # the bindings `operator manifests` prints for the operator's ServiceAccount, and
        # the person's powerplane-maintainer and its locks Role
        api.grant(f"system:serviceaccount:{OPS}:{m.NAME}", m.cluster_role(),
                  m.lease_role(OPS), m.operator_lock_role(LOCKS))
        api.grant("alice", m.maintainer_role(), m.maintainer_lock_role(LOCKS))
        # (the person's CLI with the kubernetes policy asks about itself: a
        # SelfSubjectAccessReview, which system:basic-user grants every authenticated user;
        # no role for people grants subjectaccessreviews, which would disclose anyone's)
        # nor is the channel's Secret, which the person's host reads to start its channels
        # (the request's pre-flight reads power through them): the printed Role bound to her
        api.add_rbac({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "alice-secrets", "namespace": SECRET_NS},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": m.SECRETS_ROLE},
                      "subjects": [{"kind": "User", "name": "alice"}]})
        seed(api, {n: ({CP: ""} if n.startswith("cp") else {}) for n in NODES},
             {"pods": {"w1": ["web-1"]}}, {"type": "simulated", "replicas": {}})
        # the person's {k8s:} reads go with the person's own access
        monkeypatch.setenv("KUBECONFIG", str(cli_kc))

        async def person() -> tuple[str, Kubelet]:
            host = PowerHost(load_config(configs["cli"]))
            await host.start()
            lc = Lifecycle.for_host(host)
            try:
                made = await lc.request("w1", "reboot", Ceremony(
                    reason="replace the PSU in slot 2", confirm_node="w1",
                    ack_preflight=True))
            finally:
                lc.close()
                await host.close()
            return made.name, Kubelet(api, NODES, channel_machines(
                {n: (cast(Machines, host.channel("lab")), n) for n in NODES}))

        name, kubelet = asyncio.run(person())
        # and one made by hand as kubectl would (no record: the operator writes it)
        by_hand(api, cli_kc, "cp1-by-hand", {
            "node": "cp1", "intent": "cordon", "reason": "replace the PSU in slot 2",
            "requestedBy": "alice", "confirmNode": "cp1",
            "hazardReason": "the PSU is failing; planned"})
        env = {**__import__("os").environ, "KUBECONFIG": str(op_kc)}
        with kubelet.running(), open(tmp_path / "operator.log", "w+") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", RUN, "--config", str(configs["operator"]), "operator",
                 "run", "--kubeconfig", str(op_kc), "--namespace", OPS, "--identity",
                 "replica-a", "--until-idle", "--timeout", "120", "--lease-duration", "2",
                 "--renew-deadline", "1.5", "--retry-period", "0.2", "--interval", "0.05"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, text=True,
                env=env)
            try:
                code = proc.wait(timeout=180)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
            log.seek(0)
            err = log.read()
        assert code == 0, err[-3000:]
        final = api.object("powerplane.io/v1alpha1/nodemaintenances", None, name)
        assert final is not None and final["status"]["phase"] == "Complete", final
        asked = api.requests
    operator = [r for r in asked if r.client == "operator"]
    secret_roles = [d for d in printed if d["kind"] == "Role"
                    and d["metadata"]["name"] == m.SECRETS_ROLE]
    assert [d["rules"] for d in secret_roles] == [[{
        "apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET],
        "verbs": ["get"]}]]
    roles = [m.cluster_role(), m.lease_role(OPS), m.operator_lock_role(LOCKS), *secret_roles]
    refused = ungranted(operator, [*roles, BASIC_USER])
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    assert {"create subjectaccessreviews.authorization.k8s.io",
            f"get secrets in namespace {SECRET_NS}",
            "get validatingadmissionpolicybindings.admissionregistration.k8s.io"} <= \
        used(operator)
    reviews = [r for r in operator if r.path.endswith("/subjectaccessreviews")]
    assert reviews and all(r.body["spec"]["user"] == "alice" for r in reviews)
    # the person's CLI asks about itself by SelfSubjectAccessReviews (every authenticated
    # user may) and holds nothing beyond its printed roles: no subjectaccessreviews
    person = [r for r in asked if r.client == "cli"]
    refused = ungranted(person, [m.maintainer_role(), m.maintainer_lock_role(LOCKS),
                                 *secret_roles, BASIC_USER])
    assert refused == [], [f"{r} -> {why}" for r, why in refused]
    assert "create selfsubjectaccessreviews.authorization.k8s.io" in used(person)
    assert "create subjectaccessreviews.authorization.k8s.io" not in used(person)
    # every verb granted was used: taking any one away refuses a request
    for role_i, role in enumerate(roles):
        for rule_i, rule in enumerate(role["rules"]):
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if (role["metadata"]["name"], verb) in TAKE_OVER or \
                            (role["metadata"]["name"], verb, resource) in REREAD:
                        continue
                    narrower = without_verb(roles, role_i, rule_i, resource, verb)
                    assert ungranted(operator, [*narrower, BASIC_USER]), \
                        f"{verb} {resource} ({rule['apiGroups']}) is granted but never used"
