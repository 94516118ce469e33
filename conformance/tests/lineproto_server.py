"""A tiny power device on loopback, speaking a line protocol, for the suite's network checks.

    python lineproto_server.py m1=on m2=off   # prints its port; password: $LINEPROTO_PASSWORD

Each connection starts with ``AUTH <password>`` (``OK`` or ``DENIED``), then any of
``STATE m`` (``on``/``off``), ``ON m``, ``OFF m``, ``CYCLE m`` (``OK``); an unknown
machine answers ``ERR nosuch``.
"""

from __future__ import annotations

import asyncio
import os
import sys

MACHINES: dict[str, str] = {}


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        auth = (await reader.readline()).decode().strip()
        if auth != f"AUTH {os.environ.get('LINEPROTO_PASSWORD', '')}":
            writer.write(b"DENIED\n")
            return
        writer.write(b"OK\n")
        while line := (await reader.readline()).decode().strip():
            cmd, _, machine = line.partition(" ")
            if machine not in MACHINES:
                writer.write(b"ERR nosuch\n")
            elif cmd == "STATE":
                writer.write(f"{MACHINES[machine]}\n".encode())
            elif cmd in ("ON", "OFF", "CYCLE"):
                MACHINES[machine] = "off" if cmd == "OFF" else "on"
                writer.write(b"OK\n")
            else:
                writer.write(b"ERR badcommand\n")
            await writer.drain()
    finally:
        writer.close()


async def main() -> None:
    for arg in sys.argv[1:]:
        name, _, state = arg.partition("=")
        MACHINES[name] = state
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
