"""Every entry point that acts goes through the one runtime: the policy is asked, the guard
runs where a power verb is sent, and the act's audit record is durable before the act.

The table is ``powerplane.authority.actions.ENTRY_POINTS`` (docs/reference.md, "Every entry
point"): every CLI command, every ``fence_powerplane`` action and every public method of
``PowerHost`` and ``Lifecycle``. A new entry point fails
:func:`test_every_entry_point_is_in_the_table`; a new one that acts, and has no case here,
fails :func:`test_every_entry_point_that_acts_has_a_case`. For each case, on one deployment
with a ``lifecycle:`` section, a roles file and a ``witness`` channel (simulated machines
that, at the moment a verb reaches them, look into the trail for the act's record):

* **policy**: with exactly the entry's action denied, it is refused (exit 3 or
  ``PolicyDenied``), nothing is sent and the denial is in the trail;
* **guard** (the entries of ``SENDS_POWER``): aimed at a virtual node, it is refused by the
  lifecycle's guard and nothing is sent;
* **record before act**: allowed, every verb that reached a machine found its act's
  record already in the trail.

Before the runtime, a ``PowerHost`` an application built from a deployment with a
``lifecycle:`` section carried no guard: the guard cases of the ``api: PowerHost.*`` entries
sent the verb to the virtual node.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from powerplane import ChannelType, PowerHost, Verb, hookimpl, load_config
from powerplane.authority.actions import ENTRY_POINTS, SENDS_POWER, Action
from powerplane.authority.identity import local_identity
from powerplane.cli import cli, fence
from powerplane.errors import PowerplaneError
from powerplane.lifecycle import Ceremony, Lifecycle, Phase
from powerplane.lifecycle.model import Intent
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target
from powerplane.testing import registered

ME = local_identity().user
VIRTUAL = "powerplane.io/virtual-node"
REASON = "replace the PSU in slot 2"

_VERB_ACTIONS = {"reboot": {"servers:reboot"}, "shutdown": {"servers:shutdown"},
                 "power-on": {"servers:power-on"}, "terminate": {"servers:terminate"}}


# -- the witness: simulated machines that look into the trail as a verb reaches them --------
class WitnessConfig(SimulatedConfig):
    """A simulated channel's config, and the folder whose trail it reads (``audit.jsonl``,
    ``lifecycle.db``)."""

    trail: str


class WitnessChannel(SimulatedChannel):
    """At each verb, before it acts: is there an accepted record of this act in the trail?
    What it saw goes to ``witness.jsonl`` (verb, target, found)."""

    def __init__(self, name: str, config: WitnessConfig) -> None:
        super().__init__(name, config)
        self.folder = Path(config.trail)

    def _records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        audit = self.folder / "audit.jsonl"
        if audit.exists():
            out += [json.loads(line) for line in audit.read_text().splitlines() if line]
        db = self.folder / "lifecycle.db"
        if db.exists():
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                for node, action, extra in conn.execute(
                        "SELECT node, action, extra FROM audit"):
                    outcome = json.loads(extra or "{}").get("outcome", "accepted")
                    out.append({"node": node, "action": action, "outcome": outcome})
        return out

    def _witness(self, verb: str, target: str) -> None:
        found = any(r["node"] == target and r["outcome"] == "accepted"
                    and r["action"] in _VERB_ACTIONS[verb] for r in self._records())
        with (self.folder / "witness.jsonl").open("a") as out:
            out.write(json.dumps({"verb": verb, "target": target, "found": found}) + "\n")

    async def reboot(self, target: str) -> Any:
        self._witness("reboot", target)
        return await super().reboot(target)  # type: ignore[misc]

    async def shutdown(self, target: str) -> Any:
        self._witness("shutdown", target)
        return await super().shutdown(target)  # type: ignore[misc]

    async def power_on(self, target: str) -> Any:
        self._witness("power-on", target)
        return await super().power_on(target)  # type: ignore[misc]

    async def terminate(self, target: str) -> Any:
        self._witness("terminate", target)
        return await super().terminate(target)  # type: ignore[misc]


class WitnessPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType(name="witness", config=WitnessConfig, factory=WitnessChannel,
                             target=parse_target, gated_sends=True))


@pytest.fixture(autouse=True)
def witness_type() -> Iterator[None]:
    with registered(WitnessPlugin(), name="witness-test"):
        yield


# -- the deployment ----------------------------------------------------------------------------
@dataclass
class World:
    tmp: Path
    config: Path

    def deny(self, action: str | None) -> None:
        """Let this process's user do everything, but ``action`` (None: everything)."""
        role: dict[str, Any] = {"tier": "admin"}
        if action is not None:
            role["deny"] = [action]
        (self.tmp / "roles.yaml").write_text(yaml.safe_dump(
            {"roles": {"me": role}, "bindings": [{"role": "me", "users": [ME]}]}))

    def sent(self) -> list[dict[str, Any]]:
        path = self.tmp / "witness.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def denials(self, action: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["outcome"] == "denied" and r["action"] == action]

    def records(self) -> list[dict[str, Any]]:
        out = []
        audit = self.tmp / "audit.jsonl"
        if audit.exists():
            out += [json.loads(x) for x in audit.read_text().splitlines() if x]
        db = self.tmp / "lifecycle.db"
        if db.exists():
            with sqlite3.connect(db) as conn:
                for action, extra in conn.execute("SELECT action, extra FROM audit"):
                    out.append({"action": action,
                                "outcome": json.loads(extra or "{}").get("outcome",
                                                                        "accepted")})
        return out


@pytest.fixture
def world(tmp_path: Path) -> World:
    machines = {n: "on" for n in ("n1", "n2", "v1", "c1", "b1")}
    doc: dict[str, Any] = {
        "channels": {"lab": {"type": "witness", "trail": str(tmp_path),
                             "verbs": ["reboot", "shutdown", "power-on", "terminate"],
                             "machines": machines, "state_file": str(tmp_path / "m.json"),
                             "faults": {"b1": "lost-answer"}, "timeout_s": 0.05,
                             "boot_marker": False}},
        "nodes": {
            "n1": {"channels": [{"channel": "lab", "target": "n1"}]},
            "n2": {"channels": [{"channel": "lab", "target": "n2"}]},
            "v1": {"labels": {VIRTUAL: "true"}, "classification": "replaceable",
                   "channels": [{"channel": "lab", "target": "v1"}]},
            "c1": {"classification": "replaceable",
                   "channels": [{"channel": "lab", "target": "c1"}]},
            "b1": {"channels": [{"channel": "lab", "target": "b1"}]},
        },
        "policy": {"type": "local", "file": "roles.yaml"},
        "audit": {"path": str(tmp_path / "audit.jsonl")},
        "lifecycle": {"store": str(tmp_path / "lifecycle.db"),
                      "cluster": {"type": "simulated", "boot_id": False},
                      "storage": {"type": "none"}, "no_control_plane": True, "tick_s": 0.01,
                      "settle_window_s": 0.2, "readback_window_s": 0.5,
                      "readback_cadence_s": 0.01},
    }
    config = tmp_path / "powerplane.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    w = World(tmp_path, config)
    w.deny(None)
    return w


# -- running an entry point --------------------------------------------------------------------
def run_cli(w: World, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(w.config), *args])
    return result.exit_code, result.output


def run_fence(w: World, action: str, node: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = fence.run([f"--config={w.config}", f"--action={action}", f"--plug={node}",
                      "--power-timeout=2", "--reason=fenced by the cluster manager"],
                     stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def full(node: str) -> Ceremony:
    return Ceremony(reason=REASON, confirm_node=node, ack_preflight=True)


async def with_lifecycle(w: World, act: Callable[[Lifecycle], Awaitable[Any]]) -> Any:
    async with PowerHost(load_config(w.config), nodes=()) as host:
        lc = Lifecycle.for_host(host)
        try:
            return await act(lc)
        finally:
            lc.close()


def api(w: World, act: Callable[[Lifecycle], Awaitable[Any]]) -> tuple[int, str]:
    """An API call's outcome as an exit code: 0, or the code of what it raised (or of the
    first error among a fleet call's results)."""
    try:
        out = asyncio.run(with_lifecycle(w, act))
    except PowerplaneError as exc:
        return exc.exit_code, str(exc)
    if isinstance(out, dict):
        for value in out.values():
            if isinstance(value, PowerplaneError):
                return value.exit_code, str(value)
    return 0, ""


async def _stream(lc: Lifecycle, node: str, verb: Verb) -> dict[str, Any]:
    return {n: o async for n, o in lc.host.invoke_stream([node], verb, reason=REASON,
                                                          hazard_reason=None)}


def park(w: World, node: str, intent: str = "cordon") -> None:
    """A maintenance of ``node`` parked where a person acts on it next."""
    code, out = run_cli(w, "maintenance", "request", node, "--intent", intent, "--reason",
                        REASON, "--confirm-node", node, "--ack-preflight")
    assert code == 0, out
    code, out = run_cli(w, "maintenance", "run", "--until-idle")
    assert code == 0, out


def requested(w: World, node: str, intent: str) -> None:
    code, out = run_cli(w, "maintenance", "request", node, "--intent", intent, "--reason",
                        REASON, "--confirm-node", node, "--ack-preflight")
    assert code == 0, out


Run = Callable[[World, str], tuple[int, str]]


@dataclass(frozen=True)
class Case:
    """How to take one entry point on a node: ``prepare`` (under an allowing policy) puts the
    node where the entry applies; ``run`` takes it; ``action`` is what the policy is asked."""

    action: str
    run: Run
    prepare: Callable[[World, str], None] | None = None


def _invoke(verb: str) -> Run:
    return lambda w, n: run_cli(w, "invoke", n, verb, "--reason", REASON, "--yes",
                                "--confirm-node", n)


def _request(intent: str) -> Run:
    return lambda w, n: run_cli(w, "maintenance", "request", n, "--intent", intent,
                                "--reason", REASON, "--confirm-node", n, "--ack-preflight")


def _run_cli(w: World, n: str) -> tuple[int, str]:
    code, out = run_cli(w, "maintenance", "run", "--until-idle")
    if code == 0:  # the run itself succeeds; what it did to the node is the outcome
        return _outcome(w, n)
    return code, out


def _outcome(w: World, node: str) -> tuple[int, str]:
    """A run's effect on ``node``'s maintenance: 3 when it was refused (by the policy or the
    guard at execution), else 0."""
    async def latest(lc: Lifecycle) -> Any:
        return lc.store.latest_for(node)

    m = asyncio.run(with_lifecycle(w, latest))
    if m is not None and m.phase is Phase.REFUSED:
        return 3, m.status.refusal_reason or ""
    return 0, ""


def _lc_run(how: str) -> Run:
    async def act(lc: Lifecycle, node: str) -> None:
        if how == "run":
            await lc.run(until_idle=True, max_passes=50)
        elif how == "run_pass":
            for _ in range(20):
                await lc.run_pass()
        else:
            m = lc.store.active_for(node)
            assert m is not None
            await lc.host.discover([node])  # reconcile acts on what the host discovered
            for _ in range(20):
                await lc.reconcile(m.name)

    def run(w: World, n: str) -> tuple[int, str]:
        code, out = api(w, lambda lc: act(lc, n))
        return (code, out) if code else _outcome(w, n)

    return run


CASES: dict[str, Case] = {
    **{f"cli: invoke {v}": Case(f"servers:{v}", _invoke(v))
       for v in ("reboot", "shutdown", "power-on", "terminate")},
    **{f"cli: maintenance request --intent {i.value}": Case(f"servers:{i.value}",
                                                            _request(i.value))
       for i in Intent},
    "cli: maintenance return": Case(
        "servers:uncordon", lambda w, n: run_cli(w, "maintenance", "return", n, "--reason",
                                                 REASON), park),
    "cli: maintenance abandon": Case(
        "servers:maintenance-abandon", lambda w, n: run_cli(
            w, "maintenance", "abandon", n, "--reason", REASON), park),
    "cli: maintenance resolve": Case(
        "servers:maintenance-resolve", lambda w, n: run_cli(
            w, "maintenance", "resolve", n, "--applied", "--reason", REASON,
            "--confirm-node", n), lambda w, n: park(w, n, "reboot")),
    "cli: maintenance run": Case("servers:reboot", _run_cli,
                                 lambda w, n: requested(w, n, "reboot")),
    "fence: off": Case("servers:shutdown", lambda w, n: run_fence(w, "off", n)),
    "fence: on": Case("servers:power-on", lambda w, n: run_fence(w, "on", n),
                      lambda w, n: _taken_off(w, n)),
    "fence: reboot": Case("servers:shutdown", lambda w, n: run_fence(w, "reboot", n)),
    "api: PowerHost.invoke": Case("servers:reboot", lambda w, n: api(
        w, lambda lc: lc.host.invoke(n, Verb.REBOOT, reason=REASON))),
    "api: PowerHost.invoke_many": Case("servers:shutdown", lambda w, n: api(
        w, lambda lc: lc.host.invoke_many([n], Verb.SHUTDOWN, reason=REASON))),
    "api: PowerHost.invoke_stream": Case("servers:reboot", lambda w, n: api(
        w, lambda lc: _stream(lc, n, Verb.REBOOT))),
    "api: PowerHost.plan": Case("servers:shutdown", lambda w, n: api(
        w, lambda lc: lc.host.plan([n], Verb.SHUTDOWN, reason=REASON))),
    "api: Lifecycle.request": Case("servers:reboot", lambda w, n: api(
        w, lambda lc: lc.request(n, "reboot", full(n)))),
    "api: Lifecycle.admit": Case("servers:shutdown", lambda w, n: api(
        w, lambda lc: lc.admit(n, "shutdown", full(n)))),
    "api: Lifecycle.dry_run": Case("servers:drain", lambda w, n: _dry_run(w, n)),
    "api: Lifecycle.return_to_service": Case("servers:uncordon", lambda w, n: api(
        w, lambda lc: lc.return_to_service(n, full(n))), park),
    "api: Lifecycle.abandon": Case("servers:maintenance-abandon", lambda w, n: api(
        w, lambda lc: lc.abandon(n, full(n))), park),
    "api: Lifecycle.resolve": Case("servers:maintenance-resolve", lambda w, n: api(
        w, lambda lc: lc.resolve(n, full(n), applied=False)),
        lambda w, n: park(w, n, "reboot")),
    "api: Lifecycle.run": Case("servers:reboot", _lc_run("run"),
                               lambda w, n: requested(w, n, "reboot")),
    "api: Lifecycle.run_pass": Case("servers:shutdown", _lc_run("run_pass"),
                                    lambda w, n: requested(w, n, "shutdown")),
    "api: Lifecycle.reconcile": Case("servers:reboot", _lc_run("reconcile"),
                                     lambda w, n: requested(w, n, "reboot")),
}
"""Each entry point that acts (its table value an action other than ``servers:read``, or
:data:`SENDS_POWER`), and how to take it. ``cli: operator run`` is the operator's: its
cases are ``plugins/kubernetes/tests`` (``test_operator.py``)."""


def _dry_run(w: World, n: str) -> tuple[int, str]:
    async def act(lc: Lifecycle) -> tuple[dict[str, Any], int]:
        return await lc.dry_run(n, "drain", full(n))

    doc, code = asyncio.run(with_lifecycle(w, act))
    return code, (doc["refusal"] or {}).get("message", "")


def _taken_off(w: World, n: str) -> None:
    code, out = run_fence(w, "off", n)
    assert code == 0, out


def refused(entry: str, code: int) -> bool:
    """The entry's refusal: exit 3 (1 for the fence agent, whose interface has no other
    failure code)."""
    return code == (1 if entry.startswith("fence: ") else 3)


EXECUTING = {"cli: maintenance run", "api: Lifecycle.run", "api: Lifecycle.run_pass",
             "api: Lifecycle.reconcile"}
"""The entries that execute recorded requests (the policy and the guard asked again)."""

RESOLVABLE = {"cli: maintenance resolve", "api: Lifecycle.resolve"}
"""Cases whose node must be one whose reboot evidence cannot tell (``b1``: its answer is
lost, and neither a boot marker nor a boot id exists), so the maintenance awaits a person."""


def node_for(entry: str) -> str:
    if entry in RESOLVABLE:
        return "b1"
    if "terminate" in entry:
        return "c1"
    return "n1"


def acting(entry: str) -> bool:
    value = ENTRY_POINTS[entry]
    return entry in SENDS_POWER or (isinstance(value, Action) and value is not Action.READ)


# -- the table is complete ---------------------------------------------------------------------
def cli_and_api_entry_points() -> list[str]:
    from test_action_map import api_entry_points, cli_entry_points

    return cli_entry_points() + api_entry_points()


def test_every_entry_point_is_in_the_table() -> None:
    every = cli_and_api_entry_points() + [f"fence: {a}" for a in fence.ACTIONS]
    assert [e for e in every if e not in ENTRY_POINTS] == []
    assert [e for e in ENTRY_POINTS if e not in every] == []
    assert set(ENTRY_POINTS) >= SENDS_POWER


def test_every_entry_point_that_acts_has_a_case() -> None:
    """A new entry point that acts fails here until it has a case (and so its proofs)."""
    missing = [e for e in ENTRY_POINTS
               if acting(e) and e not in CASES and e != "cli: operator run"]
    assert missing == []
    for entry, case in CASES.items():
        value = ENTRY_POINTS[entry]
        if isinstance(value, Action):
            assert case.action == value.value, entry


# -- the three proofs, per entry point ---------------------------------------------------------
@pytest.mark.parametrize("entry", sorted(CASES))
def test_the_policy_is_asked(world: World, entry: str) -> None:
    case = CASES[entry]
    node = node_for(entry)
    if case.prepare is not None:
        case.prepare(world, node)
    before = len(world.sent())
    world.deny(case.action)
    code, out = case.run(world, node)
    assert refused(entry, code) and case.action in out, (code, out)
    assert world.sent()[before:] == []
    assert world.denials(case.action), world.records()


GUARDED = sorted(e for e in CASES if e in SENDS_POWER or e.startswith(
    ("cli: maintenance request --intent", "api: Lifecycle.request", "api: Lifecycle.admit",
     "api: PowerHost.plan", "api: Lifecycle.dry_run")))


@pytest.mark.parametrize("entry", GUARDED)
def test_the_guard_runs_where_a_power_verb_is_sent(world: World, entry: str) -> None:
    case = CASES[entry]
    if entry in EXECUTING:
        # the request is accepted while the node is not virtual; the deployment then marks
        # it virtual (a fixture the simulation creates): the executor's guard refuses it
        requested(world, "n1", "reboot" if "shutdown" not in case.action else "shutdown")
        doc = yaml.safe_load(world.config.read_text())
        doc["nodes"]["n1"]["labels"] = {VIRTUAL: "true"}
        world.config.write_text(yaml.safe_dump(doc, sort_keys=False))
        node = "n1"
    else:
        node = "v1"
    before = len(world.sent())
    code, out = case.run(world, node)
    assert refused(entry, code) and "virtual node" in out, (code, out)
    assert world.sent()[before:] == [], world.sent()


SENDING = sorted(e for e in CASES if e in SENDS_POWER or e in (
    "fence: on", "cli: invoke power-on"))


@pytest.mark.parametrize("entry", SENDING)
def test_the_acts_record_is_durable_before_the_act(world: World, entry: str) -> None:
    case = CASES[entry]
    node = node_for(entry)
    if case.prepare is not None:
        case.prepare(world, node)
    if entry == "fence: on":
        assert world.sent(), "the machine was not taken off first"
    before = len(world.sent())
    code, out = case.run(world, node)
    assert code == 0, (code, out)
    sent = world.sent()[before:]
    assert sent, f"{entry}: nothing reached the machine"
    assert all(s["found"] for s in sent), sent


def test_the_table_is_the_one_in_the_docs() -> None:
    """The reference's "Every entry point" table (docs/reference/authority.md) lists each
    entry and its action."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "reference" / "authority.md").read_text()
    start = doc.index("### Every entry point")
    table = doc[start:doc.index("\n#", start + 5)]
    for entry, value in ENTRY_POINTS.items():
        shown = value.value if isinstance(value, Action) else value
        row = f"| `{entry}` | {shown} | {'yes' if entry in SENDS_POWER else 'no'} |"
        assert row in table, row


def test_click_and_the_fence_agree_on_their_names() -> None:
    assert isinstance(cli, click.Group)
    assert set(fence.ACTIONS) == {a.removeprefix("fence: ") for a in ENTRY_POINTS
                                  if a.startswith("fence: ")}
