"""Every path that acts asks the policy first and records the act before it: ``PowerHost.invoke``
/ ``invoke_many``, the lifecycle's requests (request, return, abandon, resolve), the
reconciler where it executes, and the CLI. A denial is exit 3 with ``"cause": "policy"``,
recorded, never upgraded by a ceremony; an act whose record cannot be made durable is not
performed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from authority_support import ADMIN_ENGINEER_ROLES, jsonl, machines, write_deployment
from click.testing import CliRunner

from powerplane import PowerHost, load_config
from powerplane.authority.actions import Action
from powerplane.authority.identity import Identity, local_identity
from powerplane.capabilities import Verb
from powerplane.cli import cli
from powerplane.errors import AuditNotRecorded, PolicyDenied
from powerplane.lifecycle import Ceremony, Lifecycle
from powerplane.lifecycle.ceremony import CeremonyRequired
from powerplane.lifecycle.model import Phase
from powerplane.lifecycle.store import StoreError
from powerplane.runtime import authority_for

ALICE = Identity("alice")
VICTOR = Identity("victor")
ERIN = Identity("erin", ("plant-eng",))
DANA = Identity("dana", ("plant-admins",))


def sent(tmp: Path) -> list[list[str]]:
    """The verbs the simulated machines received, ``[verb, target]`` each."""
    return list(machines(tmp).get("dispatches", []))


def full(node: str, who: Identity | None = None, reason: str = "replace the PSU") -> Ceremony:
    return Ceremony(reason=reason, identity=who, confirm_node=node, ack_preflight=True)


# -- PowerHost -------------------------------------------------------------------------------
async def test_a_direct_invoke_denied_by_policy_sends_nothing_and_records_the_denial(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    async with PowerHost(deployment) as host:
        with pytest.raises(PolicyDenied) as caught:
            await host.invoke("n1", Verb.REBOOT, reason="kernel update", identity=VICTOR)
    assert caught.value.exit_code == 3 and caught.value.cause == "policy"
    assert str(caught.value) == (
        "denied: user victor (no groups) servers:reboot on n1: no role allows it; role "
        "viewer allows servers:read")
    assert sent(tmp_path) == []
    [record] = jsonl(audit)
    assert record["actor"] == "victor" and record["outcome"] == "denied"
    assert record["action"] == "servers:reboot" and record["rule"].startswith("no role")


async def test_every_accepted_direct_invoke_has_exactly_one_record_with_the_identity(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    async with PowerHost(deployment) as host:
        result = await host.invoke("n1", Verb.REBOOT, reason="kernel update", identity=DANA)
    assert result.accepted
    assert sent(tmp_path) == [["reboot", "n1"]]
    [record] = jsonl(audit)
    assert {k: record[k] for k in ("actor", "groups", "via", "action", "outcome", "node",
                                   "reason", "maintenance")} == {
        "actor": "dana", "groups": ["plant-admins"], "via": "local",
        "action": "servers:reboot", "outcome": "accepted", "node": "n1",
        "reason": "kernel update", "maintenance": ""}
    assert record["rule"] == "role admin allows it (tier admin)"


async def test_deny_wins_over_a_group_allowing_everything_on_the_direct_path(
    tmp_path: Path,
) -> None:
    deployment = load_config(write_deployment(tmp_path, audit=str(tmp_path / "a.jsonl")))
    async with PowerHost(deployment) as host:
        with pytest.raises(PolicyDenied, match="role no-shutdown denies it"):
            await host.invoke("n1", Verb.SHUTDOWN, reason="PSU swap", identity=DANA)
    assert sent(tmp_path) == []


async def test_a_fleet_call_acts_on_the_allowed_nodes_and_refuses_the_others(
    tmp_path: Path,
) -> None:
    roles = {"roles": {"plant-a": {"allow": ["servers:reboot"], "sites": ["plant-a"]}},
             "bindings": [{"role": "plant-a", "users": ["pat"]}]}
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(
        tmp_path, roles, nodes=("a1", "a2", "b1"), sites={"b1": "plant-b"}, audit=str(audit)))
    async with PowerHost(deployment) as host:
        out = await host.invoke_many(["a1", "a2", "b1"], Verb.REBOOT, reason="kernel",
                                     identity=Identity("pat"))
    assert isinstance(out["b1"], PolicyDenied)
    assert "out of its scope" in str(out["b1"])
    assert not isinstance(out["a1"], Exception) and not isinstance(out["a2"], Exception)
    assert sorted(sent(tmp_path)) == [["reboot", "a1"], ["reboot", "a2"]]
    records = jsonl(audit)
    assert sorted((r["node"], r["outcome"]) for r in records) == [
        ("a1", "accepted"), ("a2", "accepted"), ("b1", "denied")]


@pytest.mark.parametrize("fleet", [False, True])
async def test_an_act_whose_record_cannot_be_written_is_not_performed(
    tmp_path: Path, fleet: bool,
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    deployment = load_config(write_deployment(tmp_path, audit=str(blocked / "audit.jsonl")))
    async with PowerHost(deployment) as host:
        if fleet:
            out = await host.invoke_many(["n1", "n2"], Verb.REBOOT, reason="kernel",
                                         identity=ALICE)
            assert all(isinstance(e, AuditNotRecorded) for e in out.values())
            error = out["n1"]
        else:
            with pytest.raises(AuditNotRecorded) as caught:
                await host.invoke("n1", Verb.REBOOT, reason="kernel", identity=ALICE)
            error = caught.value
    assert error.exit_code == 1
    assert "nothing was done" in str(error)
    assert sent(tmp_path) == []


class FailingAuditStore:
    """A store whose every audit write fails (and so every create with a record)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create(self, m: Any, audit: Any = None) -> Any:
        if audit is not None:
            raise StoreError(Path("audit"), "the audit write failed")
        return self.inner.create(m)

    def update(self, m: Any, audit: Any = None) -> Any:
        if audit is not None:
            raise StoreError(Path("audit"), "the audit write failed")
        return self.inner.update(m)

    def append_audit(self, rec: Any) -> None:
        raise StoreError(Path("audit"), "the audit write failed")


@pytest.fixture
async def lifecycle(tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[tuple[PowerHost, Lifecycle]] = []

    async def make(roles: dict[str, Any] | None = ADMIN_ENGINEER_ROLES, **kw: Any) -> Lifecycle:
        deployment = load_config(write_deployment(tmp_path, roles, lifecycle=True, **kw))
        host = PowerHost(deployment)
        await host.start()
        lc = Lifecycle.for_host(host)
        opened.append((host, lc))
        return lc

    yield make
    for host, lc in opened:
        lc.close()
        await host.close()


async def test_a_store_that_fails_the_audit_write_performs_nothing(
    lifecycle: Any, tmp_path: Path,
) -> None:
    lc = await lifecycle()
    real = lc.store
    lc.store = FailingAuditStore(lc.store)
    lc.reconciler.store = lc.store
    with pytest.raises(StoreError):
        await lc.request("n1", "reboot", full("n1", ALICE))
    assert lc.store.all() == []
    # the host's trail is the same store (the runtime composed it so): make its audit
    # table refuse every write, as a full disk would
    import sqlite3

    with sqlite3.connect(real.path) as db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON audit "
                   "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(AuditNotRecorded):
        await lc.host.invoke("n1", Verb.REBOOT, reason="kernel update", identity=ALICE)
    assert sent(tmp_path) == []


# -- the lifecycle ---------------------------------------------------------------------------
async def test_a_request_is_denied_before_its_ceremony_is_looked_at(lifecycle: Any) -> None:
    lc = await lifecycle()
    with pytest.raises(PolicyDenied) as caught:
        await lc.request("n1", "reboot", Ceremony(reason="", identity=ERIN))
    assert not isinstance(caught.value, CeremonyRequired)
    assert "erin (groups: plant-eng) servers:reboot on n1" in str(caught.value)
    assert lc.store.all() == []
    [denial] = lc.store.audit("n1")
    assert (denial.actor, denial.outcome, denial.action.value) == (
        "erin", "denied", "servers:reboot")
    doc, code = await lc.dry_run("n1", "reboot", Ceremony(reason="", identity=ERIN))
    assert code == 3 and doc["refusal"]["error"] == "PolicyDenied"


async def test_an_accepted_request_records_the_identity_on_the_object_and_in_the_trail(
    lifecycle: Any,
) -> None:
    lc = await lifecycle()
    who = Identity("erin", ("plant-eng",), on_behalf_of="night shift")
    m = await lc.request("n1", "cordon", Ceremony(reason="replace the PSU", identity=who))
    summary = m.summary()
    assert (summary["requestedBy"], summary["requesterGroups"], summary["onBehalfOf"]) == (
        "erin", ["plant-eng"], "night shift")
    [record] = lc.store.audit("n1")
    assert (record.actor, record.groups, record.on_behalf_of, record.maintenance) == (
        "erin", ("plant-eng",), "night shift", m.name)


async def test_return_abandon_and_resolve_each_ask_their_own_action(lifecycle: Any) -> None:
    lc = await lifecycle()
    m = await lc.request("n1", "cordon", Ceremony(reason="replace the PSU", identity=ERIN))
    await lc.run(until_idle=True)
    assert lc.store.get(m.name).phase is Phase.CORDONED
    with pytest.raises(PolicyDenied, match="servers:maintenance-abandon"):
        await lc.abandon("n1", Ceremony(reason="changed my mind", identity=ERIN))
    with pytest.raises(PolicyDenied, match="servers:maintenance-resolve"):
        await lc.resolve("n1", Ceremony(reason="seen at the rack", identity=ERIN,
                                        confirm_node="n1"), applied=True)
    with pytest.raises(PolicyDenied, match="servers:uncordon"):
        await lc.return_to_service("n1", Ceremony(reason="done with it", identity=VICTOR))
    back = await lc.return_to_service("n1", Ceremony(reason="done with it", identity=ERIN))
    assert back.spec.return_request is not None and back.spec.return_request.actor == "erin"


async def test_the_executor_refuses_a_request_whose_requester_lost_the_right(
    lifecycle: Any, tmp_path: Path,
) -> None:
    lc = await lifecycle()
    m = await lc.request("n1", "cordon", Ceremony(reason="replace the PSU", identity=ERIN))
    revoked = {**ADMIN_ENGINEER_ROLES, "bindings": [
        b for b in ADMIN_ENGINEER_ROLES["bindings"] if b["role"] != "maintenance-engineer"]}
    runner = await lifecycle(revoked)  # the roles file changed before the runner ran
    await runner.run(until_idle=True)
    done = runner.store.get(m.name)
    assert done.phase is Phase.REFUSED
    assert "servers:cordon" in (done.status.refusal_reason or "")
    assert "no role in" in (done.status.refusal_reason or "")
    assert not await runner.ports.cluster.is_cordoned("n1")
    outcomes = [(r.actor, r.outcome, r.action.value) for r in runner.store.audit("n1")]
    assert outcomes == [("erin", "accepted", "servers:cordon"),
                        ("erin", "denied", "servers:cordon")]


async def test_a_right_lost_after_the_cordon_holds_the_maintenance_before_the_next_act(
    lifecycle: Any, tmp_path: Path,
) -> None:
    roles = {"roles": {"drainer": {"allow": ["servers:cordon", "servers:drain"]}},
             "bindings": [{"role": "drainer", "users": ["erin"]}]}
    lc = await lifecycle(roles)
    m = await lc.request("n1", "drain", Ceremony(reason="replace the PSU", identity=ERIN,
                                                  ack_preflight=True))
    await lc.reconciler.reconcile(m.name, max_steps=1)
    assert lc.store.get(m.name).phase is Phase.CORDONED
    runner = await lifecycle({"roles": roles["roles"], "bindings": [
        {"role": "drainer", "users": ["someone-else"]}]})
    await runner.run(until_idle=True)
    held = runner.store.get(m.name)
    assert held.phase is Phase.CORDONED
    cond = held.condition("Authorized")
    assert cond is not None and cond.status.value == "False"
    assert "servers:drain" in cond.message


async def test_two_identities_asking_for_one_node_at_once_make_one_maintenance(
    lifecycle: Any,
) -> None:
    first = await lifecycle()
    second = await lifecycle()
    results = await asyncio.gather(
        first.request("n1", "reboot", full("n1", ALICE)),
        second.request("n1", "reboot", full("n1", DANA)),
        return_exceptions=True)
    made = [r for r in results if not isinstance(r, BaseException)]
    assert len(made) == 1
    assert len(first.store.all()) == 1
    accepted = [r for r in first.store.audit("n1") if r.outcome == "accepted"]
    assert [r.actor for r in accepted] == [made[0].spec.requested_by]
    assert accepted[0].maintenance == made[0].name


# -- the CLI ---------------------------------------------------------------------------------
def run(config: Path, *args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["--config", str(config), *args],
                                                      input=input)
    return result.exit_code, result.output


def as_me(roles: dict[str, Any]) -> dict[str, Any]:
    """``roles`` with its bindings for ``ME`` bound to this process's own OS user."""
    me = local_identity().user
    text = json.dumps(roles).replace('"ME"', json.dumps(me))
    out: dict[str, Any] = json.loads(text)
    return out


def test_cli_invoke_denied_exits_3_with_cause_policy_before_any_prompt(tmp_path: Path) -> None:
    config = write_deployment(tmp_path, as_me({
        "roles": {"eng": {"tier": "read", "allow": ["servers:cordon"]}},
        "bindings": [{"role": "eng", "users": ["ME"]}]}))
    code, out = run(config, "invoke", "n1", "n2", "reboot", "--reason", "kernel", "-o", "json",
                    input="n1\n")
    assert code == 3
    doc = json.loads(out)
    assert [(n["node"], n["cause"], n["exit_code"]) for n in doc["nodes"]] == [
        ("n1", "policy", 3), ("n2", "policy", 3)]
    assert "Type the node" not in out and sent(tmp_path) == []


def test_cli_invoke_denied_records_each_node_once_plan_and_call_one_request(
    tmp_path: Path,
) -> None:
    """The CLI plans, then calls: one request, each node's denial recorded once, no count of
    a repeat that was the same request asked twice."""
    audit = tmp_path / "audit.jsonl"
    config = write_deployment(tmp_path, as_me({
        "roles": {"eng": {"tier": "read", "allow": ["servers:cordon"]}},
        "bindings": [{"role": "eng", "users": ["ME"]}]}), audit=str(audit))
    code, _ = run(config, "invoke", "n1", "n2", "reboot", "--reason", "kernel", "--yes")
    assert code == 3
    assert sorted((r["node"], r["outcome"], r["detail"]) for r in jsonl(audit)) == [
        ("n1", "denied", ""), ("n2", "denied", "")]
    # the same request again, in another process: another denial of each, recorded so
    code, _ = run(config, "invoke", "n1", "n2", "reboot", "--reason", "kernel", "--yes")
    assert code == 3 and len(jsonl(audit)) == 4


def test_cli_offers_says_per_verb_what_this_caller_may_do(tmp_path: Path) -> None:
    config = write_deployment(tmp_path, as_me({
        "roles": {"eng": {"tier": "read", "allow": ["servers:reboot"]}},
        "bindings": [{"role": "eng", "users": ["ME"]}]}))
    code, out = run(config, "offers", "n1", "-o", "json")
    assert code == 0, out
    verbs = json.loads(out)["nodes"][0]["verbs"]
    assert verbs["reboot"]["allowed"] is True
    assert verbs["shutdown"]["allowed"] is False
    assert verbs["shutdown"]["policy"].startswith("no role allows it")


def test_cli_reads_of_a_node_the_caller_may_not_read_are_refused(tmp_path: Path) -> None:
    config = write_deployment(tmp_path, {"roles": {"admin": {"tier": "admin"}},
                                         "bindings": [{"role": "admin", "users": ["alice"]}]})
    for args in (["offers", "n1"], ["state", "n1"]):
        code, out = run(config, *args)
        assert code == 3, out
        assert "servers:read" in out
    result = CliRunner().invoke(cli, ["--config", str(config), "offers", "-o", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"nodes": [], "channels": []}  # nothing of theirs
    assert "2 node(s) not shown: you may not read them" in result.stderr


def test_cli_maintenance_request_denied_records_nothing_but_the_denial(tmp_path: Path) -> None:
    config = write_deployment(tmp_path, as_me({
        "roles": {"eng": {"tier": "read", "allow": ["servers:cordon"]}},
        "bindings": [{"role": "eng", "users": ["ME"]}]}), lifecycle=True)
    code, out = run(config, "maintenance", "request", "n1", "--intent", "reboot",
                    "--reason", "replace the PSU")
    assert code == 3, out
    assert "servers:reboot" in out
    code, out = run(config, "maintenance", "request", "n1", "--intent", "cordon",
                    "--reason", "replace the PSU", "--on-behalf-of", "night shift",
                    "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["requestedBy"] == local_identity().user and doc["onBehalfOf"] == "night shift"
    code, out = run(config, "audit", "-o", "json")
    assert code == 0, out
    trail = [(r["actor"], r["action"], r["outcome"]) for r in json.loads(out)["records"]]
    me = local_identity().user
    assert trail == [(me, "servers:reboot", "denied"), (me, "servers:cordon", "accepted")]


def test_actor_flag_and_variable_are_refused_and_record_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = write_deployment(tmp_path, None, lifecycle=True)
    code, out = run(config, "maintenance", "request", "n1", "--intent", "cordon",
                    "--reason", "replace the PSU", "--actor", "mallory")
    assert code == 2 and "--actor no longer names the actor" in out
    monkeypatch.setenv("POWERPLANE_ACTOR", "mallory")
    code, out = run(config, "maintenance", "request", "n1", "--intent", "cordon",
                    "--reason", "replace the PSU")
    assert code == 2 and "$POWERPLANE_ACTOR no longer names the actor" in out
    assert not (tmp_path / "lifecycle.db").exists() or "mallory" not in run(
        config, "audit", "-o", "json")[1]


def test_auth_can_i_as_someone_else_reads_only(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    config = write_deployment(tmp_path, audit=str(audit))
    code, out = run(config, "auth", "can-i", "servers:shutdown", "n1", "--as", "erin",
                    "--group", "plant-eng", "-o", "json")
    assert code == 3
    assert json.loads(out)["allowed"] is False
    code, out = run(config, "auth", "can-i", "cordon", "n1", "--as", "erin",
                    "--group", "plant-eng")
    assert code == 0 and "role maintenance-engineer allows it (its allow list)" in out
    assert not audit.exists()


def test_repeated_denials_are_folded_into_one_record_with_their_count(tmp_path: Path) -> None:
    from powerplane.authority.folding import denials_in
    from powerplane.lifecycle import AuditRecord

    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    authority = authority_for(deployment)

    async def loop() -> None:
        for i in range(200):
            await authority.authorize(Action.REBOOT, [("n1", deployment.nodes["n1"])],
                                      VICTOR, reason=f"attempt {i}")
        await authority.authorize(Action.REBOOT, [("n1", deployment.nodes["n1"])], ERIN,
                                  reason="once")

    asyncio.run(loop())
    authority.flush_denials()  # at close (a host's close does it)
    records = jsonl(audit)
    victor = [r for r in records if r["actor"] == "victor"]
    assert victor[0]["detail"] == ""
    assert victor[1]["detail"].startswith("and 199 more of servers:reboot by victor since ")
    assert victor[1]["reason"] == "attempt 1"  # the first repeat's
    assert len(victor) == 2
    assert sum(denials_in(AuditRecord.from_dict(r)) for r in victor) == 200
    assert [r["actor"] for r in records].count("erin") == 1


async def test_a_denial_asked_twice_for_one_request_is_recorded_once(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    async with PowerHost(deployment) as host:
        with host.authority.request():
            await host.plan(["n1", "n2"], Verb.REBOOT, "kernel", identity=VICTOR)
            out = await host.invoke_many(["n1", "n2"], Verb.REBOOT, "kernel",
                                         identity=VICTOR)
    assert all(isinstance(e, PolicyDenied) for e in out.values())
    assert sorted(r["node"] for r in jsonl(audit)) == ["n1", "n2"]
    assert all(r["detail"] == "" for r in jsonl(audit))


async def test_a_denial_asked_again_outside_one_request_is_counted(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))
    async with PowerHost(deployment) as host:
        for _ in range(3):
            await host.invoke_many(["n1"], Verb.REBOOT, "kernel", identity=VICTOR)
    # the host's close wrote the count still folding
    assert [r["detail"].split(" since ")[0] for r in jsonl(audit)] == [
        "", "and 2 more of servers:reboot by victor"]


def test_a_deployment_without_policy_allows_and_records_the_real_identity(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    config = write_deployment(tmp_path, None, audit=str(audit))
    code, out = run(config, "invoke", "n1", "reboot", "--reason", "kernel", "--yes")
    assert code == 0, out
    [record] = jsonl(audit)
    me = local_identity()
    assert (record["actor"], tuple(record["groups"])) == (me.user, me.groups)
    assert record["rule"] == "the deployment has no policy: section (every action allowed)"


def test_the_authority_of_an_embedder_records_its_own_identity(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    deployment = load_config(write_deployment(tmp_path, audit=str(audit)))

    async def go() -> None:
        async with PowerHost(deployment, identity=Identity("alice", via="oidc")) as host:
            await host.invoke("n2", Verb.REBOOT, reason="kernel")

    asyncio.run(go())
    [record] = jsonl(audit)
    assert (record["actor"], record["via"]) == ("alice", "oidc")
