"""``powerplane maintenance``: JSON shapes, exit codes, ceremony flags and prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from lifecycle_support import make_config

from powerplane.authority.identity import local_identity
from powerplane.cli import cli


@pytest.fixture
def config(tmp_path: Path) -> Path:
    cfg = make_config(tmp_path, cluster={"type": "simulated", "pods": {"w1": ["web-1"]}})
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def pp(config: Path, *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--config", str(config), "maintenance", *args], input=stdin)


REBOOT = ("request", "w1", "--intent", "reboot", "--reason", "kernel 6.8 rollout",
          "--confirm-node", "w1", "--ack-preflight", "-o", "json")


def test_request_run_status_json(config: Path) -> None:
    res = pp(config, *REBOOT)
    assert res.exit_code == 0, res.output
    name = json.loads(res.output)["name"]
    res = pp(config, "run", "--until-idle")
    assert res.exit_code == 0, res.output
    assert "w1: Drained -> Rebooting" in res.output
    res = pp(config, "status", "w1", "-o", "json")
    data = json.loads(res.output)
    assert {"name", "node", "intent", "phase", "conditions", "refusal", "dispatches"} <= set(data)
    assert (data["name"], data["phase"], data["dispatches"]) == (name, "Complete", 1)
    listed = json.loads(pp(config, "list", "--all", "-o", "json").output)
    assert [m["name"] for m in listed["maintenances"]] == [name]
    assert json.loads(pp(config, "list", "-o", "json").output) == {"maintenances": []}


def test_missing_ceremony_exits_2_and_records_nothing(config: Path) -> None:
    res = pp(config, "request", "w1", "--intent", "reboot", "--reason", "kernel 6.8 rollout")
    assert res.exit_code == 2
    assert "--confirm-node w1" in res.output
    assert json.loads(pp(config, "list", "-o", "json").output) == {"maintenances": []}


def test_below_quorum_exits_3_whatever_the_ceremony(config: Path) -> None:
    hazard = ("--confirm-node", "cp1", "--ack-preflight",
              "--hazard-reason", "planned window CHG-7")
    assert pp(config, "request", "cp1", "--intent", "cordon", "--reason", "rack move",
              *hazard).exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    res = pp(config, "request", "cp2", "--intent", "cordon", "--reason", "rack move",
             "--confirm-node", "cp2", "--ack-preflight",
             "--hazard-reason", "planned window CHG-7")
    assert res.exit_code == 3
    assert "3 control-plane members, 2 ready, quorum 2, margin 0" in res.output


def test_unknown_node_exits_2(config: Path) -> None:
    assert pp(config, "request", "nope", "--intent", "cordon", "--reason", "x" * 10).exit_code == 2


def test_prompts_for_a_person(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import powerplane.cli.maintenance as mod

    monkeypatch.setattr(mod, "_interactive", lambda: True)
    res = pp(config, "request", "w1", "--intent", "shutdown",
             stdin="swap the PSU in slot 2\ny\nw1\n")
    assert res.exit_code == 0, res.output
    assert "pre-flight" in res.output and "web-1" in res.output
    status = json.loads(pp(config, "status", "w1", "-o", "json").output)
    assert status["intent"] == "shutdown" and status["requestedBy"] == local_identity().user


def test_return_and_abandon(config: Path) -> None:
    assert pp(config, "request", "w1", "--intent", "drain", "--reason", "rack move",
              "--ack-preflight").exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    assert json.loads(pp(config, "status", "w1", "-o", "json").output)["phase"] == "Drained"
    res = pp(config, "return", "w1", "--reason", "rack moved", "-o", "json")
    assert res.exit_code == 0, res.output
    assert pp(config, "run", "--until-idle").exit_code == 0
    assert json.loads(pp(config, "status", "w1", "-o", "json").output)["phase"] == "Complete"
    assert pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move"
              ).exit_code == 0
    assert pp(config, "abandon", "w1", "--reason", "not today").exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    data = json.loads(pp(config, "status", "w1", "-o", "json").output)
    assert data["phase"] == "Complete"
    assert [h["to"] for h in data["history"]] == ["Returning", "Complete"]
    assert pp(config, "abandon", "w1", "--reason", "not today").exit_code == 2  # none active


def test_bad_lifecycle_config_names_the_path(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, lifecycle={"drain_deadline_s": "soon"})
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    res = pp(path, "list")
    assert res.exit_code == 2
    assert "lifecycle.drain_deadline_s" in res.output


def test_dry_run_shows_preflight_and_ceremony_and_records_nothing(config: Path) -> None:
    res = pp(config, "request", "w1", "--intent", "reboot", "--dry-run", "-o", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["dryRun"] and doc["accepted"] and not doc["recorded"]
    assert doc["preflight"]["pods"] == ["web-1"]
    assert doc["preflight"]["power"] == {"offered": True, "channel": "lab", "graceful": True,
                                         "verb": "reboot"}
    steps = {s["step"]: s for s in doc["ceremony"]}
    assert list(steps) == ["reason", "ack-preflight", "typed-node"]
    assert steps["reason"]["policy"]["min_length"] == 8 and not steps["reason"]["supplied"]
    assert steps["typed-node"]["flag"] == "--confirm-node" and steps["typed-node"]["value"] == "w1"
    assert not doc["ceremonyComplete"]
    assert not (config.parent / "lifecycle.db").exists()  # not even an empty store
    # with every flag, the same document says the ceremony is complete; still nothing recorded
    full = json.loads(pp(config, *REBOOT, "--dry-run").output)
    assert full["ceremonyComplete"] and full["accepted"]
    assert json.loads(pp(config, "list", "--all", "-o", "json").output) == {"maintenances": []}
    from powerplane.lifecycle import Store

    store = Store(config.parent / "lifecycle.db")
    try:
        assert store.audit() == []
    finally:
        store.close()


def test_dry_run_of_a_hazard_names_the_hazard_reason(config: Path) -> None:
    res = pp(config, "request", "cp1", "--intent", "shutdown", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "consumes the last of the quorum margin" in res.output
    assert "--hazard-reason" in res.output and "--confirm-node cp1" in res.output
    assert "power: shutdown via channel lab" in res.output
    assert "pods to evict: none" in res.output


def test_dry_run_of_a_refused_request_exits_3(config: Path) -> None:
    hazard = ("--confirm-node", "cp1", "--ack-preflight",
              "--hazard-reason", "planned window CHG-7")
    assert pp(config, "request", "cp1", "--intent", "cordon", "--reason", "rack move",
              *hazard).exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    res = pp(config, "request", "cp2", "--intent", "reboot", "--dry-run", "-o", "json")
    assert res.exit_code == 3
    doc = json.loads(res.output)
    assert not doc["accepted"]
    assert doc["refusal"]["exitCode"] == 3 and doc["refusal"]["error"] == "MaintenanceRefused"
    assert doc["refusal"]["quorum"]["margin"] == 0
    res = pp(config, "request", "cp2", "--intent", "reboot", "--dry-run")
    assert res.exit_code == 3 and "would be refused" in res.output
    assert len(json.loads(pp(config, "list", "--all", "-o", "json").output)["maintenances"]) == 1


def test_dry_run_of_a_withheld_verb_exits_3(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, verbs=("reboot", "power-on"))
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    res = pp(path, "request", "w1", "--intent", "shutdown", "--dry-run", "-o", "json")
    assert res.exit_code == 3
    doc = json.loads(res.output)
    assert doc["preflight"]["power"]["offered"] is False
    assert doc["refusal"]["error"] == "NotOffered"


def test_list_all_shows_who_abandoned_and_why(config: Path) -> None:
    me = local_identity().user  # who abandons: the OS user running the command
    assert pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move"
              ).exit_code == 0
    assert pp(config, "abandon", "w1", "--reason", "window [closed] early").exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    assert pp(config, *REBOOT).exit_code == 0
    assert pp(config, "run", "--until-idle").exit_code == 0
    rows = json.loads(pp(config, "list", "--all", "-o", "json").output)["maintenances"]
    assert [r["phase"] for r in rows] == ["Complete", "Complete"]
    assert rows[0]["abandoned"]["by"] == me
    assert rows[0]["abandoned"]["reason"] == "window [closed] early"
    assert rows[1]["abandoned"] is None
    table = pp(config, "list", "--all").output
    assert f"by {me}: window [closed] early" in table
    status = pp(config, "status", rows[0]["name"]).output
    assert f"abandoned by {me}" in status and "window [closed] early" in status


def test_an_undiscoverable_channel_is_a_channel_failure_not_a_refusal(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, channel={"faults": {"w1": "unreachable"}})
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    res = pp(path, "request", "w1", "--intent", "reboot", "--dry-run", "-o", "json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert doc["preflight"]["power"]["cause"] == "channel"
    assert doc["refusal"]["exitCode"] == 1
    res = pp(path, "request", "w1", "--intent", "reboot", "--reason", "kernel 6.8 rollout",
             "--confirm-node", "w1", "--ack-preflight")
    assert res.exit_code == 1, res.output
    assert "lab" in res.output


def _recorded(config: Path) -> tuple[list[Any], list[Any]]:
    """The maintenances and the audit records in the store (none when it was never made)."""
    from powerplane.lifecycle import Store

    if not (config.parent / "lifecycle.db").exists():
        return [], []
    store = Store(config.parent / "lifecycle.db")
    try:
        return store.all(), store.audit()
    finally:
        store.close()


@pytest.mark.parametrize("args", [
    ("request", "w1", "--intent", "cordon", "--reason", "rack move"),
    ("return", "w1", "--reason", "rack moved"),
    ("abandon", "w1", "--reason", "not today"),
    ("resolve", "w1", "--applied", "--reason", "checked at the rack console",
     "--confirm-node", "w1"),
], ids=["request", "return", "abandon", "resolve"])
def test_actor_is_refused_and_records_nothing(config: Path, args: tuple[str, ...]) -> None:
    """``--actor`` no longer names who asks (the OS user does): a usage error, exit 2, and
    nothing recorded, rather than a name silently ignored."""
    res = pp(config, *args, "--actor", "mallory")
    assert res.exit_code == 2, res.output
    assert "--actor" in res.output and "--on-behalf-of" in res.output
    assert _recorded(config) == ([], [])


def test_powerplane_actor_is_refused_and_records_nothing(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERPLANE_ACTOR", "mallory")
    res = pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move")
    assert res.exit_code == 2, res.output
    assert "POWERPLANE_ACTOR" in res.output
    assert _recorded(config) == ([], [])


def test_on_behalf_of_is_recorded_beside_the_os_user(config: Path) -> None:
    """``--on-behalf-of`` text is kept in the maintenance and its audit records; the actor
    stays the OS user running the command."""
    me = local_identity().user
    assert pp(config, "request", "w1", "--intent", "cordon", "--reason", "rack move",
              "--on-behalf-of", "eve (night shift)").exit_code == 0
    assert pp(config, "abandon", "w1", "--reason", "not today",
              "--on-behalf-of", "eve (night shift)").exit_code == 0
    (m,), audit = _recorded(config)
    assert (m.spec.requested_by, m.spec.on_behalf_of) == (me, "eve (night shift)")
    assert m.spec.abandon is not None and m.spec.abandon.actor == me
    assert [(a.action.value, a.actor, a.on_behalf_of) for a in audit] == [
        ("servers:cordon", me, "eve (night shift)"),
        ("servers:maintenance-abandon", me, "eve (night shift)")]
    status = json.loads(pp(config, "status", "w1", "-o", "json").output)
    assert status["requestedBy"] == me
