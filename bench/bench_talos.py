"""Benchmark: Talos reboot round trips over one reused mutual-TLS connection vs one per call.

Starts the Talos mock (the plugin's loopback peer, ``powerplane_talos.peer.start_mock``:
Ed25519 mutual TLS, reboots that come back at once) on a free loopback port, then sends
Reboot calls:

* reused: one grpclib channel (one HTTP/2 connection) for every call (what the plugin does);
* baseline: a new channel, so a new TCP connection and TLS handshake, per call (the naive
  pattern).

Prints calls per second for both, their ratio, and the steady-state latency of a call on
the reused connection. Exits 0.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from powerplane import Timeouts
from powerplane_talos.config import RebootMode
from powerplane_talos.grpc_transport import GrpcTransport
from powerplane_talos.peer import start_mock
from powerplane_talos.talosconfig import load_talosconfig

CALLS = 300
WARMUP = 20
TIMEOUTS = Timeouts(connect_s=30, read_s=30)


async def run(talosconfig: Path) -> None:
    creds = load_talosconfig(talosconfig)

    reused = GrpcTransport("bench", creds, TIMEOUTS)
    for i in range(WARMUP):
        await reused.reboot(f"warm-{i}", RebootMode.DEFAULT)
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(CALLS):
        t0 = time.perf_counter()
        await reused.reboot(f"reused-{i}", RebootMode.DEFAULT)
        latencies.append(time.perf_counter() - t0)
    reused_s = time.perf_counter() - start
    await reused.close()

    start = time.perf_counter()
    for i in range(CALLS):
        fresh = GrpcTransport("bench", creds, TIMEOUTS)
        await fresh.reboot(f"fresh-{i}", RebootMode.DEFAULT)
        await fresh.close()
    fresh_s = time.perf_counter() - start

    reused_rate = CALLS / reused_s
    fresh_rate = CALLS / fresh_s
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p95 = latencies[int(len(latencies) * 0.95) - 1] * 1000
    print(f"talos reboot round trips, {CALLS} calls, Ed25519 mutual TLS to the mock on loopback")
    print(f"  reused connection:        {reused_rate:8.1f} calls/s")
    print(f"  new connection per call:  {fresh_rate:8.1f} calls/s  (baseline)")
    print(f"  ratio reused / baseline:  {reused_rate / fresh_rate:8.2f}x")
    print(f"  steady-state latency (reused): p50 {p50:.2f} ms, p95 {p95:.2f} ms")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-talos-") as tmp:
        mock = start_mock(Path(tmp), "ed25519", reboot_seconds=0)
        try:
            asyncio.run(run(mock.talosconfig))
        finally:
            mock.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
