"""``powerplane maintenance``: request, status, list, abandon, return, resolve, run.

The ceremony comes as flags for scripts (``--confirm-node``, ``--ack-preflight``,
``--hazard-reason``) or as prompts for a person at a terminal. A refusal is never turned
into a prompt: denied by the policy, below quorum, a virtual node or a withheld verb exits
3. The requester is this process's OS user and groups (the platform says who; no flag
does): ``--on-behalf-of TEXT`` is recorded beside it and authorizes nothing.
``request --dry-run`` prints the pre-flight and the ceremony a request needs and records
nothing (exit 0 when it would be accepted, 3 when refused).

Every subcommand needs the deployment's ``lifecycle:`` section: without one it says so
(exit 2) and creates nothing (no store beside the config). An argument that is not text
(bytes the locale could not decode) is bad input naming its option (exit 2), never sent to
the store.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from powerplane.cli._common import (
    authority_of,
    console,
    emit_json,
    esc,
    handle_errors,
    load_deployment,
    on_behalf_of_identity,
    on_behalf_of_option,
    open_host,
    output_option,
    printer,
    run_async,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable

    from powerplane.config import Deployment
    from powerplane.lifecycle.model import NodeMaintenance, Preflight
    from powerplane.lifecycle.ports import MaintenanceStore
    from powerplane.runtime import PowerHost

__all__ = ["maintenance_group"]

SHOWN_CONDITIONS = (
    "Drained", "Evacuated", "EvacuationPaused", "SafetyHold", "PowerOffConfirmed",
    "AwaitingPowerOn", "DispatchIndeterminate", "PortError",
)
"""Conditions ``maintenance run`` prints as they change (what a maintenance waits on)."""


@click.group("maintenance")
def maintenance_group() -> None:
    """The node-maintenance lifecycle: cordon, drain, reboot or shut down, return to service."""


def _require_lifecycle(deployment: Deployment) -> None:
    """A deployment without a ``lifecycle:`` section has no maintenances: say so (exit 2)
    rather than open (and create) the default store beside the config."""
    from powerplane.errors import ConfigError, ConfigProblem

    if deployment.lifecycle or "lifecycle" in (deployment.raw or {}):
        return
    raise ConfigError([ConfigProblem(
        "lifecycle",
        "this deployment has no lifecycle: section, and `powerplane maintenance` needs one "
        "(for example: lifecycle: {store: ./powerplane.db, cluster: {type: simulated}}); "
        "nothing was created")], source=deployment.source)


def _host(ctx: click.Context, nodes: Iterable[str] | None) -> PowerHost:
    """``open_host`` for a maintenance subcommand: refused without a ``lifecycle:`` section."""
    host = open_host(ctx, nodes=nodes)
    _require_lifecycle(host.deployment)
    return host


def _open_store(ctx: click.Context) -> MaintenanceStore:
    from powerplane.lifecycle.ports import open_store
    from powerplane.settings.lifecycle import lifecycle_config

    deployment = load_deployment(ctx)
    _require_lifecycle(deployment)
    config = lifecycle_config(deployment.lifecycle, deployment.source)
    return open_store(config, deployment.source)


def _readable(ctx: click.Context, nodes: Iterable[str]) -> set[str]:
    """The nodes among ``nodes`` the policy lets you read (``servers:read``); a denial of
    a node the deployment no longer has is decided without its spec."""
    from powerplane.authority.actions import Action

    deployment = load_deployment(ctx)
    asked = [(n, deployment.nodes.get(n)) for n in dict.fromkeys(nodes)]
    return set(run_async(authority_of(deployment).permitted(Action.READ, asked)))


def _require_read(ctx: click.Context, node: str) -> None:
    """Refuse (exit 3, the denial recorded) unless the policy lets you read ``node``."""
    from powerplane.authority.actions import Action

    deployment = load_deployment(ctx)
    run_async(authority_of(deployment).require(Action.READ, node, deployment.nodes.get(node)))


def _text_arguments(**values: str | None) -> None:
    """Refuse, as bad input naming the option (exit 2), any argument that is not text: the
    store is never asked to hold it (and never called damaged for it)."""
    from powerplane.cli.commands import check_text

    for name, value in values.items():
        check_text(value, "NODE" if name == "node" else "--" + name.replace("_", "-"))


def _interactive() -> bool:
    return sys.stdin.isatty()


def _ask_reason(value: str | None, what: str = "reason") -> str:
    if value is not None:
        return value
    if not _interactive():
        raise click.UsageError(f"--{what.replace(' ', '-')} is required")
    return str(click.prompt(f"{what.capitalize()} (recorded in the audit trail)"))


def _on_behalf_of(text: str | None) -> str | None:
    """``--on-behalf-of``'s text (who asks is the identity the platform authenticated: this
    process's OS user, or the API server's user with the ``kubernetes`` store; never a
    flag, and ``$POWERPLANE_ACTOR`` is refused)."""
    return on_behalf_of_identity(text).on_behalf_of


def _print_preflight(
    node: str, intent: str, pre: Preflight, hazard_reason: str, stderr: bool = True
) -> None:
    out = console(stderr=stderr)
    out.print(f"[bold]pre-flight[/bold] for {esc(intent)} of {esc(node)}:")
    out.print(f"  pods to evict: {esc(', '.join(pre.pods) or 'none')}")
    if pre.pdbs:
        out.print(f"  disruption budgets: {esc(', '.join(pre.pdbs))}")
    if pre.quorum is not None:
        q = pre.quorum
        out.print(f"  control plane: {q.members} members, {q.ready} ready, quorum {q.quorum}, "
                  f"margin {q.margin}")
    if pre.hazard:
        out.print(f"  [bold red]HAZARD[/bold red]: {esc(hazard_reason)}")
    if pre.power:
        verb = esc(pre.power.get("verb"))
        if pre.power.get("offered"):
            how = "graceful" if pre.power.get("graceful") else "hard"
            out.print(f"  power: {verb} via channel {esc(pre.power.get('channel'))} ({how})")
        else:
            out.print(f"  power: {verb} withheld: {esc(pre.power.get('reason'))}")
    else:
        out.print("  power: no power verb (this intent does not power the machine)")
    out.print(f"  storage: {esc(pre.storage)}")


def _print_dry_run(doc: dict[str, Any]) -> None:
    from powerplane.lifecycle.model import Preflight

    out = console()
    what = f"{esc(doc['intent'])} of {esc(doc['node'])}"
    if doc["refusal"] is not None:
        out.print(f"dry run: the request for {what} would be refused: "
                  f"{esc(doc['refusal']['message'])}")
    else:
        out.print(f"dry run: the request for {what} would be accepted once its ceremony is "
                  "complete; nothing was recorded")
    if doc["preflight"] is not None:
        pre = Preflight.model_validate(doc["preflight"])
        _print_preflight(doc["node"], doc["intent"], pre, doc["verdict"] or "", stderr=False)
    out.print(f"ceremony ({esc(doc['action'])}):")
    for step in doc["ceremony"]:
        flag = step["flag"] + (f" {step['value']}" if "value" in step else "")
        state = "supplied" if step["supplied"] else f"missing: {step['problem']}"
        out.print(f"  {esc(flag)}: {esc(step['needs'])} ({esc(state)})")


@maintenance_group.command("request")
@click.argument("node")
@click.option("--intent", type=click.Choice(["cordon", "drain", "reboot", "shutdown"]),
              required=True, help="How far the maintenance goes.")
@click.option("--reason", default=None, help="Why (must meet the reason policy).")
@on_behalf_of_option
@click.option("--confirm-node", default=None, help="The node name, typed (reboot, shutdown).")
@click.option("--ack-preflight", is_flag=True, help="Acknowledge the pre-flight impact.")
@click.option("--hazard-reason", default=None,
              help="Typed reason for consuming the last of the quorum margin.")
@click.option("--dry-run", is_flag=True,
              help="Print the pre-flight and the ceremony the request needs; record nothing "
                   "(exit 0: would be accepted, 3: refused).")
@output_option
@click.pass_context
@handle_errors
def request_cmd(
    ctx: click.Context,
    node: str,
    intent: str,
    reason: str | None,
    on_behalf_of: str | None,
    confirm_node: str | None,
    ack_preflight: bool,
    hazard_reason: str | None,
    dry_run: bool,
    output: str,
) -> None:
    """Request a maintenance of NODE with the ceremony its intent needs."""
    from powerplane.authority.actions import action_for_intent
    from powerplane.lifecycle.ceremony import Ceremony, Step, required
    from powerplane.lifecycle.model import Intent
    from powerplane.lifecycle.service import Lifecycle

    the_intent = Intent(intent)
    _text_arguments(node=node, reason=reason, on_behalf_of=on_behalf_of, confirm_node=confirm_node,
                    hazard_reason=hazard_reason)

    if dry_run:
        async def look() -> tuple[dict[str, Any], int]:
            # NODE's channels discovered at start (an unknown NODE: exit 2); the rest on
            # first use (the quorum's members are read through their own channels)
            async with _host(ctx, nodes=[node]) as host:
                lc = Lifecycle.for_host(host, create_store=False)
                try:
                    return await lc.dry_run(
                        node, the_intent,
                        Ceremony(reason=reason or "", on_behalf_of=_on_behalf_of(on_behalf_of),
                                 confirm_node=confirm_node, ack_preflight=ack_preflight,
                                 hazard_reason=hazard_reason),
                    )
                finally:
                    lc.close()

        doc, code = run_async(look())
        if output == "json":
            emit_json(doc)
        else:
            _print_dry_run(doc)
        sys.exit(code)

    async def go() -> dict[str, Any]:
        async with _host(ctx, nodes=[node]) as host:
            lc = Lifecycle.for_host(host)
            try:
                # the policy and the rules first: a refusal never prompts
                pre, verdict, _ = await lc.admit(
                    node, the_intent, Ceremony(reason=reason or "",
                                               on_behalf_of=_on_behalf_of(on_behalf_of)))
                steps = required(action_for_intent(the_intent), verdict.hazard)
                people = _interactive()
                if people:
                    _print_preflight(node, intent, pre, verdict.reason)
                why = _ask_reason(reason)
                ack = ack_preflight
                if Step.ACK_PREFLIGHT in steps and not ack and people:
                    ack = click.confirm("Acknowledge the pre-flight impact?", default=False,
                                        err=True)
                typed = confirm_node
                if Step.TYPED_NODE in steps and typed is None and people:
                    typed = click.prompt("Type the node name to confirm", default="",
                                         show_default=False, err=True)
                hazard = hazard_reason
                if Step.HAZARD_REASON in steps and hazard is None and people:
                    hazard = click.prompt("Hazard: type the reason for consuming the last of "
                                          "the quorum margin", err=True)
                m = await lc.request(
                    node,
                    the_intent,
                    Ceremony(reason=why, on_behalf_of=_on_behalf_of(on_behalf_of),
                             confirm_node=typed, ack_preflight=ack, hazard_reason=hazard),
                )
                return m.summary()
            finally:
                lc.close()

    data = run_async(go())
    if output == "json":
        emit_json(data)
        return
    hazard = " [bold red](hazard)[/bold red]" if data["hazard"] else ""
    printer().print("requested {}: {} of {}" + hazard + "; run `powerplane maintenance run` to "
                    "carry it out", data["name"], data["intent"], data["node"])


def _show(m: dict[str, Any]) -> None:
    echo = click.echo
    echo(f"{m['name']}  node {m['node']}  intent {m['intent']}  phase {m['phase']}")
    echo(f"  requested by {m['requestedBy']}: {m['reason']}")
    if m.get("abandoned"):
        a = m["abandoned"]
        echo(f"  abandoned by {a['by']} at {a['at']}: {a['reason']}")
    if m["refusal"]:
        echo(f"  refusal: {m['refusal'].get('reason', '')}")
    if m["lastError"]:
        echo(f"  last error: {m['lastError']}")
    if m.get("awaitingResolution"):
        echo(f"  AWAITING RESOLUTION: {m['awaitingResolution']}")
    if m.get("machineReadsOn"):
        poc = m["conditions"].get("PowerOffConfirmed", {}).get("status", "Unknown")
        echo(f"  the machine still reads on (PowerOffConfirmed={poc})")
    for kind, cond in m["conditions"].items():
        echo(f"  {kind}={cond['status']} ({cond['reason']}) {cond['message']}")
    for d in m["dispatchRecords"]:
        echo(f"  dispatch {d['verb']} via {d['channel']} at {d['recordedAt']}: "
             f"{d['outcome'] or 'no outcome yet'} {d['detail']}")
    for t in m["history"]:
        echo(f"  {t['at']}  {t['from']} -> {t['to']}  {t['why']}")


@maintenance_group.command("status")
@click.argument("node_or_name")
@output_option
@click.pass_context
@handle_errors
def status_cmd(ctx: click.Context, node_or_name: str, output: str) -> None:
    """The maintenance of NODE (its active one, else its latest), or one by name."""
    _text_arguments(node=node_or_name)
    store = _open_store(ctx)
    try:
        data = store.find(node_or_name).summary()
    finally:
        store.close()
    _require_read(ctx, data["node"])
    if output == "json":
        emit_json(data)
    else:
        _show(data)


@maintenance_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include finished maintenances.")
@output_option
@click.pass_context
@handle_errors
def list_cmd(ctx: click.Context, show_all: bool, output: str) -> None:
    """Active maintenances (every one with --all)."""
    store = _open_store(ctx)
    try:
        rows = [m.summary() for m in store.all(active_only=not show_all)]
    finally:
        store.close()
    readable = _readable(ctx, [r["node"] for r in rows])
    hidden = sum(1 for r in rows if r["node"] not in readable)
    rows = [r for r in rows if r["node"] in readable]
    if hidden:
        printer(stderr=True).print("{} maintenance(s) not shown: you may not read their "
                                   "nodes (servers:read)", hidden)
    if output == "json":
        emit_json({"maintenances": rows})
        return
    from rich.table import Table

    table = Table(title="maintenances", title_justify="left")
    for col in ("name", "node", "intent", "phase", "dispatches", "requested by", "abandoned",
                "attention"):
        table.add_column(col)
    for r in rows:
        a = r.get("abandoned")
        abandoned = f"by {a['by']}: {a['reason']}" if a else ""
        attention = []
        if r.get("awaitingResolution"):
            attention.append(f"awaiting resolution: powerplane maintenance resolve {r['node']} "
                             "--applied | --not-applied --reason TEXT "
                             f"--confirm-node {r['node']}")
        if r.get("machineReadsOn"):
            poc = r["conditions"].get("PowerOffConfirmed", {}).get("status", "Unknown")
            attention.append(f"the machine still reads on (PowerOffConfirmed={poc})")
        table.add_row(esc(r["name"]), esc(r["node"]), r["intent"], r["phase"],
                      str(r["dispatches"]), esc(r["requestedBy"]), esc(abandoned),
                      esc("; ".join(attention)))
    console().print(table)


def _person_request(
    ctx: click.Context,
    node: str,
    reason: str | None,
    on_behalf_of: str | None,
    output: str,
    act: Callable[[Any, Any], Coroutine[Any, Any, NodeMaintenance]],
) -> None:
    from powerplane.lifecycle.ceremony import Ceremony
    from powerplane.lifecycle.service import Lifecycle

    _text_arguments(node=node, reason=reason, on_behalf_of=on_behalf_of)
    host = _host(ctx, nodes=())
    why = _ask_reason(reason)
    lc = Lifecycle.for_host(host)  # records a request: no channel touched
    try:
        m = run_async(act(lc, Ceremony(reason=why, on_behalf_of=_on_behalf_of(on_behalf_of))))
    finally:
        lc.close()
    data = m.summary()
    if output == "json":
        emit_json(data)
    else:
        printer().print("{}: recorded; `powerplane maintenance run` carries it out",
                        data["name"])


@maintenance_group.command("return")
@click.argument("node")
@click.option("--reason", default=None, help="Why (must meet the reason policy).")
@on_behalf_of_option
@click.option("--machine-on", is_flag=True,
              help="Confirm a person powered the machine back on (where power-on is withheld).")
@output_option
@click.pass_context
@handle_errors
def return_cmd(
    ctx: click.Context, node: str, reason: str | None, on_behalf_of: str | None,
    machine_on: bool, output: str,
) -> None:
    """Return NODE to service from a parked maintenance (power-on where offered, uncordon)."""
    _person_request(ctx, node, reason, on_behalf_of, output,
                    lambda lc, c: lc.return_to_service(node, c, machine_on=machine_on))


@maintenance_group.command("abandon")
@click.argument("node")
@click.option("--reason", default=None, help="Why (must meet the reason policy).")
@on_behalf_of_option
@output_option
@click.pass_context
@handle_errors
def abandon_cmd(
    ctx: click.Context, node: str, reason: str | None, on_behalf_of: str | None, output: str
) -> None:
    """Abandon NODE's active maintenance; it returns the node through Returning."""
    _person_request(ctx, node, reason, on_behalf_of, output,
                    lambda lc, c: lc.abandon(node, c))


@maintenance_group.command("resolve")
@click.argument("node")
@click.option("--applied", "applied", is_flag=True,
              help="The verb took effect (seen at the machine): move on.")
@click.option("--not-applied", "not_applied", is_flag=True,
              help="The verb did not take effect: send it once more.")
@click.option("--reason", default=None, help="Why (must meet the reason policy).")
@click.option("--confirm-node", default=None, help="The node name, typed.")
@on_behalf_of_option
@output_option
@click.pass_context
@handle_errors
def resolve_cmd(
    ctx: click.Context, node: str, applied: bool, not_applied: bool, reason: str | None,
    confirm_node: str | None, on_behalf_of: str | None, output: str,
) -> None:
    """Settle a power verb of NODE that evidence could not tell (audited).

    --applied moves on and records who said so; --not-applied sends the verb once more
    (by the next `maintenance run`). Never upgrades a refusal.
    """
    from powerplane.lifecycle.ceremony import Ceremony
    from powerplane.lifecycle.service import Lifecycle

    if applied and not_applied:
        raise click.UsageError("--applied and --not-applied contradict each other: give "
                               "exactly one (nothing was recorded)")
    if not applied and not not_applied:
        raise click.UsageError("one of --applied or --not-applied is required")
    _text_arguments(node=node, reason=reason, confirm_node=confirm_node,
                    on_behalf_of=on_behalf_of)
    why = _ask_reason(reason)
    if confirm_node is None and _interactive():
        confirm_node = str(click.prompt("Type the node name to confirm", default="",
                                        show_default=False))
    lc = Lifecycle.for_host(_host(ctx, nodes=()))  # records a resolution: none touched
    try:
        m = run_async(lc.resolve(node, Ceremony(
            reason=why, on_behalf_of=_on_behalf_of(on_behalf_of), confirm_node=confirm_node),
            applied))
    finally:
        lc.close()
    data = m.summary()
    if output == "json":
        emit_json(data)
    else:
        what = "applied" if applied else "not applied (it is sent once more)"
        printer().print("{}: resolved as {}; `powerplane maintenance run` carries it out",
                        data["name"], what)


@maintenance_group.command("run")
@click.option("--until-idle", is_flag=True,
              help="Stop once nothing can advance without a person (else run until Ctrl-C).")
@click.option("--max-passes", type=click.IntRange(min=1), default=None,
              help="Stop after this many passes (1 or more).")
@output_option
@click.pass_context
@handle_errors
def run_cmd(ctx: click.Context, until_idle: bool, max_passes: int | None, output: str) -> None:
    """Reconcile every active maintenance, printing each phase change as it happens."""
    from powerplane.lifecycle.service import Lifecycle
    from powerplane.lifecycle.store import NotFound

    seen: dict[str, int] = {}
    said: dict[tuple[str, str], tuple[str, str]] = {}

    async def go() -> list[dict[str, Any]]:
        async with _host(ctx, nodes=()) as host:
            lc = Lifecycle.for_host(host)
            names = {m.name for m in lc.store.active()}

            def progress(m: NodeMaintenance) -> None:
                names.add(m.name)
                before = seen.get(m.name)
                seen[m.name] = len(m.status.history)
                if output == "json":
                    return
                # every phase change this write committed (an admission and the cordon
                # after it are one write)
                start = before if before is not None else len(m.status.history) - 1
                for t in m.status.history[max(start, 0):]:
                    click.echo(f"{m.node}: {t.from_phase} -> {t.to}  {t.why}")
                for kind in SHOWN_CONDITIONS:
                    cond = m.status.conditions.get(kind)
                    if cond is None:
                        continue
                    key = (m.name, kind)
                    now = (cond.status, cond.message)
                    if said.get(key) != now:
                        said[key] = now
                        click.echo(f"{m.node}:   {kind}={cond.status}  {cond.message}")

            lc.store.after_write = progress
            try:
                await lc.run(until_idle=until_idle, max_passes=max_passes)
                rows = []
                for n in sorted(names):
                    try:
                        rows.append(lc.store.get(n).summary())
                    except NotFound:  # its object was deleted (and let go once it ended)
                        rows.append({"name": n, "deleted": True})
                return rows
            finally:
                lc.close()

    rows = run_async(go())
    if output == "json":
        emit_json({"maintenances": rows})
        return
    out = printer()
    for r in rows:
        if r.get("deleted"):
            out.print("{}: deleted", r["name"])
        else:
            out.print("{}: {} ({})", r["node"], r["phase"], r["name"])
