"""Benchmark: a rolling reboot of 1,000 simulated nodes, 10 at a time, through the lifecycle.

Every node is a machine behind a simulated channel with 50 ms latency per call (ten
racks of 100 machines, each rack its own endpoint), in a simulated cluster with two pods
per node and a three-member control plane that is left alone. Each maintenance is
requested with its full ceremony, then cordoned, drained, rebooted (one channel call) and
returned to service; a new one starts as soon as one completes, keeping 10 in flight.

Each run is a child process of its own (its peak RSS is its own); the figures are the
median of ``--runs`` runs:

* wall time against the ideal (100 waves x one 50 ms reboot call = 5.0 s; target
  <= 1.1x at 1,000 and 10,000 nodes),
* CPU time of the rolling reboot (user + system of the process, discovery excluded), in
  all and per maintenance: on a shared machine the figure that bends least, and what the
  wall pays for (ten maintenances in flight share one thread: their CPU between two
  reboot calls is on the critical path),
* store writes per maintenance (rows written, the request included),
* the store's reads per maintenance and the guard's observations of the cluster per
  maintenance (what each step costs),
* peak memory (max RSS of the child),
* how often the policy was asked per maintenance and the time spent inside it,
* the load average at the start and the end (the machine may be shared).

The requester is this process's OS user (the identity comes from the platform). With
``--policy`` the deployment has a ``policy:`` section: a roles file whose maintenance role,
bound to the requester's primary group, allows every action the rolling reboot takes (the
policy is asked at the request and again where each step executes); without it, every
action is allowed (no ``policy:`` section). ``bench/bench_policy.py`` runs both side by
side; it also runs the policy's case with the audit trail's chain off (``--unchained``,
a child's switch: the store's private ``_chained``, which no deployment reaches), to show
what the chain costs beside it in the same run.

Usage: python bench/bench_lifecycle.py [--nodes N] [--parallel K] [--latency-ms L] [--runs R]
                                       [--policy]
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
import tempfile
import time
from pathlib import Path
from typing import Any

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.lifecycle import Ceremony, Lifecycle, Phase, Result
from powerplane.lifecycle import guard as guard_module

RACKS = 10
TARGET = 1.1


ROLES = """\
roles:
  admin: {tier: admin, description: the platform team}
  viewer: {tier: read}
  maintenance-engineer:
    tier: read
    allow: [servers:cordon, servers:uncordon, servers:drain, servers:reboot]
    description: rolling reboots, nothing else
bindings:
  - {role: admin, users: [platform-oncall]}
  - {role: viewer, groups: [auditors]}
  - {role: maintenance-engineer, groups: [%s]}
"""


def write_roles(tmp: Path) -> Path:
    """A roles file that allows the requester the rolling reboot through a group binding
    (this process's primary group), and no role through its user name."""
    from powerplane.authority.identity import local_identity

    path = tmp / "roles.yaml"
    path.write_text(ROLES % local_identity().groups[0], encoding="utf-8")
    return path


def deployment(tmp: Path, nodes: int, latency_ms: float,
               policy: bool = False) -> tuple[dict[str, Any], list[str]]:
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
    raw: dict[str, Any] = {
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
    }
    if policy:
        raw["policy"] = {"type": "local", "file": str(write_roles(tmp))}
    return raw, names


class _Counted:
    """The store, counting its reads (every other attribute is the store's own)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name in ("get", "active_for", "latest_for", "find", "all", "active",
                    "active_phases"):
            self.reads += 1
        return found


async def one_run(nodes: int, parallel: int, latency_ms: float,
                  policy: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pp-bench-lc-") as tmpdir:
        tmp = Path(tmpdir)
        raw, names = deployment(tmp, nodes, latency_ms, policy)
        host = PowerHost(parse_config(raw, source=str(tmp / "deployment.yaml")))
        t0 = time.perf_counter()
        await host.start()
        discovery = time.perf_counter() - t0
        lc = Lifecycle.for_host(host)
        counted = _Counted(lc.store)
        lc.store = lc.reconciler.store = counted  # type: ignore[assignment]
        observations = 0
        real_observe = guard_module.observe

        async def observe(*args: Any, **kwargs: Any) -> Any:
            nonlocal observations
            observations += 1
            return await real_observe(*args, **kwargs)

        guard_module.observe = observe  # type: ignore[assignment]
        asked_of: Any = host.authority.policy
        asked = [0, 0, 0.0]  # calls, nodes decided, seconds inside the policy
        real_decide = asked_of.decide

        async def decide(identity: Any, action: Any, refs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await real_decide(identity, action, refs)
            finally:
                asked[0] += 1
                asked[1] += len(refs)
                asked[2] += time.perf_counter() - t

        asked_of.decide = decide
        from powerplane.lifecycle.store import Store

        real_insert = Store._insert_audits
        inside_audit = [0.0, 0.0]  # wall and CPU (its thread's) inside the audit inserts

        def insert(self: Any, *args: Any, **kwargs: Any) -> None:
            t, c = time.perf_counter(), time.thread_time()
            try:
                real_insert(self, *args, **kwargs)
            finally:
                inside_audit[0] += time.perf_counter() - t
                inside_audit[1] += time.thread_time() - c

        Store._insert_audits = insert  # type: ignore[method-assign]
        slots = asyncio.Semaphore(parallel)
        passes = 0

        async def one(node: str) -> None:
            nonlocal passes
            async with slots:  # 10 in flight; the next starts as soon as one completes
                m = await lc.request(node, "reboot", Ceremony(
                    reason="rolling kernel update", confirm_node=node,
                    ack_preflight=True))
                while await lc.reconcile(m.name) is not Result.DONE:
                    passes += 1
                    await asyncio.sleep(lc.config.tick_s)
                passes += 1

        start, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(n) for n in names))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        guard_module.observe = real_observe  # type: ignore[assignment]
        asked_of.decide = real_decide
        Store._insert_audits = real_insert  # type: ignore[method-assign]
        reads = counted.reads
        every = counted.all()
        complete = sum(1 for m in every if m.phase is Phase.COMPLETE)
        reboots = sum(len(host.channel(f"rack-{r}").dispatches) for r in range(RACKS))
        writes = counted.writes
        trail = counted.audit()
        accepted = sum(1 for r in trail if r.outcome == "accepted")
        denials = len(trail) - accepted
        lc.close()
        await host.close()
    if complete != nodes or reboots != nodes:
        raise SystemExit(f"benchmark invalid: {complete} complete, {reboots} reboots sent")
    return {
        "discovery": discovery, "complete": complete, "reboots": reboots, "passes": passes,
        "wall": wall, "cpu": cpu, "writes": writes / nodes, "reads": reads / nodes,
        "observations": observations / nodes, "audited": accepted, "denied": denials,
        "policy": type(asked_of).__name__, "decide_calls": asked[0] / nodes,
        "decide_s": asked[2], "audit_s": inside_audit[0],
        "audit_cpu": inside_audit[1],
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(nodes: int, parallel: int, latency_ms: float, runs: int, policy: bool) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--one", "--nodes", str(nodes), "--parallel",
             str(parallel), "--latency-ms", str(latency_ms), *(["--policy"] if policy else [])],
            check=True, capture_output=True, text=True,
        ).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    ideal = math.ceil(nodes / parallel) * latency_ms / 1000
    walls = ", ".join(f"{r['wall']:.2f}" for r in results)
    print(f"rolling reboot of {nodes} nodes, {parallel} at a time, {latency_ms:g} ms latency "
          f"(median of {runs} runs, each in a process of its own)")
    print(f"  discovery (not counted): {med('discovery'):.2f} s")
    print(f"  complete: {results[0]['complete']}/{nodes}; reboots sent: "
          f"{results[0]['reboots']}; reconcile calls: {results[0]['passes']}")
    print(f"  wall time: {med('wall'):.2f} s ({walls}); ideal: {ideal:.2f} s; "
          f"ratio to ideal: {med('wall') / ideal:.2f}x (target <= {TARGET}x)")
    print(f"  CPU time: {med('cpu'):.2f} s; per maintenance: {med('cpu') / nodes * 1000:.2f} ms "
          f"(ratio of CPU to the ideal wall: {med('cpu') / ideal:.2f})")
    print(f"  store writes per maintenance: {med('writes'):.2f} "
          f"(ratio to the 8 phase-and-dispatch writes a reboot needs: "
          f"{med('writes') / 8:.2f})")
    print(f"  store reads per maintenance: {med('reads'):.2f}; guard observations of the "
          f"cluster per maintenance: {med('observations'):.2f}")
    print(f"  peak memory (max RSS): {med('rss_mib'):.1f} MiB")
    print(f"  policy: {results[0]['policy']}; asked {results[0]['decide_calls']:.1f} times per "
          f"maintenance, {med('decide_s') * 1000:.1f} ms inside it in all "
          f"({med('decide_s') / med('wall') * 100:.2f}% of the wall); audit records: "
          f"{results[0]['audited']} accepted, {results[0]['denied']} denied")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--policy", action="store_true",
                        help="with a policy: section (a roles file allowing the requester)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unchained", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.unchained:  # the benchmark's own switch: audit rows with no chain fields
        from powerplane.authority.audit import JsonLinesAudit
        from powerplane.lifecycle.store import Store

        Store._chained = False
        JsonLinesAudit._chained = False
    if args.one:
        print(json.dumps(asyncio.run(one_run(args.nodes, args.parallel, args.latency_ms,
                                             args.policy))))
    else:
        main(args.nodes, args.parallel, args.latency_ms, args.runs, args.policy)
