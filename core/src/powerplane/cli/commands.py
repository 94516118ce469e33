"""The power commands: ``plugins``, ``offers``, ``invoke``, ``state``."""

from __future__ import annotations

import sys

import click

from powerplane.cli._common import (
    console,
    emit_json,
    handle_errors,
    open_host,
    output_option,
    run_async,
)

__all__ = ["invoke_cmd", "offers_cmd", "plugins_cmd", "state_cmd"]

DESTRUCTIVE = {"reboot", "shutdown", "terminate"}


@click.command("plugins")
@output_option
@handle_errors
def plugins_cmd(output: str) -> None:
    """Each plugin: name, version, channel types; each plugin that failed to load and why."""
    from powerplane.plugins import registry

    reg = registry()
    if output == "json":
        emit_json(
            {
                "plugins": [
                    {
                        "name": p.name,
                        "distribution": p.distribution,
                        "version": p.version,
                        "channel_types": list(p.channel_types),
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
            }
        )
        return
    from rich.table import Table

    table = Table(title="plugins", title_justify="left")
    for col in ("plugin", "distribution", "version", "channel types"):
        table.add_column(col)
    for p in reg.plugins:
        table.add_row(p.name, p.distribution, p.version, ", ".join(p.channel_types))
    out = console()
    out.print(table)
    for f in reg.failures:
        out.print(f"[red]failed[/red] plugin {f.name} ({f.distribution} {f.version}): {f.error}")


@click.command("offers")
@click.argument("nodes", nargs=-1)
@output_option
@click.pass_context
@handle_errors
def offers_cmd(ctx: click.Context, nodes: tuple[str, ...], output: str) -> None:
    """Per node, per verb: offered or withheld, the channel that carries it, the reason."""

    async def go() -> list[dict[str, object]]:
        async with open_host(ctx) as host:
            return [o.as_dict() for o in host.offers(list(nodes) or None)]

    data = run_async(go())
    if output == "json":
        emit_json({"nodes": data})
        return
    from rich.table import Table

    table = Table(title="offers", title_justify="left", show_lines=False)
    for col in ("node", "site", "verb", "offered", "channel", "why"):
        table.add_column(col, overflow="fold")
    for node in data:
        verbs = node["verbs"]
        assert isinstance(verbs, dict)
        first = True
        for verb, o in verbs.items():
            offered = o["offered"]
            mode = ("graceful" if o.get("graceful") else "hard") if offered else ""
            why = o.get("recovery", "") if offered else o.get("reason", "")
            table.add_row(
                str(node["node"]) if first else "",
                str(node["site"] or "") if first else "",
                verb,
                f"[green]yes[/green] ({mode})" if offered else "[red]no[/red]",
                o.get("channel", "") or "",
                why,
            )
            first = False
        table.add_section()
    console().print(table)


@click.command("invoke")
@click.argument("node")
@click.argument("verb")
@click.option("--reason", required=True, help="Why (recorded in the log with the request).")
@click.option("--yes", is_flag=True, help="Do not ask to type the node name.")
@click.option(
    "--wait",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to read the node back for the state the verb leads to (0: do not read).",
)
@output_option
@click.pass_context
@handle_errors
def invoke_cmd(
    ctx: click.Context, node: str, verb: str, reason: str, yes: bool, wait: float, output: str
) -> None:
    """Run VERB (reboot, shutdown, power-on, terminate) on NODE, under the recoverability rule."""
    from powerplane.capabilities import Verb

    the_verb = Verb.parse(verb)
    if not reason.strip():
        raise click.UsageError("--reason must not be empty")

    async def go() -> dict[str, object]:
        async with open_host(ctx) as host:
            offer = host.offer_for(node)[the_verb]
            if offer.offered and the_verb.value in DESTRUCTIVE and not yes:
                _confirm(node, the_verb.value, offer.channel or "")
            result = await host.invoke(node, the_verb, reason=reason, wait=wait)
            return result.as_dict()

    data = run_async(go())
    if output == "json":
        emit_json(data)
        return
    line = f"{data['verb']} accepted for {data['node']} via channel {data['channel']}"
    if data.get("readback") is not None:
        line += f"; reads {data['readback']}"
    if data.get("detail"):
        line += f" ({data['detail']})"
    console().print(line)


def _confirm(node: str, verb: str, channel: str) -> None:
    if not sys.stdin.isatty():
        typed = sys.stdin.readline().strip()
    else:
        typed = click.prompt(
            f"{verb} {node} via {channel}: type the node name to confirm", default="",
            show_default=False,
        )
    if typed != node:
        click.echo("error: confirmation did not match the node name; nothing was sent "
                   "(pass --yes in scripts)", err=True)
        sys.exit(2)


@click.command("state")
@click.argument("node")
@output_option
@click.pass_context
@handle_errors
def state_cmd(ctx: click.Context, node: str, output: str) -> None:
    """Read NODE's power state back through its channels (on, off or unknown)."""

    async def go() -> dict[str, object]:
        async with open_host(ctx) as host:
            return (await host.read_power_state(node)).as_dict()

    data = run_async(go())
    if output == "json":
        emit_json(data)
        return
    detail = f" ({data['detail']})" if data.get("detail") else ""
    console().print(f"{data['node']}: {data['state']} via {data['channel']}{detail}")
