"""The mock's ``machine.MachineService``: Reboot, Shutdown, Version and SystemStat.

It behaves as Talos's apid does for one node: the node comes from the ``nodes``
metadata; a node that is rebooting, off, or faulted answers ``UNAVAILABLE``; RBAC
reads the role from the client certificate's organization (``os:admin`` and
``os:operator`` may reboot and shut down, ``os:reader`` may only read the version and
SystemStat). SystemStat answers only the machine's ``boot_time`` (the subset's one field).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpclib.server
from google.protobuf import empty_pb2
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from powerplane_talos._generated import common_pb2, machine_pb2
from powerplane_talos._generated.machine_grpc import MachineServiceBase
from powerplane_talos.testing.machines import Fault, Simulation

__all__ = ["MockMachineService"]

_WRITERS = {"os:admin", "os:operator"}
TALOS_VERSION = "v1.11.0-mock"
"""The tag the mock reports from Version."""


def _roles(stream: Any) -> set[str]:
    cert = stream.peer.cert() if stream.peer is not None else None
    roles: set[str] = set()
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "organizationName":
                roles.add(value)
    return roles


class MockMachineService(MachineServiceBase):
    """Serves the simulated machines of one :class:`Simulation`."""

    def __init__(self, sim: Simulation, hostname: str) -> None:
        self.sim = sim
        self.hostname = hostname

    def _node(self, stream: Any) -> str:
        nodes = stream.metadata.getall("nodes", []) if stream.metadata is not None else []
        return str(nodes[0]) if nodes else self.hostname

    async def _gate(self, stream: Any, *, write: bool, rpc: str) -> str:
        node = self._node(stream)
        self.sim.received.append({"node": node, "rpc": rpc})
        fault = self.sim.fault_for(node)
        if fault is not None:
            kind, seconds = fault
            if kind is Fault.SLOW:
                await asyncio.sleep(seconds)
            elif kind is Fault.UNAVAILABLE:
                raise GRPCError(Status.UNAVAILABLE, f"node {node} is unavailable (injected)")
            elif kind is Fault.PERMISSION_DENIED:
                raise GRPCError(Status.PERMISSION_DENIED, "not authorized (injected)")
        if write and not _roles(stream) & _WRITERS:
            raise GRPCError(Status.PERMISSION_DENIED, "not authorized")
        state = self.sim.state(node)
        if state != "on":
            raise GRPCError(
                Status.UNAVAILABLE,
                f'connection error: desc = "transport: Error while dialing: dial tcp {node}:50000:'
                f' connect: no route to host" (machine is {state})',
            )
        return node

    def _meta(self, node: str) -> common_pb2.Metadata:
        return common_pb2.Metadata(hostname=node)

    async def Reboot(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None
        node = await self._gate(stream, write=True, rpc="Reboot")
        mode = machine_pb2.RebootRequest.Mode.Name(request.mode)
        self.sim.reboot(node, mode)
        await stream.send_message(machine_pb2.RebootResponse(messages=[
            machine_pb2.Reboot(metadata=self._meta(node), actor_id=str(uuid.uuid4()))
        ]))

    async def Shutdown(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None
        node = await self._gate(stream, write=True, rpc="Shutdown")
        self.sim.shutdown(node, bool(request.force))
        await stream.send_message(machine_pb2.ShutdownResponse(messages=[
            machine_pb2.Shutdown(metadata=self._meta(node), actor_id=str(uuid.uuid4()))
        ]))

    async def Version(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert isinstance(request, empty_pb2.Empty)
        node = await self._gate(stream, write=False, rpc="Version")
        await stream.send_message(machine_pb2.VersionResponse(messages=[
            machine_pb2.Version(
                metadata=self._meta(node),
                version=machine_pb2.VersionInfo(tag=TALOS_VERSION, os="linux", arch="amd64"),
                platform=machine_pb2.PlatformInfo(name="metal", mode="metal"),
                features=machine_pb2.FeaturesInfo(rbac=True),
            )
        ]))

    async def SystemStat(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert isinstance(request, empty_pb2.Empty)
        node = await self._gate(stream, write=False, rpc="SystemStat")
        await stream.send_message(machine_pb2.SystemStatResponse(messages=[
            machine_pb2.SystemStat(metadata=self._meta(node),
                                   boot_time=self.sim.machine(node).boot_time)
        ]))
