"""``python -m powerplane_talos.testing --port P --certs DIR``: run the Talos mock.

On first use it writes a PKI into ``DIR`` (``talos-ca``, ``server``, ``admin`` and
``reader`` certificates as ``.pem``/``.key``, made by :mod:`powerplane_talos.testing.pki`,
Ed25519 unless ``--algorithm ecdsa``) and a talosconfig
(``DIR/talosconfig``, context ``mock``, the admin certificate). Once listening it
writes ``DIR/mock.json``: ``{"port", "control_port", "pid", "talosconfig"}``.
``--port 0`` picks a free port. SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
from pathlib import Path

from grpclib.server import Server

from powerplane_talos.talosconfig import dump_talosconfig
from powerplane_talos.testing import pki
from powerplane_talos.testing.control import serve_control
from powerplane_talos.testing.machines import Simulation
from powerplane_talos.testing.service import MockMachineService
from powerplane_talos.tls import server_context


def ensure_pki(certs: Path, algorithm: pki.Algorithm) -> None:
    """Create the CA, server and client certificates unless ``certs`` has them."""
    if pki.load(certs, "ca").files.cert.is_file():
        return
    ca = pki.new_ca(certs, algorithm)
    pki.issue(ca, certs, "talos-mock", algorithm=algorithm, server=True, stem="server")
    pki.issue(ca, certs, "admin", algorithm=algorithm, organization="os:admin")
    pki.issue(ca, certs, "reader", algorithm=algorithm, organization="os:reader")


async def serve(args: argparse.Namespace) -> None:
    """Start the gRPC server and the control hook; run until signalled."""
    certs = Path(args.certs)
    ensure_pki(certs, args.algorithm)
    ca = pki.load(certs, "ca")
    server_pem = pki.load(certs, "server")
    sim = Simulation(reboot_seconds=args.reboot_seconds)
    server = Server([MockMachineService(sim, args.hostname)])
    # proto IPPROTO_TCP, so asyncio sets TCP_NODELAY on accepted connections (it checks
    # sock.proto; with proto 0 every response waits out the peer's delayed ACK, ~40 ms)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    await server.start(sock=sock, ssl=server_context(ca.cert, server_pem.cert, server_pem.key))
    control = await serve_control(sim, args.control_port)
    control_port = control.sockets[0].getsockname()[1]
    admin = pki.load(certs, "admin")
    talosconfig = Path(args.talosconfig) if args.talosconfig else certs / "talosconfig"
    dump_talosconfig(
        talosconfig, context="mock", endpoints=[f"127.0.0.1:{port}"],
        ca=ca.cert, crt=admin.cert, key=admin.key,
    )
    ready = {"port": port, "control_port": control_port, "pid": os.getpid(),
             "talosconfig": str(talosconfig)}
    tmp = certs / "mock.json.tmp"
    tmp.write_text(json.dumps(ready), encoding="utf-8")
    tmp.replace(certs / "mock.json")
    print(f"talos mock listening on 127.0.0.1:{port} (control {control_port})", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    control.close()
    server.close()
    await server.wait_closed()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m powerplane_talos.testing",
        description="A Talos machine API mock (Reboot, Shutdown, Version) over mutual TLS. "
        "For tests and demos; it is not Talos.",
    )
    parser.add_argument("--port", type=int, default=50000, help="gRPC port (0: pick a free one)")
    parser.add_argument("--certs", required=True, help="directory for the PKI and mock.json")
    parser.add_argument("--algorithm", choices=["ed25519", "ecdsa"], default="ed25519")
    parser.add_argument("--control-port", type=int, default=0, help="control hook port")
    parser.add_argument("--reboot-seconds", type=float, default=1.0)
    parser.add_argument("--hostname", default="talos-mock",
                        help="the node name for calls that send no 'nodes' metadata")
    parser.add_argument("--talosconfig", default=None,
                        help="where to write the talosconfig (default DIR/talosconfig)")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
