"""The chained trail: ``powerplane audit verify`` catches every tampering of the audit file and
of the lifecycle store's audit table (an edited field, a deleted record, two swapped, a time
changed, a copied record inserted), naming the first bad entry; an intact trail is exit 0;
signed checkpoints catch what the chain alone cannot (the newest records cut off, the whole
trail written again) and an unknown signer. A property test: one random edit of a random
trail is always caught."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from powerplane.authority.actions import Action
from powerplane.authority.audit import AuditRecord, JsonLinesAudit
from powerplane.authority.chain import entries_of_lines, verify
from powerplane.authority.seal import Seal, Signer
from powerplane.cli import cli
from powerplane.lifecycle.store import Store
from powerplane.lifecycle.trail import StoreAudit

T0 = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)


def record(i: int, actor: str = "root", node: str = "n1") -> AuditRecord:
    return AuditRecord(actor=actor, action=Action.REBOOT, reason=f"kernel update {i}",
                       node=node, at=T0 + dt.timedelta(minutes=i), rule="role admin")


def key_pem(path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    path.write_bytes(pem)
    path.chmod(0o600)
    return path


def deployment(tmp: Path, *, lifecycle: bool = False, key: Path | None = None) -> Path:
    doc: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "machines": {"n1": "on", "n2": "on"}}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "n1"}]},
                  "n2": {"channels": [{"channel": "lab", "target": "n2"}]}},
        "audit": {} if lifecycle else {"path": str(tmp / "audit.jsonl")},
    }
    if key is not None:
        doc["audit"]["key"] = {"file": str(key)}
    if lifecycle:
        doc["lifecycle"] = {"store": str(tmp / "lifecycle.db"), "cluster": {"type": "none"},
                            "no_control_plane": True}
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def verify_cli(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "audit", "verify", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


# -- the audit file ------------------------------------------------------------------------
def file_trail(tmp: Path, n: int = 6, signer: Signer | None = None) -> Path:
    path = tmp / "audit.jsonl"
    sink = JsonLinesAudit(path, signer=signer)
    for i in range(0, n, 2):  # appends of two records, as two calls would make
        sink.append([record(i), record(i + 1, node="n2")])
    return path


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def rewrite(path: Path, new: list[bytes]) -> None:
    path.write_bytes(b"".join(x + b"\n" for x in new))


def edit(line: bytes, **fields: Any) -> bytes:
    doc = json.loads(line)
    doc.update(fields)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


TAMPERING = {
    "a field edited (root -> mallory)": (lambda ls: [*ls[:2], edit(ls[2], actor="mallory"),
                                                     *ls[3:]], 3, "changed"),
    "a record deleted": (lambda ls: [*ls[:2], *ls[3:]], 3, "missing"),
    "two records swapped": (lambda ls: [*ls[:2], ls[3], ls[2], *ls[4:]], 3, "out of order"),
    "a time changed": (lambda ls: [*ls[:3], edit(ls[3], at="2026-12-07T09:30:00+00:00"),
                                   *ls[4:]], 4, "changed"),
    "a copied record inserted": (lambda ls: [*ls[:4], ls[1], *ls[4:]], 5, "inserted"),
}


def test_an_intact_file_trail_verifies(tmp_path: Path) -> None:
    file_trail(tmp_path)
    code, out = verify_cli(deployment(tmp_path))
    assert code == 0, out
    assert "intact: 6 record(s)" in out


@pytest.mark.parametrize("how", sorted(TAMPERING))
def test_each_tampering_of_the_file_is_caught_naming_the_first_bad_record(
    tmp_path: Path, how: str,
) -> None:
    change, position, words = TAMPERING[how]
    path = file_trail(tmp_path)
    rewrite(path, change(lines(path)))
    code, out = verify_cli(deployment(tmp_path))
    assert code == 1, out
    assert f"entry {position}: {words}" in out, out
    as_json = CliRunner().invoke(cli, ["--config", str(deployment(tmp_path)), "audit",
                                       "verify", "-o", "json"])
    assert as_json.exit_code == 1
    found = json.loads(as_json.stdout)
    assert (found["intact"], found["firstBad"]) == (False, position)


def test_a_file_that_does_not_end_with_a_chained_record_is_not_appended_to(
    tmp_path: Path,
) -> None:
    from powerplane.errors import AuditNotRecorded

    path = file_trail(tmp_path)
    with path.open("ab") as out:
        out.write(b'{"actor":"x"}\n')
    with pytest.raises(AuditNotRecorded, match="does not end with a chained record"):
        JsonLinesAudit(path).append([record(9)])


# -- the lifecycle store ---------------------------------------------------------------------
def store_trail(tmp: Path, n: int = 6) -> Store:
    store = Store(tmp / "lifecycle.db")
    for i in range(0, n, 2):
        StoreAudit(store).append([record(i), record(i + 1, node="n2")])
    return store


def rows(tmp: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp / "lifecycle.db")


STORE_TAMPERING = {
    "an UPDATE of a field": ("UPDATE audit SET actor = 'mallory' WHERE id = 3", 3, "changed"),
    "a DELETE": ("DELETE FROM audit WHERE id = 3", 3, "missing"),
    "a time changed": ("UPDATE audit SET at = '2026-12-07T09:30:00+00:00' WHERE id = 4", 4,
                       "changed"),
    "two records swapped": (
        "UPDATE audit SET id = CASE id WHEN 3 THEN 100 ELSE id END; "
        "UPDATE audit SET id = 3 WHERE id = 4; UPDATE audit SET id = 4 WHERE id = 100", 3,
        "out of order"),
    "a copied record inserted": (
        "INSERT INTO audit (id, at, actor, action, reason, node, maintenance, source, detail,"
        " extra, kind, seq, prev) SELECT 100, at, actor, action, reason, node, maintenance, "
        "source, detail, extra, kind, seq, prev FROM audit WHERE id = 2; "
        "UPDATE audit SET id = id + 1000 WHERE id >= 5 AND id < 100; "
        "UPDATE audit SET id = 5 WHERE id = 100", 5, "inserted"),
}


def test_an_intact_store_trail_verifies(tmp_path: Path) -> None:
    store_trail(tmp_path).close()
    code, out = verify_cli(deployment(tmp_path, lifecycle=True))
    assert code == 0 and "intact: 6 record(s)" in out, out


@pytest.mark.parametrize("how", sorted(STORE_TAMPERING))
def test_each_tampering_of_the_store_is_caught_naming_the_first_bad_record(
    tmp_path: Path, how: str,
) -> None:
    sql, position, words = STORE_TAMPERING[how]
    store_trail(tmp_path).close()
    with rows(tmp_path) as db:  # whoever can write the file can drop the triggers first
        db.executescript("DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; " + sql)
    code, out = verify_cli(deployment(tmp_path, lifecycle=True))
    assert code == 1, out
    assert f"entry {position}: {words}" in out, out


def test_two_stores_on_one_file_taking_turns_keep_one_trail(tmp_path: Path) -> None:
    """Each store remembers the last row it wrote and chains to it without rebuilding it
    only while it is still the table's last row: another writer's row, or a row rolled
    back and its id reused, is read again."""
    one, two = Store(tmp_path / "lifecycle.db"), Store(tmp_path / "lifecycle.db")
    for i in range(6):
        StoreAudit(one if i % 3 else two).append([record(i)])
    one.db.execute("BEGIN IMMEDIATE")
    one._insert_audits([record(6, actor="rolled-back")])
    one.db.execute("ROLLBACK")
    StoreAudit(two).append([record(7)])
    StoreAudit(one).append([record(8)])
    one.close()
    two.close()
    code, out = verify_cli(deployment(tmp_path, lifecycle=True))
    assert code == 0 and "intact: 8 record(s)" in out, out


@pytest.mark.parametrize("sql", ["UPDATE audit SET actor = 'mallory' WHERE id = 3",
                                 "DELETE FROM audit WHERE id = 3"])
def test_the_store_refuses_an_update_or_delete_of_its_trail(tmp_path: Path, sql: str) -> None:
    store_trail(tmp_path).close()
    with rows(tmp_path) as db, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute(sql)
    code, out = verify_cli(deployment(tmp_path, lifecycle=True))
    assert code == 0 and "intact: 6 record(s)" in out, out


# -- signed checkpoints ----------------------------------------------------------------------
def test_checkpoints_catch_the_tail_cut_off_and_a_trail_written_again(tmp_path: Path) -> None:
    key = key_pem(tmp_path / "audit.key")
    signer = Signer.from_pem(key.read_bytes(), str(key))
    path = file_trail(tmp_path, signer=signer)
    config = deployment(tmp_path, key=key)
    code, out = verify_cli(config)
    assert code == 0 and "3 signed checkpoint(s) verified" in out, out
    head = verify(entries_of_lines(lines(path)), seal=signer.seal).head
    original = lines(path)
    # the newest record cut off with its checkpoint: the record before it is unsealed
    rewrite(path, original[:-2])
    code, out = verify_cli(config)
    assert code == 1 and "not sealed" in out, out
    # cut off at an older checkpoint: caught against the head an inspector kept
    rewrite(path, original[:-3])
    assert verify_cli(config)[0] == 0
    code, out = verify_cli(config, "--expect-head", head)
    assert code == 1 and "cut off" in out, out
    # the whole trail written again, every hash recomputed, no checkpoint: unsealed
    unkeyed = tmp_path / "again"
    unkeyed.mkdir()
    rewrite(path, lines(file_trail(unkeyed)))
    code, out = verify_cli(config)
    assert code == 1 and "not sealed" in out, out


def test_a_checkpoint_of_another_key_is_an_unknown_signer(tmp_path: Path) -> None:
    mine = Signer.from_pem(key_pem(tmp_path / "a.key").read_bytes(), "a")
    theirs = key_pem(tmp_path / "b.key")
    path = file_trail(tmp_path, signer=mine)
    entries = entries_of_lines(lines(path))
    verdict = verify(entries, seal=Seal.from_pem(theirs.read_bytes(), "b"))
    assert not verdict.intact and "unknown signer" in verdict.problem
    # a checkpoint's count changed, its signature no longer verifies
    ls = lines(path)
    doc = json.loads(ls[2])
    doc["signature"] = doc["signature"][::-1]
    rewrite(path, [*ls[:2], json.dumps(doc, separators=(",", ":")).encode(), *ls[3:]])
    verdict = verify(entries_of_lines(lines(path)), seal=mine.seal)
    assert not verdict.intact and verdict.first_bad == 3, verdict


def test_a_key_file_others_may_write_is_refused(tmp_path: Path) -> None:
    key = key_pem(tmp_path / "audit.key")
    key.chmod(0o666)
    config = deployment(tmp_path, key=key)
    result = CliRunner().invoke(cli, ["--config", str(config), "invoke", "n1", "reboot",
                                      "--reason", "kernel update", "--yes"])
    assert result.exit_code == 2, result.output
    assert "the audit key" in result.output and "chmod go-w" in result.output


def test_an_inspector_verifies_with_the_public_key_alone(tmp_path: Path) -> None:
    key = key_pem(tmp_path / "audit.key")
    signer = Signer.from_pem(key.read_bytes(), str(key))
    file_trail(tmp_path, signer=signer)
    public = tmp_path / "audit.pub"
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(public)],
                   check=True)
    code, out = verify_cli(deployment(tmp_path), "--public-key", str(public))
    assert code == 0 and "signed checkpoint(s) verified" in out, out


# -- exports ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "html"])
def test_an_export_carries_the_records_and_the_verification(tmp_path: Path, fmt: str) -> None:
    path = file_trail(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(deployment(tmp_path)), "audit",
                                      "export", "--format", fmt])
    assert result.exit_code == 0, result.output
    if fmt == "jsonl":
        assert result.stdout.encode() == path.read_bytes()  # it verifies on its own
    elif fmt == "csv":
        assert result.stdout.splitlines()[0].startswith("seq,at,actor")
        assert len(result.stdout.splitlines()) == 7
    else:
        assert result.stdout.startswith("<!DOCTYPE html>")
        first_page = result.stdout.split('class="records"')[0]
        assert "The trail verifies" in first_page and "Head" in first_page
        assert "<script" not in result.stdout and "http" not in result.stdout.split(
            "<body>")[1]
    rewrite(path, TAMPERING["a record deleted"][0](lines(path)))
    tampered = CliRunner().invoke(cli, ["--config", str(deployment(tmp_path)), "audit",
                                        "export", "--format", "html"])
    assert "does NOT verify: entry 3" in tampered.stdout


# -- every edit caught -----------------------------------------------------------------------
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)


@settings(max_examples=120, deadline=None)
@given(reasons=st.lists(text, min_size=3, max_size=10), data=st.data())
def test_one_random_edit_of_a_random_trail_is_always_caught(
    reasons: list[str], data: st.DataObject,
) -> None:
    """Any one edit inside the trail (a field of a record that is not the last, a deletion of
    one that is not the last, a swap, a copied record inserted, a time moved) is caught:
    the chain alone cannot see the newest record changed or cut off (a checkpoint does)."""
    records = [AuditRecord(actor="root", action=Action.REBOOT, reason=r or "x", node="n1",
                           at=T0 + dt.timedelta(seconds=i)) for i, r in enumerate(reasons)]
    from powerplane.authority.audit import encode_records

    blob, _ = encode_records(records)
    ls = blob.splitlines()
    n = len(ls)
    kind = data.draw(st.sampled_from(["field", "delete", "swap", "insert", "time"]))
    k = data.draw(st.integers(0, n - 2))
    if kind == "field":
        key = data.draw(st.sampled_from(["actor", "reason", "node", "rule", "detail"]))
        old = json.loads(ls[k]).get(key)
        value = data.draw(text.filter(lambda v: v != old))
        ls[k] = edit(ls[k], **{key: value})
    elif kind == "delete":
        del ls[k]
    elif kind == "swap":
        ls[k], ls[k + 1] = ls[k + 1], ls[k]
    elif kind == "insert":
        j = data.draw(st.integers(0, n - 1))
        ls.insert(k, ls[j])
    else:
        shift = data.draw(st.integers(-3600, 3600).filter(bool))
        doc = json.loads(ls[k])
        moved = dt.datetime.fromisoformat(doc["at"]) + dt.timedelta(seconds=shift)
        ls[k] = edit(ls[k], at=moved.isoformat())
    verdict = verify(entries_of_lines(ls))
    assert not verdict.intact, (kind, k)
    assert verdict.first_bad is not None and verdict.first_bad <= k + 2, verdict
