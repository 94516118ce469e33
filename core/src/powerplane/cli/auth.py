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


class _AuditGroup(click.Group):
    """``audit`` lists the trail; ``audit verify`` and ``audit export`` are its commands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `powerplane audit --node n1` lists; `powerplane audit verify` runs a command
        if args and args[0] in self.commands:
            return super().parse_args(ctx, args)
        ctx.meta["powerplane.audit.list"] = True
        return click.Command.parse_args(self, ctx, args)


@click.group("audit", cls=_AuditGroup, invoke_without_command=True)
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
    """The audit trail: who asked for what, when, why, and what the policy said.

    `audit verify` checks the trail's chain (and its signed checkpoints); `audit export`
    writes a copy for an inspector (jsonl, csv or a printable html)."""
    if ctx.invoked_subcommand is not None:
        return
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


def _trails(ctx: click.Context) -> tuple[Any, Any, dict[str, list[Any]]]:
    """The deployment, its authority, and its trails' entries by trail (one, but for a
    store that keeps one per writer: the ``kubernetes`` store); refused, exit 3, unless the
    caller may read every node the trails name: the trail is the plant's record."""
    from powerplane.authority.actions import Action

    deployment = load_deployment(ctx)
    authority = authority_of(deployment)
    sink = authority.sink
    by_writer = getattr(sink, "trails", None)
    if callable(by_writer):
        trails: dict[str, list[Any]] = by_writer()
    else:
        trails = {sink.description: sink.entries()
                  if callable(getattr(sink, "entries", None)) else []}
    named = sorted({str((e.doc or {}).get("node")) for entries in trails.values()
                    for e in entries if e.doc is not None and e.doc.get("node")})
    run_async(authority.require_all(Action.READ,
                                    [(n, deployment.nodes.get(n)) for n in named]))
    return deployment, authority, trails


def _verdicts(trails: dict[str, list[Any]], seal: Any) -> dict[str, Any]:
    """Each trail's verdict; a bad one names the object holding its first bad entry where
    the store says which (``where``)."""
    from powerplane.authority.chain import verify

    out = {}
    for name, entries in trails.items():
        verdict = verify(entries, seal=seal)
        if not verdict.intact and verdict.first_bad:
            where = getattr(entries[verdict.first_bad - 1], "where", "")
            if where:
                verdict.problem += f" [{where}]"
        out[name] = verdict
    return out


def _combined(verdicts: dict[str, Any], description: str) -> tuple[Any, str]:
    """One verdict for the trails of a store that keeps several, and the words naming
    them: the first bad trail's, else their sum."""
    from powerplane.authority.chain import Verdict

    for where, verdict in verdicts.items():
        if not verdict.intact:
            return verdict, f"{where} (the first bad of {len(verdicts)} trails)"
    total = Verdict(True, sum(v.records for v in verdicts.values()), "",
                    checkpoints=sum(v.checkpoints for v in verdicts.values()),
                    sealed=any(v.sealed for v in verdicts.values()))
    heads = ", ".join(f"{w.rsplit(' ', 1)[-1]} {v.head[:16]}" for w, v in verdicts.items())
    return total, f"{description}: {len(verdicts)} trails, every one intact (heads: {heads})"


def _seal_of(public_key: str | None, deployment: Any) -> Any:
    """The key checkpoints are checked against: ``--public-key``, else the deployment's
    ``audit.key`` (its public half), else none."""
    from pathlib import Path

    from powerplane.authority.seal import load_public, signer_of

    if public_key is not None:
        return load_public(Path(public_key))
    key = deployment.audit.key
    if key is not None:
        return signer_of(key, deployment.source).seal
    return None


@audit_cmd.command("verify")
@click.option("--public-key", default=None, metavar="FILE",
              help="Check signed checkpoints with this PEM public key (default: the "
                   "deployment's audit.key, if it names one).")
@click.option("--expect-head", default=None, metavar="HASH",
              help="The head an earlier verify printed: the trail must still contain it "
                   "(catches the newest entries cut off).")
@output_option
@click.pass_context
@handle_errors
def verify_cmd(ctx: click.Context, public_key: str | None, expect_head: str | None,
               output: str) -> None:
    """Check the audit trail: exit 0 intact, 1 naming the first bad entry and what is wrong
    (of each trail, where the store keeps one per writer)."""
    deployment, authority, trails = _trails(ctx)
    verdicts = _verdicts(trails, _seal_of(public_key, deployment))
    if expect_head is not None and all(v.intact for v in verdicts.values()) and not any(
            e.hash == expect_head for entries in trails.values() for e in entries):
        name = next(iter(trails))
        verdict = verdicts[name]
        verdict.intact, verdict.problem = False, (
            f"the head {expect_head[:16]}... an earlier verify printed is not in the trail: "
            "entries were cut off or the trail was replaced")
        verdict.first_bad = len(trails[name])
    if output == "json":
        bad = [(w, v) for w, v in verdicts.items() if not v.intact]
        if bad:
            where, top = bad[0]
        elif len(verdicts) == 1:
            ((where, top),) = verdicts.items()
        else:
            top, where = _combined(verdicts, authority.sink.description)
        emit_json({"trail": where, **top.as_dict(),
                   "trails": [{"trail": w, **v.as_dict()} for w, v in verdicts.items()]})
    else:
        if not verdicts:
            printer().print("{}", f"{authority.sink.description}: no trail (no record)")
        for where, verdict in verdicts.items():
            printer(stderr=not verdict.intact).print("{}", verdict.words(where))
    if not all(v.intact for v in verdicts.values()):
        sys.exit(1)


@audit_cmd.command("export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "html"]), required=True,
              help="jsonl: the entries as stored; csv: one row per record; html: a printable "
                   "copy with the verification on its first page.")
@click.option("--output-file", "-f", default=None, metavar="FILE",
              help="Write here (default: standard output).")
@click.option("--public-key", default=None, metavar="FILE",
              help="Check signed checkpoints with this PEM public key.")
@click.pass_context
@handle_errors
def export_cmd(ctx: click.Context, fmt: str, output_file: str | None,
               public_key: str | None) -> None:
    """Write the audit trail for an inspector, with whether it verifies (every trail of a
    store that keeps one per writer, one after the other: the first bad one's verdict on
    the first page)."""
    from powerplane.authority.export import export

    deployment, authority, trails = _trails(ctx)
    verdicts = _verdicts(trails, _seal_of(public_key, deployment))
    if len(trails) == 1:
        ((where, entries),) = trails.items()
        data = export(fmt, entries, verdicts[where], where)
    else:
        data = export(fmt, [e for entries in trails.values() for e in entries],
                      *_combined(verdicts, authority.sink.description))
    if output_file is None:
        click.echo(data, nl=False)
    else:
        from pathlib import Path

        Path(output_file).write_text(data, encoding="utf-8")
