"""``authority.folding``: repeats of one denial folded into one record with a count, written
when the window closes, at the next record written, when the key is evicted and at close;
memory bounded by the number of keys; no count ever lost."""

from __future__ import annotations

import datetime as dt
import tracemalloc
from pathlib import Path

from authority_support import jsonl, write_deployment

from powerplane import load_config
from powerplane.authority.actions import Action
from powerplane.authority.audit import AuditRecord
from powerplane.authority.folding import DenialFolder, denials_in
from powerplane.authority.identity import Identity
from powerplane.runtime import authority_for

T0 = dt.datetime(2026, 12, 7, 10, 2, 7, tzinfo=dt.UTC)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.t)


def denial(actor: str = "eve", node: str = "node-1", action: Action = Action.REBOOT,
           rule: str = "no role allows it", at: dt.datetime = T0) -> AuditRecord:
    return AuditRecord(actor=actor, action=action, reason="why not", node=node,
                       outcome="denied", rule=rule, at=at)


def folder(clock: Clock, **kw: float) -> DenialFolder:
    return DenialFolder(clock=clock, wall=clock.wall, **kw)  # type: ignore[arg-type]


def test_the_first_is_written_the_repeats_counted_and_written_at_close() -> None:
    clock = Clock()
    f = folder(clock)
    assert f.fold(denial()) == [denial()]
    for i in range(57):
        clock.t = 1 + i
        assert f.fold(denial(at=clock.wall())) == []
    [fold] = f.flush()
    assert fold.detail == "and 57 more of servers:reboot by eve since 10:02:08"
    assert (fold.actor, fold.node, fold.outcome, fold.rule) == (
        "eve", "node-1", "denied", "no role allows it")
    assert fold.at == T0 + dt.timedelta(seconds=57)  # the last repeat's time
    assert denials_in(fold) == 57 and denials_in(denial()) == 1
    assert f.flush() == [] and len(f) == 0


def test_a_fold_is_written_when_its_window_closes() -> None:
    clock = Clock()
    f = folder(clock, window_s=60)
    f.fold(denial())
    clock.t = 10
    assert f.fold(denial(at=clock.wall())) == []
    clock.t = 69
    assert f.due() == []
    clock.t = 70
    [fold] = f.due()
    assert fold.detail.startswith("and 1 more of servers:reboot by eve since 10:02:17")
    # the flood goes on: counted again, one fold per window
    clock.t = 71
    assert f.fold(denial()) == []
    clock.t = 200
    # long after its window: written again, the fold it makes due first
    out = f.fold(denial())
    assert [r.detail.split(" since")[0] for r in out] == [
        "and 1 more of servers:reboot by eve", ""]
    clock.t = 400
    assert f.fold(denial()) == [denial()]


def test_a_distinct_record_writes_the_folds_counting_before_it() -> None:
    clock = Clock()
    f = folder(clock)
    f.fold(denial())
    f.fold(denial())
    f.fold(denial())
    out = f.fold(denial(node="node-2"))
    assert [(r.node, r.detail.split(" since")[0]) for r in out] == [
        ("node-1", "and 2 more of servers:reboot by eve"), ("node-2", "")]


def test_the_key_is_user_action_rule_and_node() -> None:
    clock = Clock()
    f = folder(clock)
    written = [r for d in (denial(), denial(actor="mallory"), denial(action=Action.SHUTDOWN),
                           denial(rule="another rule"), denial(node="node-2"))
               for r in f.fold(d)]
    assert len(written) == 5 and all(r.detail == "" for r in written)
    # the reason is not part of the key: free text cannot defeat the folding
    assert f.fold(AuditRecord(actor="eve", action=Action.REBOOT, reason="other", node="node-2",
                              outcome="denied", rule="no role allows it")) == []


def test_ten_thousand_identical_denials_are_a_bounded_number_of_records_counting_all() -> None:
    clock = Clock()
    f = folder(clock, window_s=60)
    written: list[AuditRecord] = []
    for i in range(10_000):
        clock.t = i * 0.05  # 500 s of flood: about eight windows
        written.extend(f.fold(denial(at=clock.wall())))
        written.extend(f.due())
    written.extend(f.flush())
    assert len(written) <= 2 + 500 / 60
    assert sum(denials_in(r) for r in written) == 10_000


def test_many_identities_keep_memory_bounded_and_lose_no_count() -> None:
    from powerplane.authority import folding

    clock = Clock()
    f = folder(clock, max_keys=256)
    counted = 0

    def held() -> int:
        """What the folder and this test hold: lines of either file."""
        snap = tracemalloc.take_snapshot().filter_traces([
            tracemalloc.Filter(True, folding.__file__), tracemalloc.Filter(True, __file__)])
        return sum(stat.size for stat in snap.statistics("filename"))

    tracemalloc.start()
    try:
        for i in range(1_000):  # warm up: the folder full
            counted += sum(denials_in(r) for r in f.fold(denial(actor=f"user-{i}")))
        before = held()
        for round_ in range(2):
            for i in range(5_000):
                d = denial(actor=f"user-{i % 3_000}", node=f"node-{round_ % 3}")
                counted += sum(denials_in(r) for r in f.fold(d))
                counted += sum(denials_in(r) for r in f.fold(d))
            assert len(f) <= 256 and f.pending <= 256
        after = held()
    finally:
        tracemalloc.stop()
    counted += sum(denials_in(r) for r in f.flush())
    assert counted == 1_000 + 2 * 10_000
    assert after - before < 64 * 1024  # 20,000 more asks of 3,000 identities: nothing more held


def test_an_evicted_key_loses_no_count() -> None:
    clock = Clock()
    f = folder(clock, max_keys=2)
    out = f.fold(denial(node="a"))
    out += f.fold(denial(node="a"))  # counting
    out += f.fold(denial(node="b"))  # written: a's fold goes first
    out += f.fold(denial(node="b"))
    out += f.fold(denial(node="c"))  # evicts a (nothing pending); b's fold first
    out += f.fold(denial(node="a"))  # a forgotten: written again
    out += f.flush()
    assert [(r.node, denials_in(r)) for r in out] == [
        ("a", 1), ("a", 1), ("b", 1), ("b", 1), ("c", 1), ("a", 1)]
    assert len(f) == 0


def test_the_authority_writes_the_folds_before_an_accepted_act(tmp_path: Path) -> None:
    import asyncio

    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    authority = authority_for(deployment)
    victor = Identity("victor")
    dana = Identity("dana", ("plant-admins",))
    pair = [("n1", deployment.nodes["n1"])]

    async def go() -> None:
        for _ in range(5):
            await authority.authorize(Action.REBOOT, pair, victor, reason="try")
        decided = await authority.require(Action.REBOOT, "n1", deployment.nodes["n1"], dana)
        authority.record([authority.record_of(dana, decided, "n1", "kernel")])

    asyncio.run(go())
    records = jsonl(audit)
    assert [(r["actor"], r["outcome"], r["detail"].split(" since")[0]) for r in records] == [
        ("victor", "denied", ""), ("victor", "denied", "and 4 more of servers:reboot by victor"),
        ("dana", "accepted", "")]


def test_record_denial_counts_for_the_key_given(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    authority = authority_for(deployment)
    nobody = Identity("(unauthenticated)", via="none")
    for _ in range(3):
        authority.record_denial(nobody, Action.CORDON, "n1", "authentication failed",
                                limit_key="unauthenticated@10.0.0.9")
    authority.record_denial(nobody, Action.CORDON, "n1", "authentication failed",
                            limit_key="unauthenticated@10.0.0.10")
    authority.flush_denials()
    got = [AuditRecord.from_dict(r) for r in jsonl(audit)]
    assert sum(denials_in(r) for r in got) == 4
    assert len(got) == 3
