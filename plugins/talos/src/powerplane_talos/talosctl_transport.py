"""The talosctl transport: one ``talosctl`` subprocess per call.

It builds the argv the real talosctl takes::

    talosctl --talosconfig PATH [--context CTX] --nodes NODE reboot --mode MODE --wait=false
    talosctl --talosconfig PATH [--context CTX] --nodes NODE shutdown --force=BOOL --wait=false
    talosctl --talosconfig PATH [--context CTX] --nodes NODE version

Only paths and names go on the command line, never a secret. With inline credentials
the talosconfig never touches a disk: each call renders it into an anonymous memory
file (:class:`~powerplane_talos.memfile.MemoryFile`) that the child inherits as
descriptor N and opens as ``--talosconfig /dev/fd/N`` (talosctl's ``clientconfig.Open``
stats and opens an explicit path, then decodes it as YAML; it writes only to a path
that does not exist). The file goes with the last descriptor, so a kill at any moment
leaves nothing behind.

The child gets a minimal environment: ``PATH``, ``HOME``, ``TMPDIR``, ``TZ`` and the
locale (``LANG``, ``LANGUAGE``, ``LC_*``), plus the names the channel's
``talosctl_env`` lists (a proxy, say); no other variable of this process, so no
unrelated secret, reaches it.

Reboot and shutdown pass :func:`powerplane.about_to_send` right before talosctl is
started: from then on the request may leave, so a deadline that passes afterwards (the
child killed, or talosctl's own ``DeadlineExceeded``) or a connection lost mid-call is
:class:`~powerplane.OutcomeUnknown`, never a plain failure. A failure is read from
talosctl's stderr, which carries gRPC's ``rpc error: code = X desc = ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Iterable

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ConfigError,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    Timeouts,
    TLSVerificationFailed,
    Unreachable,
    about_to_send,
)
from powerplane_talos.config import RebootMode
from powerplane_talos.memfile import MemoryFile

__all__ = ["KEPT_ENV", "TalosctlTransport", "child_env", "map_stderr", "resolve_binary"]

_CODE = re.compile(r"code = (\w+) desc = (.*)")

KEPT_ENV = ("HOME", "LANG", "LANGUAGE", "PATH", "TMPDIR", "TZ")
"""The variables of this process a talosctl child gets (with every ``LC_*``)."""

_LOST = ("error reading from server", "transport is closing", "connection reset by peer")
"""gRPC-go's words for a connection lost after it was established (not while dialing)."""


def child_env(extra: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a talosctl child: :data:`KEPT_ENV`, the locale, and ``extra``."""
    wanted = {*KEPT_ENV, *extra}
    env: dict[str, str] = {}
    # Each variable read once with get(): another thread may unset one meanwhile (pytest
    # removes PYTEST_CURRENT_TEST between tests), which items() turns into a KeyError.
    for k in list(os.environ):
        if k in wanted or k.startswith("LC_"):
            v = os.environ.get(k)
            if v is not None:
                env[k] = v
    return env


def resolve_binary(binary: str, channel: str) -> str:
    """The talosctl executable's path, or a :class:`ConfigError` naming the configured one."""
    found = shutil.which(binary)
    if found is None:
        raise ConfigError(
            f"channels.{channel}.talosctl: talosctl binary {binary!r} not found "
            "(not an executable path, nor a name on PATH)"
        )
    return found


def map_stderr(
    stderr: str, status: int, *, channel: str, target: str, sent: bool = False
) -> ChannelError:
    """The powerplane error for a talosctl that exited ``status`` with ``stderr``.

    ``sent``: the call was a verb whose request may have left; then a deadline or a
    connection lost mid-call is :class:`~powerplane.OutcomeUnknown`.
    """
    kw = {"channel": channel, "target": target}
    text = " ".join(stderr.split())
    if "rpc error:" in text:  # keep gRPC's status text, drop talosctl's preamble
        text = text[text.index("rpc error:"):]
    if len(text) > 600:
        text = text[:600] + "..."
    if not text:
        text = f"talosctl exited {status} without a message"
    if "x509:" in text or "failed to verify certificate" in text:
        return TLSVerificationFailed(f"talosctl: {text}", **kw)
    if "remote error: tls:" in text or "authentication handshake failed" in text:
        return AuthenticationFailed(f"talosctl: {text}", **kw)
    match = _CODE.search(text)
    code = match.group(1) if match else ""
    if sent and (
        code == "DeadlineExceeded"
        or ("while dialing" not in text and any(words in text for words in _LOST))
    ):
        return OutcomeUnknown(f"talosctl: {text}", **kw)
    if code in ("Unavailable",) or "connection refused" in text:
        return Unreachable(f"talosctl: {text}", **kw)
    if code == "DeadlineExceeded":
        return ChannelTimeout(f"talosctl: {text}", **kw)
    if code in ("Unauthenticated", "PermissionDenied"):
        return AuthenticationFailed(f"talosctl: {text}", **kw)
    if code:
        return RefusedByDevice(f"talosctl: {text}", **kw)
    return ProtocolError(f"talosctl exited {status}: {text}", **kw)


class TalosctlTransport:
    """Runs talosctl for each call, with a deadline, and maps its failures."""

    def __init__(
        self,
        channel: str,
        binary: str,
        talosconfig: str | bytes,
        context: str | None,
        timeouts: Timeouts,
        pass_env: Iterable[str] = (),
    ) -> None:
        self.channel_name = channel
        self.configured_binary = binary
        self.binary = resolve_binary(binary, channel)
        self.talosconfig = talosconfig
        """A talosconfig path, or the document itself (inline credentials, kept in memory)."""
        self.context = context
        self.timeouts = timeouts
        self.timeout_s = timeouts.total_s
        """The deadline of one talosctl run: it connects and waits for the answer."""
        self.pass_env = tuple(pass_env)

    def argv(self, node: str, *command: str, talosconfig: str | None = None) -> list[str]:
        """The full command line for ``command`` on ``node`` (no secret in it).

        ``talosconfig`` is the path the child opens; by default the configured file's
        (an in-memory talosconfig gets its ``/dev/fd/N`` path per call).
        """
        if talosconfig is None:
            if not isinstance(self.talosconfig, str):
                raise ValueError("an in-memory talosconfig has a path only during a call")
            talosconfig = self.talosconfig
        head = [self.binary, "--talosconfig", talosconfig]
        if self.context:
            head += ["--context", self.context]
        return [*head, "--nodes", node, *command]

    async def _run(self, node: str, command: list[str], *, verb: bool = False) -> str:
        memory = None
        if isinstance(self.talosconfig, bytes):
            memory = MemoryFile("talosconfig", self.talosconfig)
        try:
            argv = self.argv(node, *command,
                             talosconfig=memory.child_path if memory is not None else None)
            if verb:
                about_to_send()  # from here on talosctl may send the request
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=child_env(self.pass_env),
                    pass_fds=(memory.fd,) if memory is not None else (),
                )
            except (FileNotFoundError, PermissionError) as exc:
                raise ChannelError(
                    f"talosctl binary {self.configured_binary!r} cannot be run "
                    f"({exc.strerror}; channels.{self.channel_name}.talosctl)",
                    channel=self.channel_name,
                    target=node,
                ) from exc
        finally:
            if memory is not None:
                memory.close()  # the child holds its own descriptor of the memory file
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            what = f"talosctl {command[0]} did not finish within {self.timeout_s:g} s (killed)"
            if verb:
                raise OutcomeUnknown(what, channel=self.channel_name, target=node) from exc
            raise ChannelTimeout(what, channel=self.channel_name, target=node) from exc
        status = proc.returncode or 0
        if status != 0:
            raise map_stderr(
                err.decode("utf-8", "replace"), status, channel=self.channel_name, target=node,
                sent=verb,
            )
        return out.decode("utf-8", "replace")

    async def reboot(self, node: str, mode: RebootMode) -> str:
        """``talosctl ... reboot --mode MODE --wait=false``."""
        return await self._run(node, ["reboot", "--mode", mode.value, "--wait=false"],
                               verb=True)

    async def shutdown(self, node: str, force: bool) -> str:
        """``talosctl ... shutdown --force=BOOL --wait=false``."""
        return await self._run(
            node, ["shutdown", f"--force={str(force).lower()}", "--wait=false"], verb=True
        )

    async def boot_time(self, node: str) -> int | None:
        """None: no talosctl command prints ``SystemStat.boot_time``.

        talosctl has no subcommand that calls the SystemStat RPC, and reading ``btime``
        with ``talosctl read /proc/stat`` needs the ``os:admin`` role (Talos's Read RPC
        is admin-only), more than reboot and shutdown need. So this transport publishes
        no boot marker; the gRPC transport (``transport: grpc``) does.
        """
        return None

    async def version(self, node: str) -> str:
        """``talosctl ... version``; the server's tag from its output."""
        out = await self._run(node, ["version"])
        server = out.split("Server:", 1)[-1]
        match = re.search(r"Tag:\s*(\S+)", server)
        return match.group(1) if match else ""

    async def close(self) -> None:
        """Nothing stays open between calls."""
