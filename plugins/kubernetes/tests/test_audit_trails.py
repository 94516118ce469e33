"""Issue 37 on the enforcing test API server: the ``MaintenanceAudit`` records are chained,
one trail per writer, and ``powerplane audit verify`` reads them.

``maintenance run`` (the executor) admits two requests made by hand (``kubectl
apply``-style: their creator wrote no record), writing their request records in its own
trail, and ada's own request is recorded in hers: ``audit verify`` exits 0 on the intact
trails. A writer of the executor's identity (an operator replica's store) writes five
records; each tampering below the API server (the test server's ``restore_object`` and
``delete_object``, as etcd access would: no admission, no RBAC) makes ``audit verify``
exit 1 naming the trail, the first bad entry's position, the object and what is wrong: a
field edited, a record deleted, two records' contents swapped, a time changed, a copied
record inserted.
Through the API server no one may touch a record: an update and a delete are refused for
every identity. Two writers of one identity (two replicas of the operator) appending at
once each keep a trail that verifies; with a signing key each record carries its signed
checkpoint, and a record whose checkpoint was cut off is caught.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_users import AUDITS, EXECUTOR, OPS, World, cluster
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from powerplane.authority.seal import Signer
from powerplane.lifecycle import Action, AuditRecord
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.store import KubernetesStore
from powerplane_kubernetes.testing.apiserver import MAINTENANCES

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
AUDIT_URL = "/apis/powerplane.io/v1alpha1/maintenanceaudits"
HAND_MADE = (("w2", "cordon"), ("cp1", "cordon"))
"""Two requests by hand: two records by the executor."""


def by_hand(w: World, node: str, intent: str, i: int) -> str:
    """``ada``'s request, POSTed as ``kubectl apply`` would (no request record of hers)."""
    name = f"{node}-{intent}-by-hand-{i}"
    spec = {"node": node, "intent": intent, "reason": "replace the PSU in slot 2",
            "requestedBy": "ada", "confirmNode": node, "ackPreflight": True,
            "hazardReason": "the rack is powered from the other feed"}
    with w.http("ada") as c:
        answer = c.post(NM, json={"apiVersion": "powerplane.io/v1alpha1",
                                  "kind": "NodeMaintenance", "metadata": {"name": name},
                                  "spec": spec})
    assert answer.status_code == 201, answer.text
    return name


def records(w: World) -> list[dict[str, Any]]:
    """Every MaintenanceAudit object, in each trail's order."""
    return sorted(w.api.objects(AUDITS),
                  key=lambda o: (o["spec"].get("trail", ""), o["spec"].get("seq", 0)))


def executor_trail(w: World) -> list[dict[str, Any]]:
    found = [o for o in records(w) if o["spec"]["trail"].startswith(EXECUTOR + "@")]
    assert found, records(w)
    assert len({o["spec"]["trail"] for o in found}) == 1
    return found


def verify(w: World, *args: str) -> tuple[int, dict[str, Any]]:
    res = w.cli("ada", "audit", "verify", "-o", "json", *args)
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return res.exit_code, doc


@pytest.fixture
def admitted(tmp_path: Path) -> Any:
    """The executor's trail of two request records, ada's of one."""
    with cluster(tmp_path) as w:
        w.request("ada", "w1", "cordon")
        for i, (node, intent) in enumerate(HAND_MADE):
            by_hand(w, node, intent, i)
        w.run()
        assert {w.phase(o["metadata"]["name"]) for o in w.api.objects(MAINTENANCES)} == {
            "Cordoned"}
        yield w


def test_each_record_names_its_trail_its_place_and_the_hash_of_the_one_before(
    admitted: World,
) -> None:
    trail = executor_trail(admitted)
    assert len(trail) == len(HAND_MADE)
    assert [o["spec"]["seq"] for o in trail] == [1, 2]
    assert trail[0]["spec"]["prev"] == ""
    assert len(trail[1]["spec"]["prev"]) == 64
    assert {o["spec"]["recordedBy"] for o in trail} == {EXECUTOR}
    assert len({o["metadata"]["labels"]["powerplane.io/audit-trail"] for o in trail}) == 1
    [hers] = [o for o in records(admitted) if o["spec"]["trail"].startswith("ada@")]
    assert (hers["spec"]["actor"], hers["spec"]["seq"], hers["spec"]["prev"]) == ("ada", 1, "")


def test_intact_trails_verify_exit_0(admitted: World) -> None:
    code, doc = verify(admitted)
    assert code == 0, doc
    assert doc["intact"] is True
    assert sorted((t["trail"].split(", trail ")[1].split("@")[0], t["records"])
                  for t in doc["trails"]) == [("ada", 1), (EXECUTOR, 2)]
    text = admitted.cli("ada", "audit", "verify")
    assert text.exit_code == 0, text.output
    assert "intact: 2 record(s)" in text.output and "intact: 1 record(s)" in text.output


@pytest.fixture
def written(tmp_path: Path) -> Any:
    """Five records in the trail of a writer of the executor's identity."""
    with cluster(tmp_path) as w:
        store = _store(w)
        try:
            store.append_audits([_record(i) for i in range(5)])
        finally:
            store.close()
        yield w


def _put(w: World, obj: dict[str, Any]) -> None:
    w.api.restore_object(AUDITS, None, obj)


def edit(w: World, trail: list[dict[str, Any]]) -> None:
    obj = copy.deepcopy(trail[1])
    obj["spec"]["actor"] = "mallory"
    _put(w, obj)


def delete(w: World, trail: list[dict[str, Any]]) -> None:
    assert w.api.delete_object(AUDITS, None, trail[1]["metadata"]["name"])


def swap(w: World, trail: list[dict[str, Any]]) -> None:
    """The first two records' contents exchanged, each keeping its place (seq, prev)."""
    a, b = copy.deepcopy(trail[0]), copy.deepcopy(trail[1])
    keep = ("trail", "seq", "prev")
    a["spec"], b["spec"] = ({**trail[1]["spec"], **{k: trail[0]["spec"][k] for k in keep}},
                            {**trail[0]["spec"], **{k: trail[1]["spec"][k] for k in keep}})
    _put(w, a)
    _put(w, b)


def retime(w: World, trail: list[dict[str, Any]]) -> None:
    obj = copy.deepcopy(trail[1])
    obj["spec"]["at"] = "2020-01-01T00:00:00+00:00"
    _put(w, obj)


def insert_copy(w: World, trail: list[dict[str, Any]]) -> None:
    obj = copy.deepcopy(trail[0])
    obj["metadata"] = {"name": obj["metadata"]["name"] + "-copy",
                       "labels": obj["metadata"].get("labels", {})}
    _put(w, obj)


TAMPERINGS = {
    "edit": (edit, 2, "changed", 1),
    "delete": (delete, 2, "missing", 2),
    "swap": (swap, 1, "changed", 0),
    "retime": (retime, 2, "time going backwards", 1),
    "insert": (insert_copy, 2, "inserted: a copy of entry 1", 0),
}
"""Each tampering: what it does, the first bad entry, the words, the object named (its index
in the trail before the tampering)."""


@pytest.mark.parametrize("how", sorted(TAMPERINGS))
def test_each_tampering_below_the_api_server_exits_1_naming_the_first_bad_record(
    written: World, how: str,
) -> None:
    tamper, position, words, index = TAMPERINGS[how]
    trail = executor_trail(written)
    assert len(trail) == 5
    assert verify(written)[0] == 0
    tamper(written, trail)
    code, doc = verify(written)
    assert code == 1, doc
    assert doc["intact"] is False
    assert f"trail {EXECUTOR}@" in doc["trail"]
    [bad] = [t for t in doc["trails"] if t["trail"] == doc["trail"]]
    assert bad["firstBad"] == position, bad
    assert words in bad["problem"], bad
    named = trail[index]["metadata"]["name"] + ("-copy" if how == "insert" else "")
    if how != "insert":
        assert f"maintenanceaudits.powerplane.io/{named}" in bad["problem"], bad
    text = written.cli("ada", "audit", "verify")
    assert text.exit_code == 1
    assert f"NOT intact: entry {position}: " in text.output
    assert "Traceback" not in text.output


@pytest.mark.parametrize("who", ["ada", "mallory", "executor", "gateway"])
def test_no_identity_may_update_or_delete_a_record_through_the_api_server(
    admitted: World, who: str,
) -> None:
    obj = executor_trail(admitted)[0]
    url = f"{AUDIT_URL}/{obj['metadata']['name']}"
    changed = copy.deepcopy(obj)
    changed["spec"]["actor"] = "mallory"
    with admitted.http(who) as c:
        put = c.put(url, json=changed)
        patch = c.patch(url, json={"spec": {"actor": "mallory"}},
                        headers={"Content-Type": "application/merge-patch+json"})
        gone = c.delete(url)
    assert (put.status_code, patch.status_code, gone.status_code) == (403, 403, 403), (
        put.text, patch.text, gone.text)
    assert admitted.api.object(AUDITS, None, obj["metadata"]["name"]) == obj


def _store(w: World, signer: Signer | None = None) -> KubernetesStore:
    return KubernetesStore(ApiAccess(kubeconfig=str(w.kubeconfig("executor"))),
                           namespace=OPS, signer=signer)


def _record(i: int) -> AuditRecord:
    return AuditRecord(actor=EXECUTOR, action=Action.CORDON, reason=f"record {i}",
                       node=f"w{1 + i % 2}", via="kubernetes")


def test_two_writers_of_one_identity_at_once_each_keep_a_trail_that_verifies(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as w:
        stores = [_store(w), _store(w)]  # two replicas of the operator
        errors: list[BaseException] = []

        def write(store: KubernetesStore, base: int) -> None:
            try:
                for i in range(12):
                    store.append_audits([_record(base + i)])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(s, 100 * k + 10 * j))
                   for k, s in enumerate(stores) for j in range(2)]  # two threads each
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        names = {s.trail for s in stores}
        assert len(names) == 2 and None not in names
        for name in names:
            seqs = [o["spec"]["seq"] for o in records(w) if o["spec"]["trail"] == name]
            assert seqs == list(range(1, 25))
        code, doc = verify(w)
        assert code == 0, doc
        assert [t["records"] for t in doc["trails"]] == [24, 24]
        for s in stores:
            s.close()
        assert not w.api.objects(MAINTENANCES)


def test_with_a_key_each_record_carries_its_signed_checkpoint(tmp_path: Path) -> None:
    private = Ed25519PrivateKey.generate()
    public = tmp_path / "audit.pub"
    public.write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with cluster(tmp_path) as w:
        store = _store(w, Signer(private))
        try:
            store.append_audits([_record(i) for i in range(3)])
        finally:
            store.close()
        trail = [o for o in records(w) if o["spec"]["trail"] == store.trail]
        assert [o["spec"]["seq"] for o in trail] == [1, 3, 5]  # a checkpoint after each
        assert all(o["spec"]["signature"] for o in trail)
        code, doc = verify(w, "--public-key", str(public))
        assert code == 0, doc
        assert (doc["records"], doc["checkpoints"]) == (3, 3)
        cut = copy.deepcopy(trail[-1])
        del cut["spec"]["checkpoint"], cut["spec"]["signature"]
        w.api.restore_object(AUDITS, None, cut)
        code, doc = verify(w, "--public-key", str(public))
        assert code == 1, doc
        assert doc["firstBad"] == 5 and "not sealed" in doc["problem"], doc
        other = Ed25519PrivateKey.generate().public_key()
        public.write_bytes(other.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        code, doc = verify(w, "--public-key", str(public))
        assert code == 1 and doc["firstBad"] == 2 and "unknown signer" in doc["problem"], doc


def test_the_deployments_key_seals_what_every_writer_records(tmp_path: Path) -> None:
    """``audit: {key: {file: ...}}`` in the deployment: the requester's record and the
    executor's (written with the writes they record) each carry their checkpoint."""
    key = tmp_path / "audit.key"
    key.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    key.chmod(0o600)
    with cluster(tmp_path) as w:
        for who in ("ada", "executor"):
            path = w.config(who)
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            doc["audit"] = {"key": {"file": str(key)}}
            path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        w.request("ada", "w1", "cordon")
        by_hand(w, "w2", "cordon", 0)
        w.run()
        found = records(w)
        assert len(found) == 2
        assert all(o["spec"]["checkpoint"]["entries"] == 1 for o in found)
        code, doc = verify(w)
        assert code == 0, doc
        assert (doc["records"], doc["checkpoints"], doc["sealed"]) == (2, 2, True)


def test_export_writes_every_trail_with_the_verdict_first(admitted: World,
                                                          tmp_path: Path) -> None:
    lines = admitted.cli("ada", "audit", "export", "--format", "jsonl")
    assert lines.exit_code == 0, lines.output
    docs = [json.loads(line) for line in lines.stdout.splitlines()]
    assert sorted((d["trail"].split("@")[0], d["seq"]) for d in docs) == [
        ("ada", 1), (EXECUTOR, 1), (EXECUTOR, 2)]
    page = tmp_path / "trail.html"
    html = admitted.cli("ada", "audit", "export", "--format", "html", "-f", str(page))
    assert html.exit_code == 0, html.output
    text = page.read_text(encoding="utf-8")
    assert "2 trails, every one intact" in text
    assert text.index("every one intact") < text.index("servers:cordon")
