"""The mock's control hook: JSON lines over a loopback TCP port.

Each request is one JSON object on one line, each reply one JSON object on one line
(``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``). Operations::

    {"op": "ping"}
    {"op": "power_on", "node": "10.0.0.11"}                 # a person pressed the button
    {"op": "fault", "node": "*", "fault": "slow", "seconds": 30}
    {"op": "clear", "node": "10.0.0.11"}                    # no node: clear every fault
    {"op": "state", "node": "10.0.0.11"}                    # -> {"state": "on"}
    {"op": "boot", "node": "10.0.0.11"}             # -> {"boot_time": 1764588000, "boots": 2}
    {"op": "dispatches"}                                    # -> {"dispatches": [...]}
    {"op": "received"}                                      # -> {"received": [...]}
    {"op": "reboot_seconds", "seconds": 0.5}

:class:`MockControl` is the client tests use.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from powerplane_talos.testing.machines import Fault, Simulation

__all__ = ["MockControl", "handle", "serve_control"]


def handle(sim: Simulation, request: dict[str, Any]) -> dict[str, Any]:
    """Apply one control request to ``sim``; the reply to send."""
    op = request.get("op")
    node = str(request.get("node", ""))
    if op == "ping":
        return {"ok": True}
    if op == "power_on":
        sim.power_on(node)
        return {"ok": True, "state": sim.state(node)}
    if op == "fault":
        sim.faults[node or "*"] = (Fault(request["fault"]), float(request.get("seconds", 3600)))
        return {"ok": True}
    if op == "clear":
        if node:
            sim.faults.pop(node, None)
        else:
            sim.faults.clear()
        return {"ok": True}
    if op == "state":
        return {"ok": True, "state": sim.state(node)}
    if op == "boot":
        machine = sim.machine(node)
        return {"ok": True, "boot_time": machine.boot_time, "boots": machine.boots}
    if op == "dispatches":
        return {"ok": True, "dispatches": list(sim.dispatches)}
    if op == "received":
        return {"ok": True, "received": list(sim.received)}
    if op == "reboot_seconds":
        sim.reboot_seconds = float(request["seconds"])
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def serve_control(sim: Simulation, port: int) -> asyncio.Server:
    """Listen for control requests on 127.0.0.1:``port`` (0 picks a free one)."""

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = handle(sim, json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(client, "127.0.0.1", port)


class MockControl:
    """A blocking client of the control hook (one connection per request)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.address = (host, port)
        self.timeout = timeout

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request; raise ``RuntimeError`` when the mock answers not ok."""
        with socket.create_connection(self.address, timeout=self.timeout) as sock:
            sock.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
        reply: dict[str, Any] = json.loads(buf)
        if not reply.get("ok"):
            raise RuntimeError(f"mock control {op}: {reply.get('error')}")
        return reply

    def power_on(self, node: str) -> None:
        self.request("power_on", node=node)

    def fault(self, node: str, fault: Fault | str, seconds: float = 3600.0) -> None:
        self.request("fault", node=node, fault=str(Fault(fault).value), seconds=seconds)

    def clear(self, node: str = "") -> None:
        self.request("clear", node=node)

    def state(self, node: str) -> str:
        return str(self.request("state", node=node)["state"])

    def boot(self, node: str) -> tuple[int, int]:
        """The machine's ``boot_time`` (Unix seconds) and how many times it booted."""
        reply = self.request("boot", node=node)
        return int(reply["boot_time"]), int(reply["boots"])

    def dispatches(self) -> list[dict[str, Any]]:
        return list(self.request("dispatches")["dispatches"])

    def received(self) -> list[dict[str, Any]]:
        """Every call whose request arrived (``{"node", "rpc"}``), faulted ones included."""
        return list(self.request("received")["received"])

    def reboot_seconds(self, seconds: float) -> None:
        self.request("reboot_seconds", seconds=seconds)
