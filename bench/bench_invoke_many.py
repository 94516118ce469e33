"""invoke_many at 2,000 / 10,000 / 50,000 simulated nodes, 10 per endpoint, 4 per endpoint.

Each size and latency (50 ms and 20 ms) runs in a child process of its own, so its peak
RSS is its own (config, host, discovery and the calls). ``limits.total`` is set to
``per_endpoint x endpoints`` (at most 100,000), so the per-endpoint bound is the binding
one and the ideal wall time is ``ceil(10 / 4) x latency``.

Printed per case: the median wall time of several ``invoke_many`` runs, its ratio to the
ideal (target <= 1.1x at 2,000, <= 1.2x at 50,000), the same calls made straight to the
channels with no host (4 workers per endpoint: the floor any scheduler stands on, since
the simulated channel's own cost per call is part of every wall), the time to the first result
(``invoke_stream``, when the host has it), and the child's peak RSS (target <= 250 MiB at
50,000). The alternative beside it: a sequential ``invoke`` loop at 2,000 nodes (timed on
200 nodes and scaled; it is linear).

    .venv/bin/python bench/bench_invoke_many.py [--sizes 2000,10000,50000]
        [--latencies 50,20] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from powerplane import InvokeResult, PowerHost, Verb, parse_config

PER_NODE_ENDPOINT, PER_ENDPOINT = 10, 4
TARGETS = {2000: 1.1, 10000: 1.2, 50000: 1.2}
RSS_TARGET_MIB = {50000: 250}


def config(nodes: int, latency_ms: int) -> dict[str, Any]:
    endpoints = nodes // PER_NODE_ENDPOINT
    machines = {f"m{i}": "on" for i in range(PER_NODE_ENDPOINT)}
    channels = {
        f"bmc-{e}": {"type": "simulated", "latency_ms": latency_ms, "machines": machines}
        for e in range(endpoints)
    }
    cfg_nodes = {
        f"n{e}-{i}": {"channels": [{"channel": f"bmc-{e}", "target": f"m{i}"}]}
        for e in range(endpoints)
        for i in range(PER_NODE_ENDPOINT)
    }
    return {"channels": channels, "nodes": cfg_nodes,
            "limits": {"per_endpoint": PER_ENDPOINT,
                       "total": min(100_000, PER_ENDPOINT * endpoints), "timeout_s": 30}}


async def child(nodes: int, latency_ms: int, runs: int) -> dict[str, Any]:
    ideal = math.ceil(PER_NODE_ENDPOINT / PER_ENDPOINT) * latency_ms / 1000
    async with PowerHost(parse_config(config(nodes, latency_ms))) as host:
        names = list(host.nodes)
        walls: list[float] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            results = await host.invoke_many(names, Verb.REBOOT, reason="bench")
            walls.append(time.perf_counter() - t0)
            bad = [n for n, r in results.items() if not isinstance(r, InvokeResult)]
            if bad:
                raise SystemExit(f"{len(bad)} nodes failed, e.g. {bad[0]}: {results[bad[0]]}")
        # the floor: the same calls straight to the channels, 4 workers per endpoint, no host
        chans = [host.channel(f"bmc-{e}") for e in range(nodes // PER_NODE_ENDPOINT)]

        async def worker(ch: Any, targets: list[str]) -> None:
            for t in targets:
                await ch.reboot(t)

        floors: list[float] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(ch, [f"m{i}" for i in range(j, PER_NODE_ENDPOINT,
                                                                        PER_ENDPOINT)])
                                   for ch in chans for j in range(PER_ENDPOINT)))
            floors.append(time.perf_counter() - t0)
        first: float | None = None
        stream = getattr(host, "invoke_stream", None)
        if stream is not None:
            t0 = time.perf_counter()
            async for _node, _outcome in stream(names, Verb.REBOOT, reason="bench"):
                if first is None:
                    first = time.perf_counter() - t0
        seq: float | None = None
        if nodes <= 2000:
            sample = names[:200]
            t0 = time.perf_counter()
            for n in sample:
                await host.invoke(n, Verb.REBOOT, reason="bench")
            seq = (time.perf_counter() - t0) * len(names) / len(sample)
        endpoints = nodes // PER_NODE_ENDPOINT
        peak = max(host.channel(f"bmc-{e}").peak_active  # type: ignore[attr-defined]
                   for e in range(endpoints))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"nodes": nodes, "latency_ms": latency_ms, "wall": statistics.median(walls),
            "walls": walls, "ideal": ideal, "floor": statistics.median(floors), "first": first,
            "seq": seq, "peak": peak,
            "rss_mib": rss_mib}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000,50000")
    ap.add_argument("--latencies", default="50,20")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=2, type=int, metavar=("NODES", "LATENCY_MS"))
    args = ap.parse_args()
    if args.child:
        out = asyncio.run(child(args.child[0], args.child[1], args.runs))
        print(json.dumps(out))
        return
    print(f"invoke_many: {PER_NODE_ENDPOINT} nodes per endpoint, per_endpoint {PER_ENDPOINT}, "
          f"total = per_endpoint x endpoints; median of {args.runs} runs; one process per case")
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall times on a loaded machine are upper bounds)")
    ok = True
    for latency in (int(x) for x in args.latencies.split(",")):
        for nodes in (int(x) for x in args.sizes.split(",")):
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(nodes), str(latency),
                 "--runs", str(args.runs)],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                print(f"{nodes} nodes, {latency} ms: failed: {proc.stderr.strip()[-400:]}")
                ok = False
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            ratio = r["wall"] / r["ideal"]
            target = TARGETS.get(nodes)
            rss_target = RSS_TARGET_MIB.get(nodes)
            line = (f"{nodes:>6} nodes, {latency} ms: wall {r['wall'] * 1000:.0f} ms, "
                    f"ideal {r['ideal'] * 1000:.0f} ms, ratio {ratio:.2f}x")
            if target is not None:
                met = ratio <= target
                ok &= met
                line += f" (target <= {target}x: {'met' if met else 'NOT met'})"
            line += (f"; the channels alone (no host) {r['floor'] * 1000:.0f} ms, "
                     f"{r['floor'] / r['ideal']:.2f}x ideal; host over them "
                     f"{r['wall'] / r['floor']:.2f}x")
            line += f"; peak RSS {r['rss_mib']:.0f} MiB"
            if rss_target is not None:
                met = r["rss_mib"] <= rss_target
                ok &= met
                line += f" (target <= {rss_target} MiB: {'met' if met else 'NOT met'})"
            if r["first"] is not None:
                line += f"; first streamed result after {r['first'] * 1000:.0f} ms"
            line += f"; peak at one endpoint {r['peak']} (limit {PER_ENDPOINT})"
            print(line)
            if r["seq"] is not None:
                print(f"{'':>6}        sequential invoke loop: {r['seq']:.1f} s (200 measured, "
                      f"scaled); invoke_many is {r['seq'] / r['wall']:.0f}x faster")
    print("all targets met" if ok else "some targets NOT met")


if __name__ == "__main__":
    main()
