"""The talosctl transport: one ``talosctl`` subprocess per call.

It builds the argv the real talosctl takes::

    talosctl --talosconfig PATH [--context CTX] --nodes NODE reboot --mode MODE --wait=false
    talosctl --talosconfig PATH [--context CTX] --nodes NODE shutdown --force=BOOL --wait=false
    talosctl --talosconfig PATH [--context CTX] --nodes NODE version

Only paths and names go on the command line, never a secret: with inline credentials
the channel writes a private talosconfig (mode 0600 in a 0700 directory) and passes
its path. The call is killed at its deadline. A failure is read from talosctl's
stderr, which carries gRPC's ``rpc error: code = X desc = ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ConfigError,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_talos.config import RebootMode

__all__ = ["TalosctlTransport", "map_stderr", "resolve_binary"]

_CODE = re.compile(r"code = (\w+) desc = (.*)")


def resolve_binary(binary: str, channel: str) -> str:
    """The talosctl executable's path, or a :class:`ConfigError` naming the configured one."""
    found = shutil.which(binary)
    if found is None:
        raise ConfigError(
            f"channels.{channel}.talosctl: talosctl binary {binary!r} not found "
            "(not an executable path, nor a name on PATH)"
        )
    return found


def map_stderr(stderr: str, status: int, *, channel: str, target: str) -> ChannelError:
    """The powerplane error for a talosctl that exited ``status`` with ``stderr``."""
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
        talosconfig: str,
        context: str | None,
        timeout_s: float,
    ) -> None:
        self.channel_name = channel
        self.configured_binary = binary
        self.binary = resolve_binary(binary, channel)
        self.talosconfig = talosconfig
        self.context = context
        self.timeout_s = timeout_s

    def argv(self, node: str, *command: str) -> list[str]:
        """The full command line for ``command`` on ``node`` (no secret in it)."""
        head = [self.binary, "--talosconfig", self.talosconfig]
        if self.context:
            head += ["--context", self.context]
        return [*head, "--nodes", node, *command]

    async def _run(self, node: str, argv: list[str]) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=os.environ.copy(),
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ChannelError(
                f"talosctl binary {self.configured_binary!r} cannot be run "
                f"({exc.strerror}; channels.{self.channel_name}.talosctl)",
                channel=self.channel_name,
                target=node,
            ) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise ChannelTimeout(
                f"talosctl {argv[argv.index('--nodes') + 2]} did not finish within "
                f"{self.timeout_s:g} s (killed)",
                channel=self.channel_name,
                target=node,
            ) from exc
        status = proc.returncode or 0
        if status != 0:
            raise map_stderr(
                err.decode("utf-8", "replace"), status, channel=self.channel_name, target=node
            )
        return out.decode("utf-8", "replace")

    async def reboot(self, node: str, mode: RebootMode) -> str:
        """``talosctl ... reboot --mode MODE --wait=false``."""
        return await self._run(
            node, self.argv(node, "reboot", "--mode", mode.value, "--wait=false")
        )

    async def shutdown(self, node: str, force: bool) -> str:
        """``talosctl ... shutdown --force=BOOL --wait=false``."""
        return await self._run(
            node, self.argv(node, "shutdown", f"--force={str(force).lower()}", "--wait=false")
        )

    async def version(self, node: str) -> str:
        """``talosctl ... version``; the server's tag from its output."""
        out = await self._run(node, self.argv(node, "version"))
        server = out.split("Server:", 1)[-1]
        match = re.search(r"Tag:\s*(\S+)", server)
        return match.group(1) if match else ""

    async def close(self) -> None:
        """Nothing stays open between calls."""
