"""``powerplane demo``: registered in the entry-point group ``powerplane.cli`` as ``demo``.

Importing this module stays cheap (click and core's CLI helpers); the walkthrough, the
plugins and the conformance suite load when the command runs.
"""

from __future__ import annotations

import sys

import click

from powerplane.cli.kit import console, handle_errors

__all__ = ["demo_cmd"]


@click.command("demo")
@click.option("--keep", is_flag=True,
              help="Leave the peers running; print the config, their PIDs and how to stop them.")
@click.option("--only", default=None,
              help="Only these peers, comma-separated (redfish,talos); an unknown name is "
                   "an error.")
@handle_errors
def demo_cmd(keep: bool, only: str | None) -> None:
    """Start the bundled peers on loopback and walk through the whole framework.

    Exit 0 only when every peer asked for (by default all) started and every step
    succeeded; 1 otherwise, naming what is missing and the command that installs it;
    2 for an unknown --only name.
    """
    from powerplane_demo.walkthrough import Demo

    wanted = {x.strip() for x in only.split(",") if x.strip()} if only is not None else None
    sys.exit(Demo(console(), only=wanted, keep=keep).run())
