"""offer_for over 100,000 nodes: microseconds per node. Target: under 5 µs.

Prints two figures: the decision made at discovery (refresh: the rule evaluated for every
node, memoized on identical channel views) and offer_for itself (reads what discovery found).
"""

from __future__ import annotations

import asyncio
import random
import time

from powerplane import PowerHost, Verb, parse_config

NODES = 100_000
TARGET_US = 5.0


def config() -> dict[str, object]:
    rnd = random.Random(7)
    kinds = {
        "bmc": {"verbs": ["reboot", "shutdown", "power-on"]},
        "talos": {"verbs": ["reboot", "shutdown"], "readback": "on-only"},
        "pdu": {"verbs": ["reboot", "shutdown", "power-on"], "graceful": False},
        "cloud": {"verbs": ["reboot", "shutdown", "power-on", "terminate"]},
    }
    channels: dict[str, dict[str, object]] = {}
    for kind, extra in kinds.items():
        for i in range(25):
            channels[f"{kind}-{i}"] = {"type": "simulated", "machines": {"m": "on"}, **extra}
    names = list(channels)
    nodes = {}
    for n in range(NODES):
        chans = rnd.sample(names, rnd.randint(0, 3))
        nodes[f"node-{n}"] = {
            "site": rnd.choice(["plant-a", "plant-b", "plant-c"]),
            "classification": rnd.choice(["repairable", "replaceable"]),
            "channels": [{"channel": c, "target": "m"} for c in chans],
        }
    return {"channels": channels, "nodes": nodes,
            "recovery": {"sites": {"plant-b": {"attended": True}}}}


async def main() -> None:
    t0 = time.perf_counter()
    dep = parse_config(config())
    t_parse = time.perf_counter() - t0
    host = PowerHost(dep)
    t0 = time.perf_counter()
    await host.start()
    t_start = time.perf_counter() - t0
    names = list(dep.nodes)
    # refresh = discovery of 100 channel targets + the rule for every node
    t0 = time.perf_counter()
    await host.refresh()
    t_refresh = time.perf_counter() - t0
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for n in names:
            host.offer_for(n)
        best = min(best, time.perf_counter() - t0)
    # and the rule re-evaluated from scratch (what invoke does) for every node
    t0 = time.perf_counter()
    for n in names:
        host._decide_fresh(n)
    t_fresh = time.perf_counter() - t0
    per = best / NODES * 1e6
    offered = sum(host.offer_for(n)[Verb.SHUTDOWN].offered for n in names)
    await host.close()
    print(f"nodes: {NODES}  (shutdown offered for {offered})")
    print(f"config parse: {t_parse:.2f} s   host start (discovery + rule): {t_start:.2f} s")
    print(f"refresh (rediscover + rule for every node): {t_refresh / NODES * 1e6:.2f} µs/node")
    print(f"rule evaluated fresh per node (invoke's re-check): {t_fresh / NODES * 1e6:.2f} µs/node")
    print(f"offer_for: {per:.3f} µs/node  (target < {TARGET_US} µs: ratio {per / TARGET_US:.3f})")


if __name__ == "__main__":
    asyncio.run(main())
