"""Benchmark: the Servers surface under people — 50 concurrent users browsing a 10,000-node
fleet (paginated, 50 a page) while 20 users request maintenances at once.

The surface (``powerplane serve``'s application) runs on uvicorn on a loopback port in a
thread of this process, in auth-proxy mode (each user's identity in the proxy's headers);
the users are HTTP clients in the main thread. Every machine sits behind a simulated
channel with 200 ms latency per call, so a request that waited on a BMC would show it.
The local runner is off (the acts are recorded, not executed), so every power reading the
channels count is one the surface's requests caused.

Two phases side by side in one run, each ``--seconds`` long:

* browse: 50 users each fetching random pages of the server list, nothing else;
* browse + act: the same 50 users, and waves of 20 users requesting a reboot with its full
  ceremony at once (two users on each of 10 nodes per wave: exactly one maintenance per
  node is accepted, the other is a 409 problem).

Printed: p50/p99 of the list in each phase and of the act endpoint, the ratio of the list's
p99 with acts to without (target <= 1.5x), power readings counted at the channels (target
0), maintenances per node (target exactly 1), and accepted acts against audit records of
accepted acts (target equal).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import random
import socket
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from powerplane.sim.channel import SimulatedChannel
from powerplane_servers.app import create_app
from powerplane_servers.settings import Limits, ProxySettings, ServeSettings
from powerplane_servers.surface import open_surface

CP = "node-role.kubernetes.io/control-plane"
PAGE = 50


def fleet(tmp: Path, nodes: int) -> Path:
    names = [f"w-{i:05d}" for i in range(nodes)]
    cps = ["cp-1", "cp-2", "cp-3"]
    doc: dict[str, Any] = {
        "channels": {f"rack-{r}": {"type": "simulated", "verbs": ["reboot", "shutdown",
                                                                  "power-on"],
                                   "latency_ms": 200, "machines": {}}
                     for r in range(10)},
        "nodes": {},
        "policy": {"type": "local", "file": "roles.yaml"},
        "lifecycle": {"store": str(tmp / "lifecycle.db"), "cluster": {"type": "simulated"},
                      "storage": {"type": "none"}},
    }
    for i, n in enumerate(cps + names):
        rack = f"rack-{i % 10}"
        doc["channels"][rack]["machines"][n] = "on"
        labels = {CP: ""} if n in cps else {"row": f"r{i % 4}"}
        doc["nodes"][n] = {"site": f"plant-{i % 3}", "labels": labels,
                           "channels": [{"channel": rack, "target": n}]}
    (tmp / "roles.yaml").write_text(json.dumps({
        "roles": {"admin": {"tier": "admin"}, "viewer": {"tier": "read"}},
        "bindings": [{"role": "admin", "groups": ["plant-admins"]},
                     {"role": "viewer", "groups": ["plant-eng"]}]}))
    path = tmp / "powerplane.json"
    path.write_text(json.dumps(doc))
    return path


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def browse(base: str, user: int, stop: float, total: int, out: list[float]) -> None:
    headers = {"X-Forwarded-User": f"viewer-{user}", "X-Forwarded-Groups": "plant-eng"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as c:
        while time.monotonic() < stop:
            offset = random.randrange(0, max(1, total - PAGE))
            t0 = time.perf_counter()
            r = await c.get("/api/v1/servers", params={"offset": offset, "limit": PAGE})
            out.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text


async def act(c: httpx.AsyncClient, node: str, out: list[float], codes: Counter[int]) -> None:
    body = {"node": node, "intent": "reboot", "reason": "firmware 2.4 rollout",
            "ackPreflight": True, "confirmNode": node}
    t0 = time.perf_counter()
    r = await c.post("/api/v1/maintenances", json=body)
    out.append(time.perf_counter() - t0)
    codes[r.status_code] += 1


async def phase(base: str, seconds: float, total: int, acts: bool, state: dict[str, Any],
                ) -> tuple[list[float], list[float], Counter[int]]:
    lists: list[float] = []
    act_times: list[float] = []
    codes: Counter[int] = Counter()
    stop = time.monotonic() + seconds
    users = [asyncio.create_task(browse(base, u, stop, total, lists)) for u in range(50)]
    if acts:
        clients = [httpx.AsyncClient(base_url=base, timeout=60, headers={
            "X-Forwarded-User": f"admin-{u}", "X-Forwarded-Groups": "plant-admins"})
            for u in range(20)]
        try:
            while time.monotonic() < stop - 0.5:
                nodes = [f"w-{state['next'] + i:05d}" for i in range(10)]
                state["next"] += 10
                await asyncio.gather(*(act(c, nodes[i % 10], act_times, codes)
                                       for i, c in enumerate(clients)))
                await asyncio.sleep(0.25)
        finally:
            for c in clients:
                await c.aclose()
    await asyncio.gather(*users)
    return lists, act_times, codes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(config: str, port: int, reads: Any, calls: Any) -> None:
    """The server's own process: the surface on uvicorn, every channel call after start
    counted (power readings apart)."""
    settings = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)),
                             limits=Limits(act_burst=1000, acts_per_minute=60_000))
    app = create_app(settings, functools.partial(open_surface, config, runner=False))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=2))
    real_call = SimulatedChannel._call

    async def counted(self: SimulatedChannel, method: str, target: str, verb: bool,
                      act: Any) -> Any:
        if server.started:  # discovery (before start) is not the people's doing
            with calls.get_lock():
                calls.value += 1
            if method == "read_power_state":
                with reads.get_lock():
                    reads.value += 1
        return await real_call(self, method, target, verb, act)

    SimulatedChannel._call = counted  # type: ignore[method-assign]
    server.run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    ctx = multiprocessing.get_context("fork")
    reads = ctx.Value("i", 0)
    calls = ctx.Value("i", 0)

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        config = fleet(tmp, args.nodes)
        port = free_port()
        child = ctx.Process(target=serve, args=(str(config), port, reads, calls))
        t0 = time.perf_counter()
        child.start()
        base = f"http://127.0.0.1:{port}"
        while True:
            try:
                if httpx.get(f"{base}/api/v1/openapi.json").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        print(f"surface started on {args.nodes:,} nodes (discovery included) in "
              f"{time.perf_counter() - t0:.1f} s; the users in another process")
        total = args.nodes + 3
        state = {"next": 0}
        try:
            quiet, _, _ = asyncio.run(phase(base, args.seconds, total, False, state))
            reads_browsing, calls_browsing = reads.value, calls.value
            busy, act_times, codes = asyncio.run(phase(base, args.seconds, total, True,
                                                       state))
        finally:
            child.terminate()
            child.join(timeout=30)
        db = sqlite3.connect(tmp / "lifecycle.db")
        per_node = Counter(dict(db.execute(
            "SELECT node, count(*) FROM maintenance GROUP BY node").fetchall()))
        accepted_records = [x for (x,) in db.execute("SELECT extra FROM audit")
                            if json.loads(x or "{}").get("outcome", "accepted") == "accepted"]
        db.close()

    q50, q99 = pct(quiet, 0.5), pct(quiet, 0.99)
    b50, b99 = pct(busy, 0.5), pct(busy, 0.99)
    print(f"list, browsing only:    {len(quiet):6d} requests  p50 {q50:7.1f} ms  "
          f"p99 {q99:7.1f} ms")
    print(f"list, with 20 acting:   {len(busy):6d} requests  p50 {b50:7.1f} ms  "
          f"p99 {b99:7.1f} ms")
    print(f"act (POST maintenances): {len(act_times):5d} requests  "
          f"p50 {pct(act_times, 0.5):7.1f} ms  p99 {pct(act_times, 0.99):7.1f} ms  "
          f"(statuses {dict(sorted(codes.items()))})")
    ratio = b99 / q99 if q99 else float("nan")
    print(f"list p99 with acts / without: {ratio:.2f}x (target <= 1.5x)")
    print(f"power readings at the channels: {reads_browsing} while browsing, "
          f"{reads.value} in all (target 0)")
    print(f"channel calls after start: {calls_browsing} while browsing, {calls.value} in "
          f"all (no request waits on a BMC: target 0)")
    many = {n: k for n, k in per_node.items() if k != 1}
    print(f"maintenances: {sum(per_node.values())} on {len(per_node)} nodes; nodes with "
          f"other than one: {len(many)} (target 0)")
    print(f"accepted acts {codes.get(201, 0)}, audit records of accepted acts "
          f"{len(accepted_records)} (target equal)")
    print(f"load average at the start {load_start:.2f}, at the end "
          f"{os.getloadavg()[0]:.2f} ({os.cpu_count()} cores; a shared machine bends the "
          "tails)")


if __name__ == "__main__":
    main()
