"""The ``powerplane`` command line: a lazy click group.

Built-in commands load on use; more commands come from the entry-point group
``powerplane.cli`` (each entry point a :class:`click.Command`; powerplane-conformance
adds ``conformance`` and ``new-plugin`` this way, powerplane-demo adds ``demo``).
``--help`` imports no plugin and no heavy library (the entry points are read by
:mod:`importlib.metadata`, the standard reader: :mod:`powerplane.cli._extensions`).

Signals: in the ``powerplane`` process (:func:`main`), SIGTERM does what Ctrl-C does. Either
stops the command at once: it says ``interrupted`` (with the power requests that were in
flight, see :mod:`powerplane.cli._common`) and exits 130. The process then never waits for a
thread still blocked in a plugin's library: core's worker threads are daemon threads
(:mod:`powerplane.workers`), and where a plugin started threads of its own that are still
alive, the process leaves without joining them (its output flushed first).
"""

from __future__ import annotations

import importlib
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from powerplane.cli._process import INTERRUPTED as INTERRUPTED
from powerplane.cli._process import OWN_PROCESS as OWN_PROCESS

if TYPE_CHECKING:
    from powerplane._entry_points import EntryPoint

__all__ = ["cli", "main"]

BUILTIN: dict[str, tuple[str, str, str]] = {
    "plugins": ("powerplane.cli.commands", "plugins_cmd",
                "Each plugin: name, version, channel types; failures and why."),
    "offers": ("powerplane.cli.commands", "offers_cmd",
               "Per node, per verb: offered or withheld, the channel, the reason."),
    "invoke": ("powerplane.cli.commands", "invoke_cmd",
               "Run one verb (reboot, shutdown, power-on, terminate) under the rule."),
    "state": ("powerplane.cli.commands", "state_cmd",
              "Read a node's power state back through its channels."),
    "check": ("powerplane.cli.commands", "check_cmd",
              "Prove the whole deployment file: every key, every secret, every channel."),
    "auth": ("powerplane.cli.auth", "auth_group",
             "Explain what the policy decides for you (auth can-i ACTION NODE)."),
    "audit": ("powerplane.cli.auth", "audit_cmd",
              "The audit trail: who asked for what, and what the policy said."),
    "maintenance": ("powerplane.cli.maintenance", "maintenance_group",
                    "The node-maintenance lifecycle: request, status, list, run, return, "
                    "abandon, resolve."),
}

EXTENSION_GROUP = "powerplane.cli"

def hoist_config(args: list[str]) -> list[str]:
    """Move every ``--config F`` / ``--config=F`` that follows the command name to just before
    it, so the root option is accepted anywhere (``powerplane offers --config F``,
    ``powerplane maintenance list --config F``). A later one wins, as click does. Nothing
    after ``--`` is touched; a trailing ``--config`` without a value is a usage error.
    """
    command = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args
        if arg == "--config":
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        command = i
        break
    if command is None:
        return args
    front, rest, moved = list(args[:command]), [], []
    i = command
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg == "--config":
            if i + 1 == len(args):
                raise click.UsageError("Option '--config' requires an argument (a file).")
            moved += args[i : i + 2]
            i += 2
            continue
        if arg.startswith("--config="):
            moved.append(arg)
            i += 1
            continue
        rest.append(arg)
        i += 1
    return [*front, *moved, *rest]


class LazyGroup(click.Group):
    """A group whose commands are imported only when they are run or asked for help."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = hoist_config(list(args))
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        # a command that does not report an interrupt itself: the same words and exit code
        # (click would say "Aborted!" and exit 1)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            if ctx.parent is not None:
                raise
            from powerplane.cli._common import say_interrupted

            say_interrupted(exc)
            sys.exit(INTERRUPTED)

    def _extensions(self) -> dict[str, EntryPoint]:
        # read only for a command that is not built in, and for --help
        from powerplane.cli._extensions import scan

        return scan(EXTENSION_GROUP)

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(BUILTIN)
        names.update(self._extensions())
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in BUILTIN:
            module, attr, _ = BUILTIN[cmd_name]
            try:
                cmd = getattr(importlib.import_module(module), attr)
            except ModuleNotFoundError:
                return None
            return cmd  # type: ignore[no-any-return]
        ep = self._extensions().get(cmd_name)
        if ep is None:
            return None
        try:
            loaded = ep.load()
        except Exception as exc:  # an extension that cannot load: say so, keep the rest
            return _broken(cmd_name, f"{type(exc).__name__}: {exc}")
        return loaded if isinstance(loaded, click.Command) else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """One row per command with its one-line summary: a built-in's from :data:`BUILTIN`
        (its module is not imported), another distribution's from its command's own help
        (its entry point is loaded; a command module keeps its heavy imports inside the
        callback, as the in-tree ones do)."""
        rows = [(name, spec[2]) for name, spec in BUILTIN.items()]
        for name, ep in self._extensions().items():
            if name not in BUILTIN:
                rows.append((name, _summary(self.get_command(ctx, name), ep)))
        rows.sort()
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _summary(cmd: click.Command | None, ep: EntryPoint) -> str:
    """The one-line summary of an extension command (its short help, else its help's first
    sentence); one that is not a click command, or has no help, says where it comes from."""
    dist = ep.dist or "an installed distribution"
    if cmd is None:
        return f"(from {dist}: {ep.value} is not a click command)"
    summary = cmd.get_short_help_str(limit=300)
    return summary or f"(from {dist}; no help text)"


def _broken(name: str, error: str) -> click.Command:
    def run() -> None:
        click.echo(f"error: command {name!r} could not be loaded: {error}", err=True)
        sys.exit(1)

    return click.Command(name, callback=run, help=f"(failed to load: {error})")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    default=None,
    help="Deployment file (default: $POWERPLANE_CONFIG, else ./powerplane.yaml); "
    "accepted before or after the command.",
)
@click.version_option(package_name="powerplane", prog_name="powerplane")
@click.pass_context
def cli(ctx: click.Context, config: str | None) -> None:
    """powerplane: control server power safely, through plugins, under the recoverability rule.

    Exit codes: 0 done; 1 the channel or device failed, or the outcome is unknown; 2 bad
    input (usage, config, unknown node); 3 refused by the rule; 130 interrupted.
    """
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point (SIGTERM handled as Ctrl-C; see the module docstring)."""
    terminate_as_interrupt()
    try:
        return cli.main(args=argv, prog_name="powerplane", obj={OWN_PROCESS: True})
    except SystemExit as exc:
        if exc.code == INTERRUPTED:
            leave_without_waiting(INTERRUPTED)
        raise


def terminate_as_interrupt() -> None:
    """Make SIGTERM do what Ctrl-C does in this process (unless something else handles it)."""
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_terminate)


def _on_terminate(signum: int, frame: FrameType | None) -> None:
    import signal

    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # asyncio's (cancels the command's task), or Python's
        return
    raise KeyboardInterrupt  # SIGINT ignored (a background job): SIGTERM still stops it


def leave_without_waiting(code: int) -> None:
    """After an interrupt: where a thread other than core's own workers is still alive (one
    a plugin started, perhaps in its own ``ThreadPoolExecutor``, which the interpreter joins
    at exit whatever its daemon flag), run the exit handlers, flush the output and leave now
    with ``code`` instead of joining it. Returns where there is none (a normal exit follows).
    """
    import atexit
    import os
    import threading

    from powerplane.workers import owns

    main_thread = threading.main_thread()
    if not any(t is not main_thread and t.is_alive() and not owns(t)
               for t in threading.enumerate()):
        return
    try:
        atexit._run_exitfuncs()  # what a normal exit runs before it joins threads
    except Exception:  # an exit handler's failure must not keep the process
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream: nothing more can be said on it
    os._exit(code)
