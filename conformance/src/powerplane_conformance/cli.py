"""The ``powerplane conformance`` and ``powerplane new-plugin`` commands.

Registered through the entry-point group ``powerplane.cli``. This module imports only
click and core's CLI helpers: pytest and the suite load when a command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from powerplane.cli.kit import config_path, emit_json, handle_errors, output_option

if TYPE_CHECKING:
    from powerplane_conformance.settings import Target

__all__ = ["conformance_cmd", "new_plugin_cmd"]


EXIT_CODES = """\b
Exit codes:
  0  pass: every advertised verb verified; or incomplete (an advertised verb
     not verified: allow_destructive off, a single node, ...)
  1  fail: a check failed; or incomplete under --require-complete
  2  bad input: the target file, --channel, or a destructive run not confirmed
  130  interrupted (SIGINT, SIGTERM): never conformant; the report names the
     checks that did not run and whether each machine was put back
"""


@click.command("conformance", epilog=EXIT_CODES)
@click.option("--target", "target", type=click.Path(dir_okay=False), default=None,
              help="Target file: a deployment config with a conformance: section "
                   "(default: the global --config file).")
@click.option("--channel", default=None, help="Test only this channel.")
@click.option("--report", type=click.Path(dir_okay=False), default=None,
              help="Write results.json here.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Write JUnit XML here (properties: assertion id, verb, latency).")
@click.option("--html", "html", type=click.Path(dir_okay=False), default=None,
              help="Write a self-contained HTML report here (the verdict, the "
                   "advertised-versus-verified matrix, every check).")
@click.option("--require-complete", is_flag=True,
              help="Exit 1 when the verdict is incomplete (an advertised verb was not "
                   "verified), not only when a check failed: for CI gates.")
@click.option("--yes", is_flag=True,
              help="Do not ask to type the channel name(s) before a destructive run "
                   "(allow_destructive: true); required without a terminal.")
@click.option("--subprocess", "in_subprocess", is_flag=True,
              help="Run pytest in a child process instead of in this one.")
@output_option
@click.pass_context
@handle_errors
def conformance_cmd(
    ctx: click.Context,
    target: str | None,
    channel: str | None,
    report: str | None,
    junit: str | None,
    html: str | None,
    require_complete: bool,
    yes: bool,
    in_subprocess: bool,
    output: str,
) -> None:
    """Run the conformance suite against a target; print the verdict and why.

    The verdict is pass (every advertised verb verified), incomplete (nothing failed,
    but an advertised verb was not verified) or fail (a check failed). A destructive
    target (allow_destructive: true) changes the power state of its nodes: on a
    terminal the command first asks for the channel name(s) under test, typed back;
    without a terminal it refuses unless --yes. An attended target (attended: true)
    asks the person at the terminal to power on a machine its channel cannot, then
    reads it back.
    """
    from powerplane_conformance.interrupt import signals_interrupt

    with signals_interrupt():  # SIGTERM interrupts the run as Ctrl-C does
        _conformance(ctx, target, channel, report, junit, html, require_complete, yes,
                     in_subprocess, output)


def _conformance(
    ctx: click.Context,
    target: str | None,
    channel: str | None,
    report: str | None,
    junit: str | None,
    html: str | None,
    require_complete: bool,
    yes: bool,
    in_subprocess: bool,
    output: str,
) -> None:
    from powerplane import ConfigError
    from powerplane_conformance.api import (
        EXIT_INTERRUPTED,
        RunSummary,
        interrupted_before_the_suite,
        run_suite,
        validate_target,
    )
    from powerplane_conformance.report import summary_text

    path = target or config_path(ctx)
    if path is None:
        raise click.UsageError("give --target FILE (or the global --config FILE)")
    if html is not None and not Path(html).resolve().parent.is_dir():
        raise click.BadParameter(f"no such directory: {Path(html).resolve().parent}",
                                 param_hint="--html")
    try:
        try:
            loaded = validate_target(path, channel)
        except ConfigError as exc:  # --channel naming no channel under test: an option
            if [p.path for p in exc.problems] == ["--channel"]:  # mistake, a usage error
                raise click.BadParameter(exc.problems[0].message,
                                         param_hint="'--channel'") from None
            raise
        if loaded.settings.allow_destructive and not yes:
            _confirm(_under_test(loaded, channel), loaded.nodes,
                     loaded.settings.allow_terminate)
        # confirmed (or --yes): a person at this terminal powers on what a channel cannot
        by_hand = (_at_the_rack if loaded.settings.attended
                   and loaded.settings.allow_destructive and _interactive()
                   and not in_subprocess else None)
    except KeyboardInterrupt:  # before anything was sent: still a report that says so
        summary = RunSummary(EXIT_INTERRUPTED,
                             interrupted_before_the_suite("loading the target file"))
        if report is not None:
            _write_json(summary.data, Path(report))
    else:
        summary = run_suite(path, channel=channel, report=report, junit=junit,
                            in_subprocess=in_subprocess, require_complete=require_complete,
                            power_on_by_hand=by_hand)
    unwritten = _write_html(summary.data, Path(html)) if html is not None else None
    if output == "json":
        emit_json(summary.data)
    else:
        click.echo(summary_text(summary.data))
    if unwritten:
        click.echo(f"error: --html {html}: {unwritten}", err=True)
        sys.exit(2)
    _ending(ctx)
    sys.exit(summary.exit_code)


def _ending(ctx: click.Context) -> None:
    """The command's own process ends now: what is alive stays so until the exit, so the
    collector need not walk it all once more while the interpreter shuts down (a few
    tenths of a second on a loaded machine, the most of an interrupted run's last second).
    Never in a library caller's process (click's test runner, an embedding program)."""
    import gc

    from powerplane.cli import OWN_PROCESS

    if (ctx.find_root().obj or {}).get(OWN_PROCESS):
        gc.freeze()


def _under_test(loaded: Target, channel: str | None) -> list[str]:
    """The channels the run acts through: those of the nodes under test (or ``channel``)."""
    used = [ref.channel for n in loaded.nodes for ref in loaded.deployment.nodes[n].channels]
    return [c for c in dict.fromkeys(used) if channel is None or c == channel]


def _interactive() -> bool:
    """Whether a person can answer on stdin (a terminal)."""
    return sys.stdin.isatty()


def _confirm(channels: list[str], nodes: list[str], terminate: bool) -> None:
    """A person types the channel name(s) under test back before anything is sent."""
    names = ", ".join(channels)
    plural = "s" if len(channels) > 1 else ""
    if not _interactive():
        click.echo(f"error: destructive run (allow_destructive: true) on channel{plural} "
                   f"{names} and there is no terminal to confirm on; nothing was sent "
                   "(pass --yes in scripts and CI)", err=True)
        sys.exit(2)
    verbs = "reboot, shutdown, power-on" + (" and terminate (never undone)" if terminate else "")
    shown = ", ".join(nodes[:5]) + (", ..." if len(nodes) > 5 else "")
    click.echo(f"This run sends {verbs} through channel{plural} {names} to {len(nodes)} "
               f"node{'s' if len(nodes) != 1 else ''} ({shown}).", err=True)
    question = (f"Type the channel name{plural} to proceed"
                + (" (separated by spaces)" if len(channels) > 1 else ""))
    typed = str(click.prompt(question, default="", show_default=False, err=True))
    if sorted(typed.replace(",", " ").split()) != sorted(channels):
        click.echo(f"error: confirmation did not match the channel name{plural} ({names}); "
                   "nothing was sent (pass --yes in scripts)", err=True)
        sys.exit(2)


def _at_the_rack(node: str, target: Any) -> None:
    """Ask the person at the terminal to power ``node`` on; return when they press Enter
    (the suite then reads it back: their word is not the evidence)."""
    click.prompt(f"\npower on {node} ({target}) at the rack, then press Enter", default="",
                 show_default=False, prompt_suffix=" ", err=True)


def _write_json(data: dict[str, Any], path: Path) -> None:
    """results.json of a run interrupted before the suite started (best effort)."""
    import json

    try:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError:
        pass


def _write_html(data: dict[str, Any], path: Path) -> str | None:
    """The HTML report, from the same document as results.json; why it could not be
    written (None: it was)."""
    from powerplane_conformance.html import write_html

    try:
        write_html(data, path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


@click.command("new-plugin")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=".",
              show_default=True, help="Where to create the distribution's folder.")
@handle_errors
def new_plugin_cmd(name: str, directory: str) -> None:
    """Write a plugin distribution NAME that passes the conformance suite out of the box."""
    from powerplane_conformance.newplugin import write_plugin

    root = write_plugin(name, directory)
    click.echo(f"wrote {root}")
    click.echo(f"next: pip install -e '{root}[test]' && pytest {root}/tests")
