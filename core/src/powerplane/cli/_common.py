"""What every CLI command shares: output (-o), error reporting and exit codes, the host.

Interrupts: Ctrl-C (and SIGTERM, which :func:`powerplane.cli.main` turns into the same) while
a command runs its event loop (:func:`run_async`) cancels the command's work at once; a call
blocked in a plugin's worker thread is abandoned to its daemon thread
(:mod:`powerplane.workers`), whose send gate stays closed. :func:`handle_errors` then says
``interrupted``, one line per power request that was in flight (whether it may have left,
from its send gate), and exits 130.

Garbage collection: the command's own process (:func:`powerplane.cli.main`, not a test's
in-process call) tunes the collector once for the whole command, in :func:`tune_gc` as the
deployment is loaded: what is alive then is frozen, and the young generation is collected
every :data:`YOUNG_THRESHOLD` allocations instead of every 700. Library code never touches
the collector: an application that embeds :class:`~powerplane.host.PowerHost` keeps its own
settings, and what it froze stays frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import re
import sys
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from powerplane.cli._process import INTERRUPTED, OWN_PROCESS

if TYPE_CHECKING:
    from rich.console import Console

    from powerplane.authority.identity import Identity
    from powerplane.authority.service import Authority
    from powerplane.channel import CutCall
    from powerplane.config import Deployment
    from powerplane.runtime import PowerHost, Runtime

__all__ = [
    "INTERRUPTED",
    "Interrupted",
    "Printer",
    "authority_of",
    "config_path",
    "console",
    "emit_json",
    "esc",
    "handle_errors",
    "on_behalf_of_identity",
    "on_behalf_of_option",
    "open_host",
    "open_runtime",
    "output_option",
    "printer",
    "run_async",
    "tune_gc",
]

T = TypeVar("T")

YOUNG_THRESHOLD = 100_000
"""The collector's first-generation threshold in a command's process (CPython's default is
700): a fleet call keeps a few objects alive per call in flight, so with 20,000 calls in
flight the default would run a collection every few dozen calls, each walking every call's
objects again and pushing them towards the full collections that walk everything."""


def tune_gc() -> None:
    """For the rest of this process (a command's own, never a library caller's): freeze what
    is alive now (the deployment, the registry, the imported modules live as long as the
    process: the collector need not walk them again) and raise the young generation's
    threshold to :data:`YOUNG_THRESHOLD`. The collector keeps running (a command's own
    objects form few reference cycles, but a plugin library's may)."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:  # 0: collection disabled by the user, left as it is
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off while a deployment file loads in a command's own
    process, as it was after (a caller that disabled it keeps it disabled).

    A document and its models are a tree of new containers with no cycles (reference
    counting frees them); each collection pass would walk every container made so far,
    which makes the cost per node grow with the size of the file. Library callers of
    :func:`powerplane.config.load_config` keep their own settings.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_deployment(ctx: click.Context, *, check: bool = False) -> Deployment:
    """The deployment named by ``--config`` / ``$POWERPLANE_CONFIG`` (every secret resolved
    and every channel opened with ``check``), loaded with the collector off when this is the
    command's own process; read once per command (kept in the context's ``meta``), through
    the validated-config cache (:mod:`powerplane.config_cache`: an unchanged file is not
    parsed and its nodes not validated again; ``check`` proves the whole file every time)."""
    from powerplane.config import check_config
    from powerplane.config_cache import load_cached

    if not check and _LOADED in ctx.meta:
        found: Deployment = ctx.meta[_LOADED]
        return found
    load = check_config if check else load_cached
    if (ctx.find_root().obj or {}).get(OWN_PROCESS):
        with collector_off():
            deployment = load(config_path(ctx))
    else:
        deployment = load(config_path(ctx))
    if not check:
        ctx.meta[_LOADED] = deployment
    return deployment


_LOADED = "powerplane.deployment"
"""Key of the command's loaded deployment in the click context's ``meta``."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped :func:`run_async`; ``calls`` are the power requests that
    were in flight, each with what its send gate knew."""

    def __init__(self, calls: tuple[CutCall, ...]) -> None:
        super().__init__()
        self.calls = calls

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


_TAGS = re.compile(r"\[/?(?:bold red|red|green|yellow)\]")
"""The style tags a :class:`Printer` template may hold (nothing else in it is markup)."""

_RICH_ONLY = frozenset("\t\a\b\v\f\r\x1b")
"""Characters Rich would change (tabs expanded by cell width, control codes removed): a line
holding one, or a backslash (:func:`esc` doubles a value's trailing one, which Rich then
prints), is printed by Rich itself, so the bytes never depend on which path printed it."""


class Printer:
    """One-line output of a command: a trusted template with ``{}`` for untrusted values.

    Where Rich would print the line as plain text (the stream is not a terminal and neither
    ``FORCE_COLOR`` nor ``TTY_COMPATIBLE`` makes Rich treat it as one), the line is written
    with :func:`click.echo` and Rich is not imported: the bytes are those :func:`console`
    would print (the template's style tags dropped, every value as written). Otherwise, or
    where a value holds a character Rich changes (a tab, a control code), through
    :func:`console`, every value escaped with :func:`esc`.

    Plain where every value is printable text without a backslash: what a state line, an
    accepted verb or an error line holds. Anything else takes Rich's path, byte for byte
    what it printed before.
    """

    def __init__(self, stderr: bool = False) -> None:
        self.stderr = stderr
        stream = sys.stderr if stderr else sys.stdout
        env = os.environ
        self.plain = ("FORCE_COLOR" not in env and "TTY_COMPATIBLE" not in env
                      and not _isatty(stream))
        self._console: Console | None = None

    def print(self, template: str, *values: object) -> None:
        """Print ``template`` with ``values`` in its ``{}`` (each escaped for Rich)."""
        if self.plain:
            bare = _TAGS.sub("", template)
            if "[" not in bare and "\\" not in bare:
                text = bare.format(*values)
                if _RICH_ONLY.isdisjoint(text) and "\\" not in text:
                    click.echo(text, err=self.stderr, color=True)  # color: no ANSI stripped
                    return
        if self._console is None:
            self._console = console(stderr=self.stderr)
        self._console.print(template.format(*(esc(v) for v in values)))


def printer(stderr: bool = False) -> Printer:
    """A :class:`Printer` on stdout (or stderr)."""
    return Printer(stderr)


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream: not a terminal, as Rich says
        return False


def esc(text: object) -> str:
    """``text`` with Rich markup escaped: untrusted strings are never markup."""
    from rich.markup import escape

    return escape(str(text))


def emit_json(data: Any) -> None:
    """``data`` as ``json.dumps(data, indent=2, default=str)`` writes it, plus a newline:
    the same bytes, encoded without ``indent`` where it can be (:mod:`powerplane.cli._json`)."""
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
        except KeyboardInterrupt as exc:
            say_interrupted(exc)
            sys.exit(INTERRUPTED)

    return wrapper


def say_interrupted(exc: BaseException | None = None) -> None:
    """``interrupted`` on stderr, then each power request that was in flight (``exc`` an
    :class:`Interrupted`) and whether it may have left."""
    click.echo("interrupted", err=True)
    for call in getattr(exc, "calls", ()):
        click.echo(f"  {call.words()}", err=True)


def _run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run`, with a default executor whose threads never hold the process
    (``asyncio.to_thread`` in a plugin, a resolver lookup) and that the loop's shutdown does
    not wait for."""
    from powerplane.workers import loop_executor

    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(loop_executor())
        return runner.run(coro)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; in a fresh (daemon) thread when a loop already runs here.

    Interrupted (Ctrl-C, SIGTERM), it raises :class:`Interrupted` naming the power requests
    the host gave up on, once the coroutine's cleanup ran.
    """
    from powerplane.channel import cut_calls

    try:
        asyncio.get_running_loop()
        nested = True
    except RuntimeError:  # the usual case: no loop runs in this thread
        nested = False
    with cut_calls() as cut:
        try:
            return _in_thread(_run_loop, coro) if nested else _run_loop(coro)
        except Interrupted:
            raise
        except KeyboardInterrupt:
            raise Interrupted(tuple(cut)) from None


def _in_thread(fn: Callable[[Coroutine[Any, Any, T]], T], coro: Coroutine[Any, Any, T]) -> T:
    """``fn(coro)`` in a daemon thread (joined here), so it never holds the process."""
    import contextvars
    import threading

    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # the thread sees this one's cut_calls()

    def run() -> None:
        try:
            box["result"] = context.run(fn, coro)
        except BaseException as exc:  # raised again in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="powerplane-cli-loop", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]


def open_runtime(ctx: click.Context, *, nodes: Iterable[str] | None = None) -> Runtime:
    """The deployment named by --config / $POWERPLANE_CONFIG / ./powerplane.yaml, opened
    through the one runtime (:func:`powerplane.runtime.open_deployment`): its host with the
    deployment's authority and, where it has a ``lifecycle:`` section, the lifecycle's
    guard on every reboot, shutdown and terminate (no command can leave it off), and its
    lifecycle on first use.

    ``nodes``: start the host for these nodes only (``()``: none), so a one-node command
    creates, discovers and imports only what it touches; the rest on first use. None (the
    default): every channel is created and discovered at start.
    """
    from powerplane.runtime import open_deployment

    deployment = load_deployment(ctx)
    if (ctx.find_root().obj or {}).get(OWN_PROCESS):
        tune_gc()  # the command's process: the collector tuned once, for the whole command
    return open_deployment(deployment, nodes=nodes)


def open_host(ctx: click.Context, *, nodes: Iterable[str] | None = None) -> PowerHost:
    """The runtime's host (:func:`open_runtime`) for a command that needs no lifecycle."""
    return open_runtime(ctx, nodes=nodes).host


def authority_of(deployment: Deployment) -> Authority:
    """The deployment's authority as the runtime composes it (its policy, this process's OS
    user, its audit trail), for a command that decides or reads without a host."""
    from powerplane.runtime import authority_for

    return authority_for(deployment)


def _no_actor(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise click.UsageError(
            "--actor no longer names the actor: the actor is the identity the platform "
            "authenticated (this process's OS user); --on-behalf-of TEXT records whom you "
            "act for beside it (it authorizes nothing)", ctx)


def on_behalf_of_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--on-behalf-of TEXT`` (recorded beside the authenticated identity, authorizes
    nothing), and ``--actor``, refused with why (it used to name the actor)."""
    fn = click.option("--actor", default=None, hidden=True, expose_value=False,
                      callback=_no_actor)(fn)
    return click.option(
        "--on-behalf-of", default=None,
        help="Whom you act for, in words: recorded beside your identity (the OS user), "
             "authorizes nothing.")(fn)


def on_behalf_of_identity(on_behalf_of: str | None) -> Identity:
    """This process's identity (its OS user and groups) with ``on_behalf_of`` beside it;
    ``$POWERPLANE_ACTOR``, which used to name the actor, is refused (exit 2) rather than
    silently ignored."""
    import dataclasses

    from powerplane.authority.identity import local_identity

    if os.environ.get("POWERPLANE_ACTOR"):
        raise click.UsageError(
            "$POWERPLANE_ACTOR no longer names the actor: the actor is this process's OS "
            "user; unset it, and use --on-behalf-of TEXT to record whom you act for")
    found = local_identity()
    text = (on_behalf_of or "").strip() or None
    return dataclasses.replace(found, on_behalf_of=text) if text else found
