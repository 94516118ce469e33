"""invoke_many over 2,000 simulated nodes on 200 endpoints, 50 ms latency, 4 per endpoint.

Ideal: ceil(nodes_per_endpoint / 4) x 50 ms. Target: within 1.2x of ideal, and at least
20x faster than a sequential loop over the same nodes. The sequential loop is timed over
the first 200 nodes and scaled to 2,000 (its cost is linear: one 50 ms call after another);
pass --full to time all 2,000 (about 100 s).
"""

from __future__ import annotations

import asyncio
import math
import sys
import time

from powerplane import InvokeResult, PowerHost, Verb, parse_config

NODES, ENDPOINTS, LATENCY_MS, PER_ENDPOINT = 2000, 200, 50, 4


def config() -> dict[str, object]:
    per = NODES // ENDPOINTS
    channels = {
        f"bmc-{e}": {"type": "simulated", "latency_ms": LATENCY_MS,
                     "machines": {f"m{i}": "on" for i in range(per)}}
        for e in range(ENDPOINTS)
    }
    nodes = {
        f"n{e}-{i}": {"channels": [{"channel": f"bmc-{e}", "target": f"m{i}"}]}
        for e in range(ENDPOINTS)
        for i in range(per)
    }
    return {"channels": channels, "nodes": nodes,
            "limits": {"per_endpoint": PER_ENDPOINT, "total": 1000, "timeout_s": 30}}


async def main(full: bool) -> None:
    cfg = config()
    per = NODES // ENDPOINTS
    ideal = math.ceil(per / PER_ENDPOINT) * LATENCY_MS / 1000
    async with PowerHost(parse_config(cfg)) as host:
        names = list(host.nodes)
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            results = await host.invoke_many(names, Verb.REBOOT, reason="bench")
            walls.append(time.perf_counter() - t0)
            assert all(isinstance(r, InvokeResult) for r in results.values())
        wall = min(walls)
        sample = names if full else names[:200]
        t0 = time.perf_counter()
        for n in sample:
            await host.invoke(n, Verb.REBOOT, reason="bench")
        seq = (time.perf_counter() - t0) * (len(names) / len(sample))
        peak = max(host.channel(f"bmc-{e}").peak_active for e in range(ENDPOINTS))  # type: ignore[attr-defined]
    print(f"invoke_many: {NODES} nodes, {ENDPOINTS} endpoints, {LATENCY_MS} ms, "
          f"per_endpoint {PER_ENDPOINT}")
    print(f"wall (best of 3): {wall * 1000:.0f} ms; ideal {ideal * 1000:.0f} ms; "
          f"ratio to ideal {wall / ideal:.2f}x (target <= 1.2x)")
    how = "measured" if full else "200 measured, scaled"
    print(f"sequential loop: {seq:.1f} s ({how}); speed-up {seq / wall:.0f}x (target >= 20x)")
    print(f"peak concurrent calls at one endpoint: {peak} (limit {PER_ENDPOINT})")


if __name__ == "__main__":
    asyncio.run(main("--full" in sys.argv))
