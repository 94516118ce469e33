"""invoke_many at 2,000 / 10,000 / 50,000 simulated nodes, 10 per endpoint, 4 per endpoint.

Each size and latency (50 ms and 20 ms) runs in a child process of its own, so its peak
RSS is its own (config, host, discovery and the calls). ``limits.total`` is set to
``per_endpoint x endpoints`` (at most 100,000), so the per-endpoint bound is the binding
one and the ideal wall time is ``ceil(10 / 4) x latency``.

Printed per case: the median wall time of several ``invoke_many`` runs, its ratio to the
ideal (issue 35's targets, every act audited and its record durable before its send:
<= 1.15x at 2,000, <= 6x at 50,000), the CPU time of a run and per node, two floors
any scheduler stands on, each with the same 4 workers per endpoint and no host: the same
calls made straight to the channels (the simulated channel's own cost per call is part of
every wall), and the event loop alone (one ``asyncio.sleep(latency)`` per call, no
channel), the time to the first result (``invoke_stream``, when the host has it), and the
child's peak RSS (target <= 300 MiB at 50,000). Both floors run under the same collector
settings as the host in that child, so they differ from the host's wall only by what the
host does. The host tunes no collector (GC tuning is the CLI's, for its own process):
``--gc-tuned`` runs every child as a command does (the CLI's ``tune_gc`` before each timed
run: each run stands for one command, whose process froze what was alive before its call),
to show what that tuning buys. The ideal counts no CPU at all: every
call's start and end cost CPU time on one thread, so a wall can be no shorter than the
CPU time the run needs, and at 50,000 nodes the event loop alone needs more than the
ideal. The alternative beside it: a sequential ``invoke`` loop at 2,000 nodes (timed on
200 nodes and scaled; it is linear).

Every act is audited: each child writes its records, made durable before the first send
(one ``fsync`` per call), to an audit file in a temporary ``$XDG_STATE_HOME`` of the run's
own. ``--policy`` (the default; ``--no-policy`` leaves it out) runs each case a second time
with a ``policy:`` section (a local roles file binding this OS user to a role scoped to
the nodes' sites, so every node's decision is looked up by its scope) and prints the CPU
time per node with and without it, for each build.

``--base DIR``: every case also against the ``powerplane`` package under ``DIR`` (an older
build's ``core/src``, e.g. from ``git archive``), in the same run, side by side;
``--repeat N`` runs each case N times per build, alternating this build and the base, and
compares the medians of the walls (the machine's noise hits both alike).

``--chain N`` (default 2): every case N more times with the audit trail chained and N with
the chain off, alternating (the audit file's private ``_chained``, set in the child: a
benchmark's switch, no deployment option reaches it), the medians of wall and CPU side by
side and their ratio (issue 37's target: the chain costs <= 5%).

``--loops asyncio,uvloop`` (the default when uvloop is installed, else ``asyncio``): every
case, host and both floors, once on each event loop, in a child process of its own, side
by side in the same run. The host is loop-agnostic (its embedder chooses the loop); the
uvloop child runs the same coroutine in ``asyncio.Runner(loop_factory=uvloop.new_event_loop)``.

    .venv/bin/python bench/bench_invoke_many.py [--sizes 2000,10000,50000]
        [--latencies 50,20] [--runs 3] [--loops asyncio,uvloop] [--base /tmp/base/core/src]
        [--repeat 3] [--gc-tuned] [--no-policy] [--chain 2]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
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

from powerplane import InvokeResult, PowerHost, Verb, parse_config

PER_NODE_ENDPOINT, PER_ENDPOINT = 10, 4
TARGETS = {2000: 1.15, 50000: 6.0}
RSS_TARGET_MIB = {50000: 300}
SITES = 20
ROLES = """\
roles:
  oncall: {{tier: admin}}
  site-reboots:
    allow: [servers:reboot, servers:power-on]
    deny: [servers:shutdown]
    sites: [{sites}]
bindings:
  - {{role: oncall, users: [platform-oncall]}}
  - {{role: site-reboots, users: [{user}]}}
"""
"""The roles file of the with-policy runs: this OS user may reboot every node through a role
scoped to the nodes' sites (each node decided by its scope key)."""
LOOPS = ("asyncio", "uvloop")


def default_loops() -> str:
    """Both loops where uvloop is installed, else the default loop alone."""
    return "asyncio,uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def run_on(loop_name: str, coro: Any) -> Any:
    """Run ``coro`` to completion on a fresh event loop of the named kind."""
    if loop_name == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    return asyncio.run(coro)


def config(nodes: int, latency_ms: int, policy: bool = False) -> dict[str, Any]:
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
    out = {"channels": channels, "nodes": cfg_nodes,
           "limits": {"per_endpoint": PER_ENDPOINT,
                      "total": min(100_000, PER_ENDPOINT * endpoints), "timeout_s": 30}}
    if policy:
        sites = [f"site-{i}" for i in range(SITES)]
        for e in range(endpoints):
            for i in range(PER_NODE_ENDPOINT):
                cfg_nodes[f"n{e}-{i}"]["site"] = sites[e % SITES]
        out["policy"] = {"type": "local", "file": "roles.yaml"}
    return out


def write_roles(folder: Path) -> None:
    """:data:`ROLES` for this OS user, in ``folder``."""
    import getpass

    (folder / "roles.yaml").write_text(
        ROLES.format(sites=", ".join(f"site-{i}" for i in range(SITES)),
                     user=getpass.getuser()), encoding="utf-8")


def _tune_gc() -> None:
    """What a command does to its own process's collector (the CLI's ``tune_gc``, where the
    build has it, else the same settings written out)."""
    try:
        from powerplane.cli.kit import tune_gc  # the public kit (a baseline build may lack it)
    except ImportError:
        gc.freeze()
        young, middle, old = gc.get_threshold()
        if 0 < young < 100_000:
            gc.set_threshold(100_000, middle, old)
        return
    tune_gc()


def _check(results: dict[str, Any]) -> None:
    bad = [n for n, r in results.items() if not isinstance(r, InvokeResult)]
    if bad:
        raise SystemExit(f"{len(bad)} nodes failed, e.g. {bad[0]}: {results[bad[0]]}")


async def child(nodes: int, latency_ms: int, runs: int, seq_loop: bool = True,
                gc_tuned: bool = False, policy: bool = False,
                chained: bool = True) -> dict[str, Any]:
    ideal = math.ceil(PER_NODE_ENDPOINT / PER_ENDPOINT) * latency_ms / 1000
    folder = Path(tempfile.mkdtemp(prefix="bench-invoke-many-"))
    if policy:
        write_roles(folder)
    deployment = parse_config(config(nodes, latency_ms, policy),
                              source=str(folder / "powerplane.yaml"))
    async with PowerHost(deployment) as host:
        sink: Any = host.authority.sink
        if not chained:  # the benchmark's own switch: the audit file's lines unchained
            sink._chained = False
        real_append = sink.append
        inside_audit = [0.0, 0.0]  # wall and CPU (its thread's) inside the audit appends

        def append(records: Any) -> None:
            t, c = time.perf_counter(), time.thread_time()
            try:
                real_append(records)
            finally:
                inside_audit[0] += time.perf_counter() - t
                inside_audit[1] += time.thread_time() - c

        sink.append = append
        names = list(host.nodes)
        walls: list[float] = []
        cpus: list[float] = []
        audit_s: list[float] = []
        audit_cpu: list[float] = []
        for _ in range(runs):
            if gc_tuned:  # each run stands for a command: its process tunes before its call
                _tune_gc()
            t0, c0 = time.perf_counter(), time.process_time()
            results = await host.invoke_many(names, Verb.REBOOT, reason="bench")
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            audit_s.append(inside_audit[0])
            audit_cpu.append(inside_audit[1])
            inside_audit[:] = [0.0, 0.0]
            _check(results)
            del results  # one run's results alive at a time
        # the floors: 4 workers per endpoint, no host
        chans = [host.channel(f"bmc-{e}") for e in range(nodes // PER_NODE_ENDPOINT)]
        shares = [[f"m{i}" for i in range(j, PER_NODE_ENDPOINT, PER_ENDPOINT)]
                  for j in range(PER_ENDPOINT)]
        delay = latency_ms / 1000

        async def worker(ch: Any, targets: list[str]) -> None:
            for t in targets:
                await ch.reboot(t)

        async def sleeper(count: int) -> None:
            for _ in range(count):
                await asyncio.sleep(delay)

        floors: list[float] = []
        loops: list[float] = []
        loop_cpus: list[float] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(ch, targets) for ch in chans for targets in shares))
            floors.append(time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*(sleeper(len(targets)) for _ in chans for targets in shares))
            loops.append(time.perf_counter() - t0)
            loop_cpus.append(time.process_time() - c0)
        first: float | None = None
        stream = getattr(host, "invoke_stream", None)
        if stream is not None:
            t0 = time.perf_counter()
            async for _node, outcome in stream(names, Verb.REBOOT, reason="bench"):
                if first is None:
                    first = time.perf_counter() - t0
                if not isinstance(outcome, InvokeResult):
                    raise SystemExit(f"{_node} failed in the stream: {outcome}")
        seq: float | None = None
        if nodes <= 2000 and seq_loop:
            sample = names[:200]
            t0 = time.perf_counter()
            for n in sample:
                await host.invoke(n, Verb.REBOOT, reason="bench")
            seq = (time.perf_counter() - t0) * len(names) / len(sample)
        endpoints = nodes // PER_NODE_ENDPOINT
        peak = max(host.channel(f"bmc-{e}").peak_active  # type: ignore[attr-defined]
                   for e in range(endpoints))
        loop_type = type(asyncio.get_running_loop())
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    audit = Path(os.environ.get("XDG_STATE_HOME", "")) / "powerplane" / "audit.jsonl"
    audited = audit.stat().st_size if audit.is_file() else 0
    return {"loop": f"{loop_type.__module__}.{loop_type.__qualname__}",
            "policy": policy, "audit_bytes": audited, "chained": chained,
            "audit_s": statistics.median(audit_s), "audit_cpu": statistics.median(audit_cpu),
            "nodes": nodes, "latency_ms": latency_ms, "wall": statistics.median(walls),
            "walls": walls, "cpu": statistics.median(cpus), "ideal": ideal,
            "floor": statistics.median(floors), "alone": statistics.median(loops),
            "alone_cpu": statistics.median(loop_cpus),
            "first": first, "seq": seq, "peak": peak, "rss_mib": rss_mib}


def run_case(nodes: int, latency: int, runs: int, base: str | None,
             loop_name: str = "asyncio", seq_loop: bool = True,
             gc_tuned: bool = False, policy: bool = False,
             chained: bool = True) -> dict[str, Any] | str:
    """One case in a child process on the named event loop (``base``: with that build's
    powerplane first on the path; ``policy``: with a ``policy:`` section), its audit file
    in a temporary ``$XDG_STATE_HOME`` of its own."""
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = base + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="bench-invoke-many-state-") as state:
        env["XDG_STATE_HOME"] = state
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(nodes), str(latency), "--runs",
             str(runs), "--loop", loop_name, *(() if seq_loop else ("--no-seq",)),
             *(("--gc-tuned",) if gc_tuned else ()), *(("--policy",) if policy else ()),
             *(() if chained else ("--unchained",))],
            capture_output=True, text=True, check=False, env=env,
        )
    if proc.returncode != 0:
        return proc.stderr.strip()[-400:] or f"exit {proc.returncode}"
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


TARGET_CHAIN = 5.0
"""Percent of invoke_many's wall (and CPU) the audit trail's chain may cost."""


def chain_pairs(nodes: int, latency: int, runs: int, loop_name: str, pairs: int,
                gc_tuned: bool) -> None:
    """``pairs`` alternating runs of the case, the trail chained and not (the audit file's
    private ``_chained``, set in the child: a benchmark's switch, no deployment reaches
    it); the medians of wall and CPU side by side and their ratio."""
    got: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for _ in range(pairs):
        for chained in (False, True):
            x = run_case(nodes, latency, runs, None, loop_name, False, gc_tuned,
                         chained=chained)
            if isinstance(x, str):
                print(f"        chain {'on' if chained else 'off'}: failed: {x}")
                return
            got[chained].append(x)
    line = f"        {loop_name:<7} the chain, {pairs} alternating pairs:"
    for key in ("wall", "cpu"):
        on = statistics.median(r[key] for r in got[True])
        off = statistics.median(r[key] for r in got[False])
        over = (on / off - 1) * 100
        line += (f" {key} {off * 1000:.0f} ms chain off ("
                 + ", ".join(f"{r[key] * 1000:.0f}" for r in got[False])
                 + f"), {on * 1000:.0f} ms chained ("
                 + ", ".join(f"{r[key] * 1000:.0f}" for r in got[True])
                 + f"): ratio {on / off:.4f} ({over:+.2f}%, "
                 f"{'met' if over <= TARGET_CHAIN else 'NOT met'});")
    bytes_on, bytes_off = got[True][0]["audit_bytes"], got[False][0]["audit_bytes"]
    print(line + f" audit file {bytes_off} B unchained, {bytes_on} B chained")
    on = statistics.median(r["audit_s"] for r in got[True])
    off = statistics.median(r["audit_s"] for r in got[False])
    wall = statistics.median(r["wall"] for r in got[False])
    cpu_on = statistics.median(r["audit_cpu"] for r in got[True])
    cpu_off = statistics.median(r["audit_cpu"] for r in got[False])
    cpu = statistics.median(r["cpu"] for r in got[False])
    print(f"        {loop_name:<7} inside the audit append of a call (timed in each run): wall "
          f"(fsync and the machine's load included) {on * 1000:.1f} ms chained, "
          f"{off * 1000:.1f} ms chain off: {(on - off) * 1000:+.1f} ms = "
          f"{(on - off) / wall * 100:.2f}% of the wall; CPU of the appending thread "
          f"{cpu_on * 1000:.1f} ms chained, {cpu_off * 1000:.1f} ms chain off: the chain "
          f"{(cpu_on - cpu_off) * 1000:+.1f} ms = {(cpu_on - cpu_off) / cpu * 100:.2f}% of the "
          f"call's CPU, {(cpu_on - cpu_off) / wall * 100:.2f}% of its wall (the precise "
          "figures where the whole-run difference is below the machine's noise)")


def describe(r: dict[str, Any]) -> str:
    ideal = r["ideal"]
    line = (f"wall {r['wall'] * 1000:.0f} ms = {r['wall'] / ideal:.2f}x ideal"
            f" (CPU {r['cpu'] * 1000:.0f} ms, {r['cpu'] / r['nodes'] * 1e6:.1f} us per node)"
            if "cpu" in r else
            f"wall {r['wall'] * 1000:.0f} ms = {r['wall'] / ideal:.2f}x ideal")
    line += (f"; channels alone {r['floor'] * 1000:.0f} ms ({r['floor'] / ideal:.2f}x), "
             f"host over them {r['wall'] / r['floor']:.2f}x")
    alone = r.get("alone", r.get("loop"))  # "loop" in builds before --loops
    if isinstance(alone, float):
        line += f"; event loop alone {alone * 1000:.0f} ms ({alone / ideal:.2f}x"
        if "alone_cpu" in r:
            line += f", CPU {r['alone_cpu'] * 1000:.0f} ms"
        line += ")"
    line += f"; peak RSS {r['rss_mib']:.0f} MiB"
    if r["first"] is not None:
        line += f"; first streamed result {r['first'] * 1000:.0f} ms"
    return line + f"; peak at one endpoint {r['peak']} (limit {PER_ENDPOINT})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000,50000")
    ap.add_argument("--latencies", default="50,20")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base", help="an older build's core/src, measured beside this one")
    ap.add_argument("--loops", default=default_loops(),
                    help="event loops to measure each case on, side by side: asyncio,uvloop")
    ap.add_argument("--loop", choices=LOOPS, default="asyncio", help=argparse.SUPPRESS)
    ap.add_argument("--no-seq", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --base: runs per build and case, alternating; medians compared")
    ap.add_argument("--gc-tuned", action="store_true",
                    help="tune the collector in each child as the CLI does for a command")
    ap.add_argument("--policy", action=argparse.BooleanOptionalAction, default=True,
                    help="also run each case with a policy: section (per-node CPU printed "
                    "with and without it)")
    ap.add_argument("--chain", type=int, default=2, metavar="N",
                    help="N alternating pairs of runs per case, the audit trail chained and "
                    "not, side by side (issue 37: the chain <= 5%%); 0: none")
    ap.add_argument("--unchained", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, type=int, metavar=("NODES", "LATENCY_MS"))
    args = ap.parse_args()
    if args.child:
        out = run_on(args.loop, child(args.child[0], args.child[1], args.runs,
                                        not args.no_seq, args.gc_tuned, args.policy,
                                        not args.unchained))
        print(json.dumps(out))
        return
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    for name in loops:
        if name not in LOOPS:
            ap.error(f"--loops: unknown event loop {name!r} (one of {', '.join(LOOPS)})")
        if name == "uvloop" and importlib.util.find_spec("uvloop") is None:
            ap.error("--loops: uvloop is not installed in this Python")
    print(f"invoke_many: {PER_NODE_ENDPOINT} nodes per endpoint, per_endpoint {PER_ENDPOINT}, "
          f"total = per_endpoint x endpoints; median of {args.runs} runs; one process per case")
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall times on a loaded machine are upper bounds)")
    met_on = {name: True for name in loops}
    for latency in (int(x) for x in args.latencies.split(",")):
        for nodes in (int(x) for x in args.sizes.split(",")):
            ideal_ms = math.ceil(PER_NODE_ENDPOINT / PER_ENDPOINT) * latency
            print(f"{nodes:>6} nodes, {latency} ms (ideal {ideal_ms} ms), "
                  f"load {os.getloadavg()[0]:.1f}:")
            walls: dict[str, float] = {}
            for name in loops:
                label = f"{name:<7}"
                # the sequential alternative once per case, on the first loop
                r = run_case(nodes, latency, args.runs, None, name, name == loops[0],
                             args.gc_tuned)
                if not isinstance(r, str) and not r["loop"].startswith(f"{name}."):
                    r = f"ran on {r['loop']}, not {name}"
                if isinstance(r, str):
                    print(f"        {label} this build: failed: {r}")
                    met_on[name] = False
                    continue
                walls[name] = r["wall"]
                ratio = r["wall"] / r["ideal"]
                verdicts = []
                target = TARGETS.get(nodes)
                if target is not None:
                    met = ratio <= target
                    met_on[name] &= met
                    verdicts.append(f"ratio target <= {target}x {'met' if met else 'NOT met'}")
                rss_target = RSS_TARGET_MIB.get(nodes)
                if rss_target is not None:
                    met = r["rss_mib"] <= rss_target
                    met_on[name] &= met
                    verdicts.append(
                        f"RSS target <= {rss_target} MiB {'met' if met else 'NOT met'}")
                print(f"        {label} this build: {describe(r)}"
                      + (f" [{'; '.join(verdicts)}]" if verdicts else ""))
                if r["seq"] is not None:
                    print(f"        {label} sequential invoke loop: {r['seq']:.1f} s "
                          f"(200 measured, scaled); invoke_many is {r['seq'] / r['wall']:.0f}x "
                          "faster")
                if args.chain:
                    chain_pairs(nodes, latency, args.runs, name, args.chain, args.gc_tuned)
                plain_cpu = {"this build": [r["cpu"]]}
                b: dict[str, Any] | str = "not run"
                if args.base:
                    b = run_case(nodes, latency, args.runs, args.base, name, False,
                                 args.gc_tuned)
                    if isinstance(b, str):
                        print(f"        {label} baseline: failed: {b}")
                    else:
                        print(f"        {label} baseline:   {describe(b)}")
                        plain_cpu["baseline"] = [b["cpu"]]
                        mine, theirs = [r["wall"]], [b["wall"]]
                        for _ in range(args.repeat - 1):  # alternating, this build first
                            for build, into, cpus in ((None, mine, plain_cpu["this build"]),
                                                      (args.base, theirs,
                                                       plain_cpu["baseline"])):
                                x = run_case(nodes, latency, args.runs, build, name, False,
                                             args.gc_tuned)
                                if not isinstance(x, str):
                                    into.append(x["wall"])
                                    cpus.append(x["cpu"])
                        m, t = statistics.median(mine), statistics.median(theirs)
                        print(f"        {label} median of {len(mine)} / {len(theirs)} "
                              f"alternating runs: this build {m * 1000:.0f} ms "
                              f"({m / r['ideal']:.2f}x ideal), baseline {t * 1000:.0f} ms "
                              f"({t / r['ideal']:.2f}x ideal): this build is {t / m:.3f}x "
                              f"as fast ({(m / t - 1) * 100:+.1f} % wall), "
                              f"{r['rss_mib'] - b['rss_mib']:+.0f} MiB")
                if args.policy:
                    builds = [("this build", None)]
                    if args.base and not isinstance(b, str):
                        builds.append(("baseline", args.base))
                    for who, build in builds:
                        with_policy = run_case(nodes, latency, args.runs, build, name, False,
                                               args.gc_tuned, policy=True)
                        if isinstance(with_policy, str):
                            print(f"        {label} {who} with a policy: section: failed: "
                                  f"{with_policy}")
                            continue
                        print(f"        {label} {who} with a policy: section: "
                              f"{describe(with_policy)}")
                        without = statistics.median(plain_cpu[who]) / nodes * 1e6
                        within = with_policy["cpu"] / nodes * 1e6
                        print(f"        {label} {who}: CPU per node {without:.1f} us without "
                              f"a policy: section (median of {len(plain_cpu[who])}), "
                              f"{within:.1f} us with one ({within - without:+.1f} us)")
            if "asyncio" in walls and "uvloop" in walls:
                print(f"        uvloop wall / asyncio wall: "
                      f"{walls['uvloop'] / walls['asyncio']:.2f}")
    for name, met in met_on.items():
        print(f"{name}: {'all targets met' if met else 'some targets NOT met'}")

if __name__ == "__main__":
    main()
