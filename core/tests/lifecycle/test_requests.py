"""Requests: the ceremony ladder, the reason policy, audit records, the store's guarantees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lifecycle_support import ceremony

from powerplane.authority.identity import Identity
from powerplane.errors import ConfigError, NotOffered, UnknownNode
from powerplane.lifecycle import (
    Action,
    AlreadyActive,
    Ceremony,
    CeremonyRequired,
    Phase,
    StoreConflict,
    lifecycle_config,
)
from powerplane.lifecycle.ceremony import Step, required


def test_the_ladder() -> None:
    assert required(Action.CORDON, False) == [Step.REASON]
    assert required(Action.UNCORDON, False) == [Step.REASON]
    assert required(Action.DRAIN, False) == [Step.REASON, Step.ACK_PREFLIGHT]
    assert required(Action.REBOOT, False) == [Step.REASON, Step.ACK_PREFLIGHT, Step.TYPED_NODE]
    assert required(Action.SHUTDOWN, True) == [
        Step.REASON, Step.ACK_PREFLIGHT, Step.TYPED_NODE, Step.HAZARD_REASON]
    assert required(Action.CORDON, True) == [Step.REASON, Step.TYPED_NODE, Step.HAZARD_REASON]


async def test_reboot_needs_ack_and_the_typed_node_name(open_lifecycle) -> None:
    lc = await open_lifecycle()
    bare = Ceremony(reason="kernel update 6.8")
    with pytest.raises(CeremonyRequired) as err:
        await lc.request("w1", "reboot", bare)
    assert err.value.exit_code == 2
    assert any("--ack-preflight" in p for p in err.value.problems)
    assert any("--confirm-node w1" in p for p in err.value.problems)
    wrong = Ceremony(reason="kernel update 6.8", confirm_node="w2", ack_preflight=True)
    with pytest.raises(CeremonyRequired, match="typed"):
        await lc.request("w1", "reboot", wrong)
    assert lc.store.all() == [] and lc.store.audit() == []


async def test_reason_policy(open_lifecycle) -> None:
    lc = await open_lifecycle(lifecycle={"reason_policy": {"min_length": 4,
                                                           "pattern": r"CHG-\d+"}})
    for reason in ("", "test", "no ticket here"):
        with pytest.raises(CeremonyRequired):
            await lc.request("w1", "cordon", Ceremony(reason=reason))
    await lc.request("w1", "cordon", Ceremony(reason="CHG-42 rack move"))


async def test_audit_record_joins_the_object(open_lifecycle) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "drain", ceremony("w1", actor="carol"))
    (rec,) = lc.store.audit()
    assert (rec.actor, rec.action, rec.reason, rec.node, rec.maintenance, rec.source) == (
        "carol", Action.DRAIN, "replace the PSU in slot 2", "w1", m.name, "Server/w1")
    assert rec.at.tzinfo is not None
    await lc.abandon("w1", Ceremony(reason="window cancelled", identity=Identity("dave")))
    assert [r.action for r in lc.store.audit("w1")] == [Action.DRAIN, Action.ABANDON]


async def test_no_secret_reaches_the_store(open_lifecycle, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-value-xyzzy"
    monkeypatch.setenv("SIM_PW", secret)
    lc = await open_lifecycle(channel={"password": {"env": "SIM_PW"},
                                       "expect_password": {"env": "SIM_PW"}})
    m = await lc.request("w1", "shutdown", ceremony("w1"))
    await lc.run(until_idle=True)
    await lc.return_to_service("w1", ceremony("w1"))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.COMPLETE
    lc.store.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("lifecycle.db*"))
    assert secret.encode() not in blob


async def test_one_active_maintenance_per_node(open_lifecycle) -> None:
    lc = await open_lifecycle()
    await lc.request("w1", "cordon", ceremony("w1"))
    with pytest.raises(AlreadyActive):
        await lc.request("w1", "drain", ceremony("w1"))


async def test_optimistic_concurrency(open_lifecycle) -> None:
    lc = await open_lifecycle()
    m = await lc.request("w1", "cordon", ceremony("w1"))
    a, b = lc.store.get(m.name), lc.store.get(m.name)
    a.status.last_error = "a"
    lc.store.update(a)
    b.status.last_error = "b"
    with pytest.raises(StoreConflict):
        lc.store.update(b)
    assert lc.store.get(m.name).status.last_error == "a"


async def test_unknown_node_and_withheld_verb(open_lifecycle) -> None:
    lc = await open_lifecycle(verbs=("reboot", "shutdown"))
    with pytest.raises(UnknownNode):
        await lc.request("nope", "cordon", ceremony("nope"))
    with pytest.raises(NotOffered) as err:  # shutdown with no power-on and nobody attending
        await lc.request("w1", "shutdown", ceremony("w1"))
    assert err.value.exit_code == 3


def test_config_errors_name_the_path() -> None:
    with pytest.raises(ConfigError) as err:
        lifecycle_config({"cluster": {"type": "no-such-type"}, "drain_deadline_s": -1,
                          "bogus": 1})
    paths = {p.path for p in err.value.problems}
    assert {"lifecycle.cluster.type", "lifecycle.drain_deadline_s", "lifecycle.bogus"} <= paths


def test_store_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    cfg = lifecycle_config({"store": "db/x.db"})
    src = tmp_path / "powerplane.yaml"
    assert cfg.store_path(str(src)) == tmp_path / "db" / "x.db"
    assert os.path.isabs(cfg.store_path(str(src)))
