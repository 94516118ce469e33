"""The ``powerplane conformance`` and ``powerplane new-plugin`` commands.

Registered through the entry-point group ``powerplane.cli``. This module imports only
click and core's CLI helpers: pytest and the suite load when a command runs.
"""

from __future__ import annotations

import sys

import click

from powerplane.cli._common import config_path, emit_json, handle_errors, output_option

__all__ = ["conformance_cmd", "new_plugin_cmd"]


@click.command("conformance")
@click.option("--target", "target", type=click.Path(dir_okay=False), default=None,
              help="Target file: a deployment config with a conformance: section "
                   "(default: the global --config file).")
@click.option("--channel", default=None, help="Test only this channel.")
@click.option("--report", type=click.Path(dir_okay=False), default=None,
              help="Write results.json here.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Write JUnit XML here (properties: assertion id, verb, latency).")
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
    in_subprocess: bool,
    output: str,
) -> None:
    """Run the conformance suite against a target; exit 1 exactly when a check failed."""
    from powerplane_conformance.api import run_suite
    from powerplane_conformance.report import summary_text

    path = target or config_path(ctx)
    if path is None:
        raise click.UsageError("give --target FILE (or the global --config FILE)")
    summary = run_suite(path, channel=channel, report=report, junit=junit,
                        in_subprocess=in_subprocess)
    if output == "json":
        emit_json(summary.data)
    else:
        click.echo(summary_text(summary.data))
    sys.exit(summary.exit_code)


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
