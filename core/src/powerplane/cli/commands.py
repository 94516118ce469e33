"""The power commands: ``plugins``, ``offers``, ``invoke``, ``state``, and ``check``.

Exit codes (CONTRACT): 0 done; 1 a channel or device failed, or the outcome is unknown;
2 bad input; 3 refused by the rule or the guard. ``state`` exits 1 when no channel of a
node produced a reading; ``offers`` exits 1 when a channel of a listed node could not be
discovered; ``invoke`` exits 1 when the verb is withheld because its channel could not be
discovered (a channel failure, not a refusal) and when ``--wait`` ends before the expected
state is read. With several nodes the exit code is the most serious of theirs: 1, then 3,
then 2.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import click

from powerplane.cli._common import (
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
    from powerplane.capabilities import Verb
    from powerplane.config import Deployment
    from powerplane.errors import PowerplaneError
    from powerplane.host import InvokeResult, Plan
    from powerplane.nodes import NodeSpec
    from powerplane.runtime import PowerHost

__all__ = ["check_cmd", "invoke_cmd", "offers_cmd", "plugins_cmd", "state_cmd"]


@click.command("plugins")
@output_option
@handle_errors
def plugins_cmd(output: str) -> None:
    """Each plugin: name, version, channel types, deployment checks; each plugin that failed
    to load and why."""
    from powerplane.plugins import registry

    reg = registry()
    checks = reg.deployment_checks  # collected first: a failing hook is listed below
    checks_of: dict[str, list[str]] = {}
    for check in checks:
        checks_of.setdefault(reg.check_owners[check], []).append(check)
    if output == "json":
        emit_json(
            {
                "plugins": [
                    {
                        "name": p.name,
                        "distribution": p.distribution,
                        "version": p.version,
                        "channel_types": list(p.channel_types),
                        "deployment_checks": checks_of.get(p.name, []),
                    }
                    for p in reg.plugins
                ],
                "failures": [
                    {
                        "name": f.name,
                        "distribution": f.distribution,
                        "version": f.version,
                        "error": f.error,
                    }
                    for f in reg.failures
                ],
                "restricted": None if reg.restriction is None else {
                    "variable": "POWERPLANE_LOAD_PLUGINS",
                    "names": list(reg.restriction.names),
                    "not_loaded": list(reg.restriction.not_loaded),
                    "unknown": list(reg.restriction.unknown),
                },
            }
        )
        return
    from rich.table import Table

    table = Table(title="plugins", title_justify="left")
    for col in ("plugin", "distribution", "version", "channel types"):
        table.add_column(col)
    for p in reg.plugins:
        table.add_row(esc(p.name), esc(p.distribution), esc(p.version),
                      esc(", ".join(p.channel_types)))
    out = console()
    out.print(table)
    for p in reg.plugins:
        for name in checks_of.get(p.name, []):
            out.print(f"deployment check {esc(name)} (plugin {esc(p.name)}): "
                      f"{esc(checks[name].description)}")
    for f in reg.failures:
        out.print(f"[red]failed[/red] plugin {esc(f.name)} ({esc(f.distribution)} "
                  f"{esc(f.version)}): {esc(f.error)}")
    found = reg.restriction
    if found is not None:  # the variable is set: say what it left out
        left = ", ".join(found.not_loaded) or "nothing"
        line = f"restricted by {found.setting}: not loaded: {left}"
        if found.unknown:
            line += f"; no installed plugin is named {', '.join(found.unknown)}"
        out.print(esc(line))


# -- node selection ----------------------------------------------------------------------------
def _selector(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[
        tuple[str, str]]:
    out = []
    for value in values:
        key, sep, want = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, not {value!r}", ctx, param)
        out.append((key, want))
    return out


selector_option = click.option(
    "--selector", "selectors", multiple=True, callback=_selector,
    help="Also every node whose label KEY equals VALUE (key=value; repeat: all must match).",
)
site_option = click.option(
    "--site", "sites", multiple=True, help="Also every node of this site (repeatable).",
)


def _select(host: PowerHost, names: Sequence[str], selectors: list[tuple[str, str]],
            sites: Sequence[str]) -> list[str]:
    """The nodes named, then those the selectors and sites match, in config order."""
    from powerplane.errors import UnknownNode

    known = host.nodes
    for name in names:
        if name not in known:
            raise UnknownNode(name, list(known))
    chosen = list(dict.fromkeys(names))
    if selectors or sites:
        for name, spec in known.items():
            if sites and spec.site not in sites:
                continue
            if all(spec.labels.get(k) == v for k, v in selectors):
                chosen.append(name)
        chosen = list(dict.fromkeys(chosen))
        if not chosen:
            what = ", ".join([f"{k}={v}" for k, v in selectors] + [f"site {s}" for s in sites])
            raise click.UsageError(f"no node matches {what}")
    return chosen


def _progress(total: int, output: str, what: str) -> tuple[AbstractContextManager[Any],
                                                            Callable[..., None]]:
    """A progress bar on stderr for people (several nodes, a terminal); nothing for scripts."""
    if output == "json" or total < 2 or not sys.stderr.isatty():
        return nullcontext(), lambda *_: None
    from rich.progress import Progress

    bar = Progress(console=console(stderr=True), transient=True)
    task = bar.add_task(what, total=total)
    return bar, lambda *_: bar.advance(task)


def _worst(codes: Sequence[int]) -> int:
    """The exit code of several nodes: a failure, then a refusal, then bad input."""
    for code in (1, 3, 2):
        if code in codes:
            return code
    return 0


def _error_dict(node: str, exc: PowerplaneError) -> dict[str, Any]:
    out = {"node": node, "error": type(exc).__name__, "message": str(exc),
           "exit_code": exc.exit_code}
    cause = getattr(exc, "cause", None)  # a refusal's: rule, guard or policy
    if isinstance(cause, str):
        out["cause"] = cause
    return out


# -- offers ------------------------------------------------------------------------------------
@click.command("offers")
@click.argument("nodes", nargs=-1)
@output_option
@click.pass_context
@handle_errors
def offers_cmd(ctx: click.Context, nodes: tuple[str, ...], output: str) -> None:
    """Per node, per verb: offered or withheld, the channel that carries it, the reason,
    and whether the policy allows you the verb's action.

    Exit 1 when a channel of a listed node could not be discovered (its error is stated
    once, under the table or in the node's "channels"); 2 when what it revealed is a config
    error (a PDU profile that does not fit the device); 3 when you may not read a node you
    named (servers:read); else 0. With no node named, the nodes you may not read are left
    out (their number on stderr); nothing of theirs is discovered.
    """
    from powerplane.authority.actions import Action, action_for_verb
    from powerplane.errors import UnknownNode
    from powerplane.recovery import VERBS

    async def go() -> tuple[list[dict[str, Any]], list[int], list[Any], int,
                            list[dict[str, Any]]]:
        deployment = load_deployment(ctx)
        known = deployment.nodes
        for name in nodes:
            if name not in known:
                raise UnknownNode(name, list(known))
        asked = list(dict.fromkeys(nodes)) or list(known)
        host = open_host(ctx, nodes=())
        refs = [(n, known[n]) for n in asked]
        actions = [Action.READ, *(action_for_verb(verb) for verb in VERBS)]
        decided = await host.authority.decide_actions(actions, refs)  # one pass
        reads = decided[Action.READ]
        hidden = [n for (n, _), d in zip(refs, reads, strict=True) if not d.allowed]
        if hidden and nodes:  # a node named and not readable: refused, nothing discovered
            from powerplane.authority.policy import denied

            raise denied(next(d for d in reads if not d.allowed), hidden[0])
        keep = [i for i, d in enumerate(reads) if d.allowed]
        shown = [refs[i] for i in keep]
        names = [n for n, _ in shown]
        if len(keep) == len(refs):
            may = {verb: decided[action_for_verb(verb)] for verb in VERBS}
        else:
            may = {verb: [decided[action_for_verb(verb)][i] for i in keep] for verb in VERBS}
        async with host:
            await host.discover(names)
            offers = host.offers(names)
            errors = [host.discovery_error(o.node) for o in offers]
            rows, keys = _with_policy(offers, may)
            return (rows, [e.exit_code for e in errors if e is not None], keys, len(hidden),
                    _channel_manners(deployment, shown))

    data, codes, decisions, hidden, channels = run_async(go())
    if hidden:
        printer(stderr=True).print("{} node(s) not shown: you may not read them "
                                   "(servers:read)", hidden)
    failed = [(str(n["node"]), ch) for n in data for ch in n.get("channels", [])
              if not ch["discovered"]]
    if output == "json":
        emit_json({"nodes": _shared_verbs(data, decisions), "channels": channels})
    else:
        _offers_table(data, failed)
    code = _worst(codes)
    if code:
        sys.exit(code)


def _channel_manners(deployment: Deployment, shown: Sequence[tuple[str, NodeSpec]]
                     ) -> list[dict[str, Any]]:
    """``offers -o json``'s ``"channels"``: each channel a shown node uses (in the
    deployment's order), its type and the manners the host keeps with its devices
    (:meth:`~powerplane.channel.Manners.as_dict`: the type's defaults under the channel's
    ``manners:`` key)."""
    used = {ref.channel for _, spec in shown for ref in spec.channels}
    return [{"channel": name, "type": configured.type.name,
             "manners": configured.effective_manners.as_dict()}
            for name, configured in deployment.channels.items() if name in used]


def _with_policy(offers: Sequence[Any], may: dict[Any, list[Any]]
                 ) -> tuple[list[dict[str, Any]], list[Any]]:
    """Each offer's JSON row with, per verb, whether the policy allows the caller its action
    (``allowed``; a denial's rule as ``policy``), and a key per row: rows with equal keys
    have equal verbs (the rule's memo and the policy's decisions shared)."""
    from powerplane.recovery import _KEYED

    merged: dict[tuple[int, ...], dict[str, Any]] = {}
    rows, keys = [], []
    for i, offer in enumerate(offers):
        row = offer.as_dict()
        decided = [may[v][i] for _, v in _KEYED]
        key = (id(offer.verbs), *(id(d) for d in decided))
        verbs = merged.get(key)
        if verbs is None:
            verbs = {}
            for (name, _), d in zip(_KEYED, decided, strict=True):
                entry = dict(row["verbs"][name])
                entry["allowed"] = d.allowed
                if not d.allowed:
                    entry["policy"] = d.rule
                verbs[name] = entry
            merged[key] = verbs
        row["verbs"] = verbs
        rows.append(row)
        keys.append(key)
    return rows, keys


def _shared_verbs(rows: list[dict[str, Any]], decisions: list[Any]) -> list[dict[str, Any]]:
    """``rows`` with each node's ``"verbs"`` encoded once per decision: nodes that share
    one (``decisions``: the id of their verbs mapping) and whose entries are equal share
    the text; the output bytes are those of encoding every row on its own."""
    from powerplane.cli._json import Encoded, dumps_indented

    done: dict[Any, tuple[Any, Encoded]] = {}
    out = []
    for row, decision in zip(rows, decisions, strict=True):
        verbs = row["verbs"]
        hit = done.get(decision)
        if hit is None:
            # {"nodes": [{"verbs": ...}]}: the verbs sit three levels in
            hit = done[decision] = (verbs, Encoded(dumps_indented(verbs, depth=3)))
        elif hit[0] != verbs:  # not as the first node of this decision said: on its own
            out.append(row)
            continue
        out.append({**row, "verbs": hit[1]})
    return out


def _offers_table(data: list[dict[str, Any]], failed: list[tuple[str, dict[str, Any]]]) -> None:
    from rich.table import Table

    table = Table(title="offers", title_justify="left", show_lines=False)
    for col in ("node", "site", "verb", "offered", "channel", "why", "you"):
        table.add_column(col, overflow="fold")
    for node in data:
        first = True
        # a channel that could not be opened for a mistake in the config is bad input, not a
        # failure of the channel: the label says which it was
        errors = {ch.get("channel"): ch.get("error") for ch in node.get("channels", ())}
        for verb, o in node["verbs"].items():
            offered = o["offered"]
            mode = ("graceful" if o.get("graceful") else "hard") if offered else ""
            why = o.get("recovery", "") if offered else o.get("reason", "")
            if not offered and o.get("cause") == "channel":
                named = errors.get(o.get("channel")) if o.get("channel") in errors else None
                config = (named == "ConfigError" if named is not None
                          else "ConfigError" in errors.values())
                why = f"{why} ({'config error' if config else 'channel failure'})"
            table.add_row(
                esc(node["node"]) if first else "",
                esc(node["site"] or "") if first else "",
                verb,
                f"[green]yes[/green] ({mode})" if offered else "[red]no[/red]",
                esc(o.get("channel", "") or ""),
                esc(why or ""),
                "may" if o.get("allowed") else f"may not: {esc(o.get('policy', ''))}",
            )
            first = False
        table.add_section()
    out = console()
    out.print(table)
    seen: set[str] = set()
    for _, ch in failed:
        if ch["channel"] in seen:
            continue
        seen.add(ch["channel"])
        out.print(f"[red]channel {esc(ch['channel'])} could not be discovered[/red] "
                  f"({esc(ch['error'])}): {esc(ch['message'])}")


# -- invoke ------------------------------------------------------------------------------------
def _wait_value(ctx: click.Context, param: click.Parameter, value: float) -> float:
    from powerplane.host.invoking import MAX_WAIT_S

    if math.isnan(value) or not 0 <= value <= MAX_WAIT_S:
        raise click.BadParameter(
            f"expected seconds from 0 to {MAX_WAIT_S:g} (not NaN, negative or infinite), "
            f"got {value!r}", ctx, param)
    return value


@click.command("invoke")
@click.argument("nodes", nargs=-1)
@click.argument("verb")
@click.option("--reason", required=True, help="Why (recorded in the log with the request).")
@click.option("--yes", is_flag=True,
              help="Confirm without a prompt. Without a lifecycle: section it also skips "
                   "typing the node name (or node count); with one, the ladder still asks "
                   "the typed name (--confirm-node).")
@click.option("--confirm-node", "confirm_nodes", multiple=True,
              help="The node name, typed (repeat for several nodes): with a lifecycle: "
                   "section, what reboot, shutdown and terminate need in a script.")
@click.option("--hazard-reason", default=None,
              help="Typed reason for consuming the last of the quorum margin (with a "
                   "lifecycle: section).")
@click.option(
    "--wait",
    type=float,
    default=0.0,
    show_default=True,
    callback=_wait_value,
    help="Seconds to read the node back for the state the verb leads to (0: do not read); "
    "exit 1 when it is not reached by then.",
)
@click.option("--dry-run", is_flag=True,
              help="Print what would be sent, by which channel, and what the guard says; "
              "send nothing.")
@selector_option
@site_option
@on_behalf_of_option
@output_option
@click.pass_context
@handle_errors
def invoke_cmd(
    ctx: click.Context, nodes: tuple[str, ...], verb: str, reason: str, yes: bool,
    confirm_nodes: tuple[str, ...], hazard_reason: str | None, wait: float,
    dry_run: bool, selectors: list[tuple[str, str]], sites: tuple[str, ...],
    on_behalf_of: str | None, output: str,
) -> None:
    """Run VERB (reboot, shutdown, power-on, terminate) on NODE... under the rule.

    Nodes come from the arguments, ``--selector key=value`` and ``--site``. Where the
    deployment has a ``lifecycle:`` section, reboot, shutdown and terminate also pass the
    lifecycle's guard (quorum, virtual nodes, active maintenances, the reason policy) and
    climb the ceremony ladder of ``maintenance request``: the node name typed
    (``--confirm-node``; ``--yes`` does not replace it) and, where the call consumes the
    last of the quorum margin, ``--hazard-reason``. First of all, the policy decides the
    verb's action (``servers:reboot``) for you (this process's OS user): a denial exits 3
    before any prompt; every act is audited with your identity before it is sent.
    """
    from powerplane.capabilities import Verb
    from powerplane.errors import PowerplaneError
    from powerplane.host import GUARDED

    the_verb = Verb.parse(verb)
    if not reason.strip():
        raise click.UsageError("--reason must not be empty")
    for value, what in [(reason, "--reason"), (hazard_reason, "--hazard-reason"),
                        *((n, "--confirm-node") for n in confirm_nodes),
                        *((n, "NODE") for n in nodes)]:
        check_text(value, what)
    if not nodes and not selectors and not sites:
        raise click.UsageError("name at least one NODE, or use --selector / --site")
    check_text(on_behalf_of, "--on-behalf-of")
    who = on_behalf_of_identity(on_behalf_of)
    single = len(nodes) == 1 and not selectors and not sites

    async def go() -> tuple[list[dict[str, Any]], list[int]]:
        # nothing discovered up front: plan() discovers what the chosen nodes use
        async with open_host(ctx, nodes=()) as host:
            with host.authority.request():  # the plan, then the call: one request
                chosen = _select(host, nodes, selectors, sites)
                hazard = hazard_reason
                plans = await host.plan(chosen, the_verb, reason, hazard_reason=hazard,
                                        identity=who)
                if dry_run:
                    return _dry_run_rows(plans)
                ladder = host.guard is not None and the_verb in GUARDED
                if ladder and hazard is None and not yes and sys.stdin.isatty():
                    hazard = _ask_hazard(plans)
                    if hazard is not None:
                        plans = await host.plan(chosen, the_verb, reason, hazard_reason=hazard,
                                                identity=who)
                ready = [n for n, p in plans.items() if not isinstance(p, Exception)]
                if ready and the_verb in GUARDED:
                    first = plans[ready[0]]
                    assert not isinstance(first, Exception)
                    if ladder:
                        _ladder_confirm(ready, the_verb, first.channel, confirm_nodes, yes,
                                        chosen)
                    elif confirm_nodes:
                        _typed_names(ready, confirm_nodes, chosen)
                    elif not yes:
                        _confirm(ready, the_verb.value, first.channel)
                elif ready and confirm_nodes:  # a typed name given anyway must match
                    _typed_names(ready, confirm_nodes, chosen)
                if single:
                    plan = plans[chosen[0]]
                    try:
                        if isinstance(plan, Exception):
                            raise plan
                        result = await host.invoke(chosen[0], the_verb, reason=reason, wait=wait,
                                                   hazard_reason=hazard, identity=who)
                    except PowerplaneError as exc:
                        raise _NodeFailed(exc) from None
                    return [_result_row(result)], [_result_code(result)]
                bar, tick = _progress(len(chosen), output, f"{the_verb.value} {len(chosen)} nodes")
                with bar:
                    outcomes = await host.invoke_many(chosen, the_verb, reason, wait=wait,
                                                      progress=tick, hazard_reason=hazard,
                                                      identity=who)
                rows, codes = [], []
                for node, outcome in outcomes.items():
                    if isinstance(outcome, Exception):
                        rows.append(_error_dict(node, outcome))
                        codes.append(outcome.exit_code)
                    else:
                        rows.append(_result_row(outcome))
                        codes.append(_result_code(outcome))
                return rows, codes

    try:
        rows, codes = run_async(go())
    except _NodeFailed as failed:  # one node: its error class on stderr, nothing on stdout
        error = failed.error
        click.echo(f"error: {type(error).__name__}: {error}", err=True)
        sys.exit(error.exit_code)
    if output == "json":
        emit_json(rows[0] if single else {"nodes": rows, "dry_run": dry_run})
    else:
        _print_invoke(rows, dry_run)
    code = _worst(codes)
    if code:
        sys.exit(code)


class _NodeFailed(Exception):
    """Carries the error of a one-node invoke out of the event loop, to be named."""

    def __init__(self, error: PowerplaneError) -> None:
        super().__init__(str(error))
        self.error = error


def _dry_run_rows(plans: dict[str, Plan | PowerplaneError]) -> tuple[list[dict[str, Any]],
                                                                     list[int]]:
    rows, codes = [], []
    for node, plan in plans.items():
        if isinstance(plan, Exception):
            rows.append(_error_dict(node, plan) | {"sent": False})
            codes.append(plan.exit_code)
        else:
            rows.append(plan.as_dict())
            codes.append(0)
    return rows, codes


def _result_row(result: InvokeResult) -> dict[str, Any]:
    return result.as_dict()


def _result_code(result: InvokeResult) -> int:
    return 1 if result.reached is False else 0


def _print_invoke(rows: list[dict[str, Any]], dry_run: bool) -> None:
    out = printer()
    err = printer(stderr=True)
    for row in rows:
        if "error" in row:
            err.print("error: {}: {}: {}", row["node"], row["error"], row["message"])
            continue
        if dry_run:
            mode = "graceful" if row["graceful"] else "hard"
            line = "dry run: would send {} ({}) to {} via channel {}, target {}; guard: {}"
            values: list[object] = [row["verb"], mode, row["node"], row["channel"],
                                    row["target"], row["guard"]]
            if row.get("recovery"):
                line += "; recoverable: {}"
                values.append(row["recovery"])
            out.print(line + "; nothing sent", *values)
            continue
        line = "{} accepted for {} via channel {}"
        values = [row["verb"], row["node"], row["channel"]]
        if row.get("readback") is not None:
            line += "; reads {}"
            values.append(row["readback"])
        if row.get("detail"):
            line += " ({})"
            values.append(row["detail"])
        out.print(line, *values)
        if row.get("reached") is False:
            err.print("error: {} did not read {} before --wait ended; last reading: {}",
                      row["node"], row["expected"], row["readback"])


def check_text(value: str | None, what: str) -> None:
    """Refuse an argument that is not text (bytes the locale could not decode reach Python
    as lone surrogates): bad input (exit 2), named, before anything is read or sent."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.UsageError(
            f"{what} {value!r} is not valid UTF-8 text (bytes the locale could not decode)"
        ) from None


def _ask_hazard(plans: dict[str, Plan | PowerplaneError]) -> str | None:
    """At a terminal: show each hazard the guard found and ask its typed reason (None:
    there is no hazard, so nothing is asked)."""
    from powerplane.lifecycle.guard import HazardReasonRequired

    hazards = [p for p in plans.values() if isinstance(p, HazardReasonRequired)]
    if not hazards:
        return None
    err = printer(stderr=True)
    for h in hazards:
        n = h.numbers
        counts = ("" if n is None else f" ({n.members} control-plane members, {n.ready} "
                  f"ready, quorum {n.quorum}, margin {n.margin})")
        err.print("[bold red]HAZARD[/bold red]: {} of {} consumes the last of the quorum "
                  "margin{}", h.verb.value, h.node, counts)
    return str(click.prompt("Hazard: type the reason for consuming the last of the quorum "
                            "margin", err=True))


def _typed_names(nodes: list[str], typed: Sequence[str], chosen: Sequence[str]) -> None:
    """Every node about to be sent to (``nodes``) named by ``--confirm-node``: a name that
    matches no node of the call (``chosen``), or a node left unnamed, is exit 2 with
    nothing sent."""
    stray = [t for t in typed if t not in chosen]
    if stray:
        click.echo(f"error: the typed node name {stray[0]!r} did not match "
                   f"{'the node' if len(chosen) == 1 else 'any node'} of this call "
                   f"({', '.join(chosen[:5])}{', ...' if len(chosen) > 5 else ''}); "
                   "nothing was sent", err=True)
        sys.exit(2)
    unnamed = [n for n in nodes if n not in typed]
    if unnamed:
        click.echo(f"error: --confirm-node names {len(typed)} of {len(nodes)} nodes; "
                   f"also --confirm-node {unnamed[0]}; nothing was sent", err=True)
        sys.exit(2)


def _ladder_confirm(nodes: list[str], verb: Verb, channel: str, typed: Sequence[str],
                    yes: bool, chosen: Sequence[str]) -> None:
    """The ladder's confirmation steps under a lifecycle (``confirmation_steps``): the
    typed node name of every node, from ``--confirm-node`` or typed at the prompt (a line
    on stdin without a terminal); ``--yes`` does not replace it. Typing the name is also
    the acknowledgement."""
    from powerplane.lifecycle.ceremony import Step
    from powerplane.lifecycle.guard import confirmation_steps

    steps = confirmation_steps(verb)
    if Step.TYPED_NODE not in steps:
        return
    if typed:
        _typed_names(nodes, typed, chosen)
        return
    if yes:
        names = " ".join(f"--confirm-node {n}" for n in nodes[:3])
        click.echo(f"error: {verb.value} under the lifecycle needs the node name typed "
                   f"({names}{' ...' if len(nodes) > 3 else ''}); --yes confirms a prompt, "
                   "it does not replace the typed name; nothing was sent", err=True)
        sys.exit(2)
    what = (f"{verb.value} {nodes[0]} via {channel}: type the node name to confirm"
            if len(nodes) == 1 else
            f"{verb.value} {len(nodes)} nodes: type their names, separated by spaces")
    if sys.stdin.isatty():
        answer = str(click.prompt(what, default="", show_default=False, err=True)).split()
    else:  # a script may pipe the names in, as it may for the plain confirmation
        answer = sys.stdin.readline().split()
    if sorted(answer) != sorted(nodes):
        click.echo("error: the typed node name did not match "
                   f"{'the node' if len(nodes) == 1 else 'the nodes'}; nothing was sent",
                   err=True)
        sys.exit(2)


def _confirm(nodes: list[str], verb: str, channel: str) -> None:
    """A person types the node name (one node) or the node count (several) to confirm."""
    want = nodes[0] if len(nodes) == 1 else str(len(nodes))
    what = (f"{verb} {nodes[0]} via {channel}: type the node name to confirm" if len(nodes) == 1
            else f"{verb} {len(nodes)} nodes ({', '.join(nodes[:5])}"
            f"{', ...' if len(nodes) > 5 else ''}): type the number of nodes to confirm")
    if not sys.stdin.isatty():
        typed = sys.stdin.readline().strip()
    else:
        typed = click.prompt(what, default="", show_default=False)
    if typed != want:
        click.echo("error: confirmation did not match "
                   f"{'the node name' if len(nodes) == 1 else 'the number of nodes'}; "
                   "nothing was sent (pass --yes in scripts)", err=True)
        sys.exit(2)


# -- state -------------------------------------------------------------------------------------
@click.command("state")
@click.argument("nodes", nargs=-1)
@selector_option
@site_option
@output_option
@click.pass_context
@handle_errors
def state_cmd(ctx: click.Context, nodes: tuple[str, ...], selectors: list[tuple[str, str]],
              sites: tuple[str, ...], output: str) -> None:
    """Read NODE...'s power state back through every channel (on, off or unknown).

    Exit 1 when a node has no reading because every channel failed, naming each channel
    and its error on stderr (the table prints nothing on stdout for that node; ``-o json``
    keeps its document, each reading with its error class); 0 when a reading was taken (a
    blind channel's declared unknown counts); 3 when you may not read a node
    (servers:read: nothing of it is read).
    """
    from powerplane.authority.actions import Action
    if not nodes and not selectors and not sites:
        raise click.UsageError("name at least one NODE, or use --selector / --site")
    single = len(nodes) == 1 and not selectors and not sites

    async def go() -> list[dict[str, Any]]:
        # nothing discovered up front: each read creates and reads only what it touches
        async with open_host(ctx, nodes=()) as host:
            chosen = _select(host, nodes, selectors, sites)
            await host.authority.require_all(Action.READ,
                                             [(n, host.nodes[n]) for n in chosen])
            bar, tick = _progress(len(chosen), output, f"reading {len(chosen)} nodes")
            with bar:
                readings = await host.read_many(chosen, every_channel=True, progress=tick)
            return [r.as_dict() | {"observed": r.observed} for r in readings.values()]

    data = run_async(go())
    blind = [d for d in data if not d.pop("observed")]
    if output == "json":
        emit_json(data[0] if single else {"nodes": data})
    else:  # a node with no reading: nothing on stdout, its channels' errors on stderr
        _print_state([d for d in data if not any(d is b for b in blind)], single)
    err = printer(stderr=True)
    for d in blind:
        failures = "; ".join(f"{r['channel']} ({r.get('error', 'no reading')}): {r['detail']}"
                             for r in d["readings"]) or "the node has no channel configured"
        err.print("error: no reading of {}: {}", d["node"], failures)
    if blind:
        sys.exit(1)


def _print_state(data: list[dict[str, Any]], single: bool) -> None:
    out = printer()
    for d in data:
        if d.get("detail"):
            out.print("{}: {} via {} ({})", d["node"], d["state"], d["channel"], d["detail"])
        else:
            out.print("{}: {} via {}", d["node"], d["state"], d["channel"])
        if d["disagreement"]:
            out.print("[yellow]warning[/yellow]: the channels of {} disagree", d["node"])
        if len(d["readings"]) > 1 or d["disagreement"]:
            for r in d["readings"]:
                what = r["state"] if "error" not in r else f"{r['state']} ({r['error']})"
                if r["detail"]:
                    out.print("  {}: {}: {}", r["channel"], what, r["detail"])
                else:
                    out.print("  {}: {}", r["channel"], what)


@click.command("check")
@output_option
@click.pass_context
@handle_errors
def check_cmd(ctx: click.Context, output: str) -> None:
    """Prove the whole deployment file: every key, every secret, every channel.

    Loads the file as every command does, then resolves every secret reference (each
    value dropped at once, never shown) and opens and closes every channel, calling no
    device: exit 0 when all of it holds, else exit 2 with every problem and its line.
    Other commands check only the secrets of the channels they touch.
    """
    from powerplane.cli._common import load_deployment
    from powerplane.secrets import secret_refs

    deployment = load_deployment(ctx, check=True)
    secrets = sum(len(list(secret_refs(c.config))) for c in deployment.channels.values())
    data = {"config": deployment.source, "ok": True, "channels": len(deployment.channels),
            "nodes": len(deployment.nodes), "secrets": secrets,
            "lifecycle": "lifecycle" in (deployment.raw or {})}
    if output == "json":
        emit_json(data)
        return
    printer().print("ok: {}: {} channel(s), {} node(s), {} secret reference(s) resolved{}",
                    deployment.source, len(deployment.channels), len(deployment.nodes),
                    secrets, ", a lifecycle: section" if data["lifecycle"] else "")
