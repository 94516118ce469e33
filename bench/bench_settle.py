"""Benchmark: what settling by evidence costs on a 1,000-node rolling reboot.

The same rolling reboot as ``bench_lifecycle.py`` (10 racks of simulated machines with
50 ms latency per call, 10 maintenances in flight) runs twice per repetition, alternating:
once with the lifecycle of a baseline commit (checked out into a temporary git worktree,
default ``4ad1c59``: the reconciler before the dispatcher) and once with this tree.

Figures, baseline against this tree:
* channel requests per maintenance (every call the simulated channels counted). The boot
  marker comes from the simulated cluster's node boot id (no channel request, as a kubelet
  reports its own boot); ``--channel-marker`` turns that off so it is read through the
  channel (one request before sending, one after the node is ready),
* wall time of the whole rolling reboot (median over the repetitions),
* time per maintenance from request to Complete, p50 and p95.

Usage: python bench/bench_settle.py [--nodes N] [--parallel K] [--latency-ms L]
                                    [--repeat R] [--baseline REV] [--channel-marker]
Target: under 5% more wall time.

``--chaos N`` instead runs the chaos scenario at full size (``core/tests/lifecycle/chaos.py``):
three concurrent ``maintenance run`` processes, random SIGKILLs, N maintenances (300 in
the issue), and prints the kills, the verbs applied, how dispatches were settled and every
violation found (0 double-applied verbs, 0 reboots Complete without evidence, 0 PoweredOff
on a machine reading on without saying so, valid phases, audit present, integrity ok).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RACKS = 10
ROOT = Path(__file__).resolve().parent.parent


def deployment(
    tmp: Path, nodes: int, latency_ms: float, channel_marker: bool = False
) -> tuple[dict[str, Any], list[str]]:
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
                        "eviction_ticks": 0,
                        **({"boot_id": False} if channel_marker else {})},
            "storage": {"type": "none"},
            "tick_s": 0.005,
        },
    }, names


async def worker(
    nodes: int, parallel: int, latency_ms: float, channel_marker: bool = False
) -> dict[str, Any]:
    """One rolling reboot with whichever ``powerplane`` this interpreter imports."""
    from powerplane import PowerHost
    from powerplane.config import parse_config
    from powerplane.lifecycle import Ceremony, Lifecycle, Phase, Result

    with tempfile.TemporaryDirectory(prefix="pp-bench-settle-") as tmpdir:
        raw, names = deployment(Path(tmpdir), nodes, latency_ms, channel_marker)
        host = PowerHost(parse_config(raw))
        await host.start()
        racks = [host.channel(f"rack-{r}") for r in range(RACKS)]
        calls_before = sum(sum(ch.calls.values()) for ch in racks)  # type: ignore[attr-defined]
        lc = Lifecycle.for_host(host)
        slots = asyncio.Semaphore(parallel)
        durations: list[float] = []

        async def one(node: str) -> None:
            async with slots:
                t0 = time.perf_counter()
                m = await lc.request(node, "reboot", Ceremony(
                    reason="rolling kernel update", confirm_node=node,
                    ack_preflight=True))
                while await lc.reconcile(m.name) is not Result.DONE:
                    await asyncio.sleep(lc.config.tick_s)
                durations.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in names))
        wall = time.perf_counter() - start
        calls = sum(sum(ch.calls.values()) for ch in racks) - calls_before  # type: ignore[attr-defined]
        complete = sum(1 for m in lc.store.all() if m.phase is Phase.COMPLETE)
        sent = sum(len(ch.dispatches) for ch in racks)  # type: ignore[attr-defined]
        lc.close()
        await host.close()
    if complete != nodes or sent != nodes:
        raise SystemExit(f"benchmark invalid: {complete} complete, {sent} reboots sent")
    durations.sort()
    return {
        "wall_s": wall,
        "requests_per_maintenance": calls / nodes,
        "p50_s": durations[len(durations) // 2],
        "p95_s": durations[min(len(durations) - 1, int(len(durations) * 0.95))],
    }


def run_worker(src: Path, args: argparse.Namespace, channel_marker: bool = False) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, __file__, "--worker", "--nodes", str(args.nodes),
         "--parallel", str(args.parallel), "--latency-ms", str(args.latency_ms),
         *(["--channel-marker"] if channel_marker else [])],
        env=env, capture_output=True, text=True, check=True, timeout=1800,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def chaos(size: int, seed: int) -> None:
    """The full-size chaos run; exit 1 on any violation."""
    sys.path.insert(0, str(ROOT / "core" / "tests" / "lifecycle"))
    from chaos import run_chaos  # the driver the slow test uses

    from powerplane.lifecycle import Store

    with tempfile.TemporaryDirectory(prefix="pp-chaos-") as tmpdir:
        report = run_chaos(Path(tmpdir), maintenances=size, workers=min(size, 100),
                           seed=seed, timeout_s=600)
        store = Store(Path(tmpdir) / "lifecycle.db")
        settled: dict[str, int] = {}
        try:
            for m in store.all():
                for d in m.status.dispatches:
                    key = f"{d.outcome} by {d.settled_by or '-'}"
                    settled[key] = settled.get(key, 0) + 1
        finally:
            store.close()
    print(f"chaos: {report.maintenances} maintenances, 3 runners, {report.kills} SIGKILLs, "
          f"{report.wall_s:.1f} s")
    print(f"  verbs applied at the machines: {sum(report.applied.values())}")
    for key, n in sorted(settled.items()):
        print(f"  dispatches {key}: {n}")
    print(f"  violations: {len(report.violations)}")
    for v in report.violations:
        print(f"    {v}")
    if report.violations:
        raise SystemExit(1)


def main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="pp-base-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                    args.baseline], check=True, capture_output=True)
    try:
        runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "now": []}
        for _ in range(args.repeat):
            runs["baseline"].append(run_worker(base / "core" / "src", args))
            runs["now"].append(run_worker(ROOT / "core" / "src", args, args.channel_marker))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                       check=False, capture_output=True)
        base.parent.rmdir()

    def med(key: str, which: str) -> float:
        return statistics.median(r[key] for r in runs[which])

    print(f"rolling reboot of {args.nodes} nodes, {args.parallel} at a time, "
          f"{args.latency_ms:g} ms latency; median of {args.repeat} runs each; "
          f"baseline {args.baseline}")
    for key, label, unit in (("requests_per_maintenance", "channel requests / maintenance", ""),
                             ("wall_s", "wall time", " s"), ("p50_s", "per maintenance p50", " s"),
                             ("p95_s", "per maintenance p95", " s")):
        b, n = med(key, "baseline"), med(key, "now")
        print(f"  {label:32s} baseline {b:8.3f}{unit}  now {n:8.3f}{unit}  "
              f"added {n - b:+.3f}{unit} ({(n / b - 1) * 100:+.1f}%)")
    added = med("wall_s", "now") / med("wall_s", "baseline") - 1
    print(f"  target under 5% more wall time: {'met' if added < 0.05 else 'NOT met'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default="4ad1c59")
    parser.add_argument("--channel-marker", action="store_true",
                        help="this tree: the simulated cluster has no node boot id, so the "
                             "marker is read through the channel (one request before the "
                             "reboot, one after)")
    parser.add_argument("--chaos", type=int, default=None, metavar="N",
                        help="run the chaos scenario with N maintenances instead")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.chaos is not None:
        chaos(parsed.chaos, parsed.seed)
    elif parsed.worker:
        print(json.dumps(asyncio.run(worker(parsed.nodes, parsed.parallel, parsed.latency_ms,
                                            parsed.channel_marker))))
    else:
        main(parsed)
