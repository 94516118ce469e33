"""``powerplane auth can-i`` and ``powerplane audit``: the policy explained, the trail read.

``auth can-i ACTION NODE`` asks the deployment's policy what it decides for you (this
process's OS user and groups), or, with ``--as USER [--group G ...]``, for someone else:
``--as`` only reads the policy, it never acts as anyone and records nothing. Exit 0
allowed, 3 denied, 2 an unknown action or node.

``audit`` lists the audit trail (the lifecycle store's, else the audit file): every
accepted act and every denial, with the authenticated identity; filtered by ``--node``,
``--actor``, ``--action``, ``--outcome`` and ``--since``. Reading it is ``servers:read``:
the records of nodes you may not read are left out.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import click

from powerplane.cli._common import (
    authority_of,
    console,
    emit_json,
    esc,
    handle_errors,
    load_deployment,
    output_option,
    printer,
    run_async,
)

__all__ = ["audit_cmd", "auth_group"]


@click.group("auth")
def auth_group() -> None:
    """Explain what the deployment's policy decides (reads only)."""


@auth_group.command("can-i")
@click.argument("action")
@click.argument("node")
@click.option("--as", "as_user", default=None,
              help="Ask for this user instead of you (reads the policy; never acts).")
@click.option("--group", "groups", multiple=True,
              help="A group of the --as user (repeatable).")
@output_option
@click.pass_context
@handle_errors
def can_i_cmd(ctx: click.Context, action: str, node: str, as_user: str | None,
              groups: tuple[str, ...], output: str) -> None:
    """Whether ACTION (servers:reboot, or just reboot) on NODE is allowed, and by which rule.

    Exit 0 allowed, 3 denied (nothing is recorded: nothing was asked for).
    """
    from powerplane.authority.actions import parse_action
    from powerplane.authority.identity import Identity, local_identity
    from powerplane.errors import UnknownNode
    from powerplane.runtime import authority_for

    try:
        the_action = parse_action(action if ":" in action else f"servers:{action}")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ACTION") from None
    if groups and as_user is None:
        raise click.UsageError("--group needs --as USER (your own groups come from the OS)")
    deployment = load_deployment(ctx)
    if node not in deployment.nodes:
        raise UnknownNode(node, list(deployment.nodes))
    who = (Identity(user=as_user, groups=tuple(groups), via="as") if as_user is not None
           else local_identity())
    authority = authority_for(deployment)
    [decision] = run_async(authority.decide(the_action, [(node, deployment.nodes[node])],
                                            who))
    if output == "json":
        emit_json(decision.as_dict(node) | {"policy": authority.policy.description})
    else:
        printer().print("{}", decision.explain(node))
    if not decision.allowed:
        sys.exit(3)


@click.command("audit")
@click.option("--node", default=None, help="Only this node's records.")
@click.option("--actor", default=None, help="Only this user's records.")
@click.option("--action", default=None, help="Only this action (servers:reboot, or reboot).")
@click.option("--outcome", type=click.Choice(["accepted", "denied"]), default=None,
              help="Only accepted acts, or only denials.")
@click.option("--since", default=None, help="Only records at or after this ISO 8601 time.")
@output_option
@click.pass_context
@handle_errors
def audit_cmd(ctx: click.Context, node: str | None, actor: str | None, action: str | None,
              outcome: str | None, since: str | None, output: str) -> None:
    """The audit trail: who asked for what, when, why, and what the policy said."""
    from powerplane.authority.actions import Action, parse_action
    from powerplane.authority.audit import AuditSink

    wanted = None
    if action is not None:
        try:
            wanted = parse_action(action if ":" in action else f"servers:{action}")
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--action") from None
    after = None
    if since is not None:
        try:
            after = dt.datetime.fromisoformat(since)
        except ValueError:
            raise click.BadParameter(f"{since!r} is not an ISO 8601 time",
                                     param_hint="--since") from None
        if after.tzinfo is None:
            after = after.replace(tzinfo=dt.UTC)
    deployment = load_deployment(ctx)
    authority = authority_of(deployment)
    sink: AuditSink = authority.sink
    records = sink.records(node)
    picked = [r for r in records
              if (actor is None or r.actor == actor)
              and (wanted is None or r.action is wanted)
              and (outcome is None or r.outcome == outcome)
              and (after is None or r.at >= after)]
    nodes = sorted({r.node for r in picked})
    readable = set(run_async(authority.permitted(
        Action.READ, [(n, deployment.nodes.get(n)) for n in nodes])))
    shown = [r for r in picked if r.node in readable]
    if output == "json":
        emit_json({"records": [r.as_dict() for r in shown], "source": sink.description})
        return
    _print_records(shown)
    if len(shown) < len(picked):
        printer(stderr=True).print("{} record(s) not shown: you may not read their nodes "
                                   "(servers:read)", len(picked) - len(shown))


def _print_records(records: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="audit", title_justify="left")
    for col in ("at", "actor", "action", "outcome", "node", "maintenance", "reason", "rule"):
        table.add_column(col, overflow="fold")
    for r in records:
        who = r.actor + (f" (for {r.on_behalf_of})" if r.on_behalf_of else "")
        table.add_row(r.at.isoformat(timespec="seconds"), esc(who), r.action.value,
                      r.outcome, esc(r.node), esc(r.maintenance), esc(r.reason), esc(r.rule))
    console().print(table)
