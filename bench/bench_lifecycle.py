"""Benchmark: a rolling reboot of 1,000 simulated nodes, 10 at a time, through the lifecycle.

Every node is a machine behind a simulated channel with 50 ms latency per call (ten
racks of 100 machines, each rack its own endpoint), in a simulated cluster with two pods
per node and a three-member control plane that is left alone. Each maintenance is
requested with its full ceremony, then cordoned, drained, rebooted (one channel call) and
returned to service; a new one starts as soon as one completes, keeping 10 in flight.

Figures:
* wall time against the ideal (100 waves x one 50 ms reboot call = 5.0 s),
* store writes per maintenance (rows written, the request included),
* peak memory (max RSS of the process).

Usage: python bench/bench_lifecycle.py [--nodes N] [--parallel K] [--latency-ms L]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from powerplane.config import parse_config
from powerplane.host import PowerHost
from powerplane.lifecycle import Ceremony, Lifecycle, Phase, Result

RACKS = 10


def deployment(tmp: Path, nodes: int, latency_ms: float) -> dict[str, Any]:
    names = [f"n{i:04d}" for i in range(nodes)]
    cps = ["cp1", "cp2", "cp3"]
    channels: dict[str, Any] = {
        f"rack-{r}": {"type": "simulated", "latency_ms": latency_ms, "machines": {}}
        for r in range(RACKS)
    }
    spec: dict[str, Any] = {}
    for i, n in enumerate([*cps, *names]):
        rack = f"rack-{i % RACKS}"
        channels[rack]["machines"][n] = "on"
        labels = {"node-role.kubernetes.io/control-plane": ""} if n in cps else {}
        spec[n] = {"labels": labels, "channels": [{"channel": rack, "target": n}]}
    return {
        "channels": channels,
        "nodes": spec,
        "limits": {"per_endpoint": 4, "total": 256, "timeout_s": 30},
        "lifecycle": {
            "store": str(tmp / "bench.db"),
            "cluster": {"type": "simulated",
                        "pods": {n: [f"{n}-a", f"{n}-b"] for n in names},
                        "eviction_ticks": 0},
            "storage": {"type": "none"},
            "tick_s": 0.005,
        },
    }, names


async def main(nodes: int, parallel: int, latency_ms: float) -> None:
    with tempfile.TemporaryDirectory(prefix="pp-bench-lc-") as tmpdir:
        tmp = Path(tmpdir)
        raw, names = deployment(tmp, nodes, latency_ms)
        host = PowerHost(parse_config(raw))
        t0 = time.perf_counter()
        await host.start()
        discovery = time.perf_counter() - t0
        lc = Lifecycle.for_host(host)
        slots = asyncio.Semaphore(parallel)
        passes = 0

        async def one(node: str) -> None:
            nonlocal passes
            async with slots:  # 10 in flight; the next starts as soon as one completes
                m = await lc.request(node, "reboot", Ceremony(
                    reason="rolling kernel update", actor="bench", confirm_node=node,
                    ack_preflight=True))
                while await lc.reconcile(m.name) is not Result.DONE:
                    passes += 1
                    await asyncio.sleep(lc.config.tick_s)
                passes += 1

        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in names))
        wall = time.perf_counter() - start
        every = lc.store.all()
        complete = sum(1 for m in every if m.phase is Phase.COMPLETE)
        reboots = sum(len(host.channel(f"rack-{r}").dispatches) for r in range(RACKS))
        writes = lc.store.writes
        lc.close()
        await host.close()
    if complete != nodes or reboots != nodes:
        raise SystemExit(f"benchmark invalid: {complete} complete, {reboots} reboots sent")
    ideal = math.ceil(nodes / parallel) * latency_ms / 1000
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rolling reboot of {nodes} nodes, {parallel} at a time, {latency_ms:g} ms latency")
    print(f"  discovery (not counted): {discovery:.2f} s")
    print(f"  complete: {complete}/{nodes}; reboots sent: {reboots}; reconcile calls: {passes}")
    print(f"  wall time: {wall:.2f} s; ideal: {ideal:.2f} s; ratio to ideal: {wall / ideal:.2f}x")
    print(f"  store writes per maintenance: {writes / nodes:.2f} "
          f"(ratio to the 8 phase-and-dispatch writes a reboot needs: {writes / nodes / 8:.2f})")
    print(f"  peak memory (max RSS): {peak_mb:.1f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.parallel, args.latency_ms))
