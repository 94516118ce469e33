"""The gRPC transport: Talos's ``MachineService`` over mutual TLS with grpclib.

One grpclib channel (one HTTP/2 connection) is kept per endpoint and reused by every
call; each call carries the node in the ``nodes`` metadata, as talosctl does, and a
deadline (``timeouts.total_s``) that covers connecting too; connecting alone is bounded
by ``timeouts.connect_s``. grpcio is not used because it cannot complete
a TLS handshake with Talos's default Ed25519 certificates (grpc/grpc#24252).

Reboot and Shutdown open their stream and send its headers first (that connects, and
Talos acts on nothing before the request message), then pass
:func:`powerplane.about_to_send`, then send the message. A deadline or a lost
connection after that point is :class:`~powerplane.OutcomeUnknown` ("the request was
sent and may have been applied"); before it, nothing left and it is a plain
:class:`~powerplane.ChannelTimeout` or :class:`~powerplane.Unreachable`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h2.exceptions
from google.protobuf import empty_pb2
from grpclib.client import Channel, UnaryUnaryMethod
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    Timeouts,
    Unreachable,
    about_to_send,
)
from powerplane_talos._generated import machine_pb2
from powerplane_talos._generated.machine_grpc import MachineServiceStub
from powerplane_talos.config import RebootMode
from powerplane_talos.errors import map_error
from powerplane_talos.talosconfig import Credentials, split_endpoint
from powerplane_talos.tls import client_context

__all__ = ["GrpcTransport"]

_MODES = {
    RebootMode.DEFAULT: machine_pb2.RebootRequest.DEFAULT,
    RebootMode.POWERCYCLE: machine_pb2.RebootRequest.POWERCYCLE,
    RebootMode.FORCE: machine_pb2.RebootRequest.FORCE,
}


@dataclass
class _Progress:
    """How far one call got."""

    connected: bool = False
    """The stream's headers went out: the connection stands."""
    sent: bool = False
    """A verb's request message may have left."""


class GrpcTransport:
    """Reboot, Shutdown, Version and SystemStat for a node behind the first endpoint."""

    def __init__(self, channel: str, creds: Credentials, timeouts: Timeouts) -> None:
        self.channel_name = channel
        self.creds = creds
        self.timeouts = timeouts
        """``connect_s`` bounds connecting; a call's whole deadline is ``total_s``."""
        self.endpoint = creds.endpoints[0]
        self._host, self._port = split_endpoint(self.endpoint)
        self._ssl = client_context(creds.ca, creds.crt, creds.key)
        self._channels: dict[asyncio.AbstractEventLoop, Channel] = {}
        self.connections = 0
        """How many grpclib channels (connections) this transport opened."""

    def _channel(self) -> Channel:
        loop = asyncio.get_running_loop()
        found = self._channels.get(loop)
        if found is None:
            found = Channel(self._host, self._port, ssl=self._ssl)
            self._channels[loop] = found
            self.connections += 1
        return found

    async def _call(
        self,
        node: str,
        method: Callable[[MachineServiceStub], UnaryUnaryMethod[Any, Any]],
        request: Any,
        *,
        verb: bool,
    ) -> Any:
        """One unary call within the deadlines; its reply, or its failure mapped.

        Connecting (TCP, TLS, HTTP/2, then the stream's headers: Talos acts on nothing
        before the request message) is bounded by ``connect_s``, the whole call by
        ``total_s``, so the answer gets at least ``read_s``. A verb passes
        :func:`about_to_send` right before its request message leaves.
        """
        progress = _Progress()

        async def call(stub: MachineServiceStub) -> Any:
            async with method(stub).open(metadata=self._meta(node),
                                         timeout=self.timeouts.total_s) as stream:
                async with asyncio.timeout(self.timeouts.connect_s):
                    await stream.send_request()
                progress.connected = True
                if verb:
                    about_to_send()
                    progress.sent = True
                await stream.send_message(request, end=True)
                reply = await stream.recv_message()
            if reply is None:
                raise GRPCError(Status.UNKNOWN, "Talos sent no reply message")
            return reply

        try:
            return await asyncio.wait_for(call(MachineServiceStub(self._channel())),
                                          self.timeouts.total_s)
        except Exception as exc:
            cause: BaseException = exc
            if isinstance(exc, StreamTerminatedError | ConnectionResetError):
                cause = await self._probe_handshake() or exc
            if isinstance(cause, AuthenticationFailed):
                cause.target = node
            mapped = map_error(
                cause,
                channel=self.channel_name,
                target=node,
                endpoint=self.endpoint,
                timeout=self.timeouts.total_s if progress.connected
                else self.timeouts.connect_s,
            )
            if progress.sent and _may_have_applied(cause, mapped):
                raise OutcomeUnknown(mapped.message, channel=self.channel_name,
                                     target=node) from exc
            raise mapped from exc

    async def _probe_handshake(self) -> BaseException | None:
        """Why a connection was dropped, if the server rejected the client certificate.

        A TLS 1.3 server rejects a client certificate after the client has finished its
        side of the handshake; inside HTTP/2 that shows only as a lost connection. One
        bare TLS connection tells: a TLS alert raises ``ssl.SSLError`` (mapped by its
        reason), and a server that closes before sending its HTTP/2 settings has
        rejected the certificate (an asyncio server closes without sending the alert).
        """
        try:
            async with asyncio.timeout(min(self.timeouts.connect_s, 5.0)):
                reader, writer = await asyncio.open_connection(
                    self._host, self._port, ssl=self._ssl
                )
                try:
                    first = await reader.read(1)
                finally:
                    writer.close()
        except ssl.SSLError as exc:
            return exc
        except (OSError, TimeoutError):
            return None
        if first:
            return None
        cause = (
            "certificate required: no client certificate was presented"
            if self.creds.crt is None
            else "the client certificate was not accepted: it is not issued by the "
            "endpoint's CA (or is not valid)"
        )
        return AuthenticationFailed(
            f"{self.endpoint} closed the connection after the TLS handshake "
            f"(remote error: tls: {cause})",
            channel=self.channel_name,
        )

    def _meta(self, node: str) -> dict[str, Any]:
        return {"nodes": node}

    async def reboot(self, node: str, mode: RebootMode) -> str:
        """Send Reboot; the actor id Talos answers with."""
        request = machine_pb2.RebootRequest(mode=_MODES[mode])
        reply = await self._call(node, lambda s: s.Reboot, request, verb=True)
        return self._actor(node, reply.messages)

    async def shutdown(self, node: str, force: bool) -> str:
        """Send Shutdown; the actor id Talos answers with."""
        request = machine_pb2.ShutdownRequest(force=force)
        reply = await self._call(node, lambda s: s.Shutdown, request, verb=True)
        return self._actor(node, reply.messages)

    async def boot_time(self, node: str) -> int | None:
        """Call SystemStat; the node's ``boot_time`` (Unix seconds), or None if it sent none.

        Talos fills ``boot_time`` from ``btime`` of ``/proc/stat``; a reply without a
        message for the node, or with ``boot_time`` 0 (proto3's unset), publishes none.
        """
        reply = await self._call(node, lambda s: s.SystemStat, empty_pb2.Empty(), verb=False)
        for message in reply.messages:
            self._check_metadata(node, message)
            return int(message.boot_time) or None
        return None

    async def version(self, node: str) -> str:
        """Call Version; the Talos version tag the node reports."""
        reply = await self._call(node, lambda s: s.Version, empty_pb2.Empty(), verb=False)
        for message in reply.messages:
            self._check_metadata(node, message)
            return str(message.version.tag)
        return ""

    def _actor(self, node: str, messages: Any) -> str:
        for message in messages:
            self._check_metadata(node, message)
            return str(message.actor_id)
        return ""

    def _check_metadata(self, node: str, message: Any) -> None:
        # apid reports a failure to reach the upstream node in metadata.error
        error = message.metadata.error if message.HasField("metadata") else ""
        if error:
            from powerplane import RefusedByDevice, Unreachable

            cls = Unreachable if "Unavailable" in error or "unavailable" in error \
                else RefusedByDevice
            raise cls(f"Talos reported for node {node}: {error}",
                      channel=self.channel_name, target=node)

    async def close(self) -> None:
        """Close every connection this transport opened."""
        channels, self._channels = self._channels, {}
        for loop, ch in channels.items():
            if loop.is_closed():
                continue  # its transport went with its loop
            try:
                ch.close()
            except RuntimeError:
                pass


def _may_have_applied(cause: BaseException, mapped: ChannelError) -> bool:
    """Whether a verb that failed this way after its request left may still have acted.

    A deadline, or a connection lost before the answer: yes. An answer from Talos (any
    gRPC status but DEADLINE_EXCEEDED) or a rejected client certificate: no, Talos said.
    """
    if isinstance(mapped, AuthenticationFailed):
        return False
    if isinstance(cause, GRPCError):
        return cause.status is Status.DEADLINE_EXCEEDED
    return isinstance(mapped, ChannelTimeout | Unreachable) or isinstance(
        cause, h2.exceptions.ProtocolError | StreamTerminatedError
    )
