"""The audit file's lines: :func:`encode_records` gives byte for byte the canonical encoding
of each record (the JSON of its ``as_dict``, compact, UTF-8, then its chain fields ``seq``
and ``prev``), for single records and for a call's :class:`AuditBatch`; a batch is a
sequence of the same records; one ``append`` of a fleet call's records is one write and one
``fsync``, and a file that cannot take them leaves nothing sent."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerplane.authority.actions import Action
from powerplane.authority.audit import AuditBatch, AuditRecord, JsonLinesAudit, encode_records
from powerplane.authority.identity import Identity
from powerplane.authority.policy import Decision
from powerplane.errors import AuditNotRecorded

AT = dt.datetime(2026, 12, 6, 21, 40, 0, 123456, tzinfo=dt.UTC)
ALICE = Identity("alice", ("plant-eng", "wheel"), on_behalf_of="night shift")


def reference(records: list[AuditRecord]) -> bytes:
    """One ``json.dumps`` per record with its chain fields, the chain computed plainly."""
    out, prev = [], ""
    for seq, r in enumerate(records, start=1):
        line = json.dumps({**r.as_dict(), "seq": seq, "prev": prev}, ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
        prev = hashlib.sha256(line).hexdigest()
        out.append(line + b"\n")
    return b"".join(out)


def test_a_record_is_encoded_as_its_dict() -> None:
    rec = AuditRecord(actor="alice", action=Action.REBOOT, reason="kernel \"6.1\"\n",
                      node="n-ü1", maintenance="m1", at=AT, detail="hazard: ack\t",
                      groups=("g",), via="oidc", on_behalf_of="bob", rule="role admin")
    assert encode_records([rec])[0] == reference([rec])
    assert json.loads(encode_records([rec])[0]) == {**rec.as_dict(), "seq": 1, "prev": ""}


text = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(nodes=st.lists(text, min_size=1, max_size=6), reason=text, rule=text, other=text,
       user=text, groups=st.lists(text, max_size=3), obo=text, detail=text)
def test_a_batch_is_encoded_as_its_records(nodes: list[str], reason: str, rule: str,
                                           other: str, user: str, groups: list[str], obo: str,
                                           detail: str) -> None:
    who = Identity(user, tuple(groups), on_behalf_of=obo or None)
    first = Decision(True, Action.SHUTDOWN, who, rule)
    second = Decision(True, Action.SHUTDOWN, who, other)
    decisions = [first if i % 3 else second for i in range(len(nodes))]
    batch = AuditBatch(actor=user, groups=tuple(groups), on_behalf_of=obo,
                       action=Action.SHUTDOWN, reason=reason, nodes=nodes,
                       decisions=decisions, at=AT, detail=detail)
    records = list(batch)
    assert [r.node for r in records] == nodes
    assert [r.rule for r in records] == [d.rule for d in decisions]
    assert all(r.at == AT and r.source == f"Server/{r.node}" for r in records)
    assert encode_records(batch)[0] == reference(records)
    assert encode_records(records)[0] == reference(records)
    assert batch[-1] == records[-1] and batch[:2] == records[:2] and len(batch) == len(nodes)


def test_a_fleet_calls_records_are_one_write_and_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision = Decision(True, Action.REBOOT, ALICE, "role admin allows it (tier admin)")
    batch = AuditBatch(actor="alice", groups=ALICE.groups, on_behalf_of="night shift",
                       action=Action.REBOOT, reason="kernel", at=AT,
                       nodes=[f"n{i}" for i in range(1000)], decisions=[decision] * 1000)
    calls: list[str] = []
    write, fsync = os.write, os.fsync

    def counted_write(fd: int, data: bytes | memoryview) -> int:
        calls.append("write")
        return write(fd, data)

    def counted_fsync(fd: int) -> None:
        calls.append("fsync")
        fsync(fd)

    monkeypatch.setattr(os, "write", counted_write)
    monkeypatch.setattr(os, "fsync", counted_fsync)
    sink = JsonLinesAudit(tmp_path / "audit.jsonl")
    sink.append(batch)
    monkeypatch.undo()
    assert calls == ["write", "fsync"]
    back = sink.records()
    assert [r.node for r in back] == [f"n{i}" for i in range(1000)]
    assert back[0] == batch[0]


def test_a_batch_the_file_cannot_take_is_not_recorded(tmp_path: Path) -> None:
    decision = Decision(True, Action.REBOOT, ALICE, "allowed")
    batch = AuditBatch(actor="alice", action=Action.REBOOT, reason="kernel", at=AT,
                       nodes=["n1"], decisions=[decision])
    (tmp_path / "dir").mkdir()
    with pytest.raises(AuditNotRecorded):
        JsonLinesAudit(tmp_path / "dir").append(batch)


def test_a_batch_in_the_lifecycle_store_is_one_transaction(tmp_path: Path) -> None:
    from powerplane.lifecycle.store import Store, StoreError
    from powerplane.lifecycle.trail import StoreAudit

    decision = Decision(True, Action.REBOOT, ALICE, "allowed")
    store = Store(tmp_path / "store.db")
    try:
        sink = StoreAudit(store)
        sink.append(AuditBatch(actor="alice", action=Action.REBOOT, reason="kernel", at=AT,
                               nodes=["n1", "n2", "n3"], decisions=[decision] * 3))
        assert [r.node for r in sink.records()] == ["n1", "n2", "n3"]
        # a record that cannot be written mid-batch: none of the batch is kept
        bad = AuditBatch(actor="alice", action=Action.REBOOT, reason="kernel", at=AT,
                         nodes=["n4", "n5\udcff"], decisions=[decision] * 2)
        with pytest.raises((AuditNotRecorded, StoreError)):
            sink.append(bad)
        assert [r.node for r in sink.records()] == ["n1", "n2", "n3"]
    finally:
        store.close()
