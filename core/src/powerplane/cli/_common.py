"""What every CLI command shares: output (-o), error reporting and exit codes, the host."""

from __future__ import annotations

import asyncio
import functools
import gc
import sys
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

    from powerplane.host import PowerHost

__all__ = [
    "config_path",
    "console",
    "emit_json",
    "esc",
    "handle_errors",
    "open_host",
    "output_option",
    "run_async",
]

T = TypeVar("T")

output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Tables for people, JSON for scripts.",
)


def console(stderr: bool = False) -> Console:
    """The one console every command prints through.

    In a terminal it wraps to the terminal's width; otherwise lines are never hard-wrapped
    (a printed command must survive a pipe). ``NO_COLOR`` (any value) removes all styling.
    Everything that comes from a config, a device or an exception goes through :func:`esc`.
    """
    import os

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    plain = "NO_COLOR" in os.environ
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=not tty,
        width=None if tty else 10_000,
        color_system=None if plain else "auto",
        no_color=plain,
        emoji=False,
    )


def esc(text: object) -> str:
    """``text`` with Rich markup escaped: untrusted strings are never markup."""
    from rich.markup import escape

    return escape(str(text))


def emit_json(data: Any) -> None:
    """``data`` as ``json.dumps(data, indent=2, default=str)`` writes it, plus a newline:
    the same bytes, encoded by the C encoder where it can be (:mod:`powerplane.cli._json`)."""
    from powerplane.cli._json import dumps_indented

    click.echo(dumps_indented(data))


def config_path(ctx: click.Context) -> str | None:
    obj = ctx.find_root().obj or {}
    value = obj.get("config")
    return value if isinstance(value, str) else None


def handle_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Turn powerplane errors into one clear message on stderr and the contract's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        from powerplane.errors import PowerplaneError

        try:
            return fn(*args, **kwargs)
        except PowerplaneError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except ValueError as exc:  # bad input to the Python API (empty reason, bad verb)
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; in a fresh thread when a loop already runs here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def open_host(
    ctx: click.Context, *, guarded: bool = False, nodes: Iterable[str] | None = None
) -> PowerHost:
    """A host for the deployment named by --config / $POWERPLANE_CONFIG / ./powerplane.yaml.

    ``guarded``: where the deployment has a ``lifecycle:`` section, every reboot, shutdown
    and terminate passes the lifecycle's guard (quorum, virtual nodes, active maintenances,
    the reason policy): no direct call bypasses it.

    ``nodes``: start the host for these nodes only (``()``: none), so a one-node command
    creates, discovers and imports only what it touches; the rest on first use. None (the
    default): every channel is created and discovered at start.
    """
    from powerplane.cli import OWN_PROCESS
    from powerplane.config import load_config
    from powerplane.host import PowerHost

    deployment = load_config(config_path(ctx))
    if (ctx.find_root().obj or {}).get(OWN_PROCESS):
        # the deployment lives as long as the process: the collector need not walk it again
        gc.freeze()
    if not guarded:
        return PowerHost(deployment, nodes=nodes)
    from powerplane.lifecycle.guard import invoke_guard

    guard = invoke_guard(deployment)
    host = PowerHost(deployment, guard=guard, nodes=nodes)
    if guard is not None:
        guard.host = host  # the guard reads readiness through this host: one discovery
    return host
