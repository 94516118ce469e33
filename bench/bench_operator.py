"""Benchmark: 1,000 reboots through ``powerplane operator run`` (one replica) against kmock.

The operator runs as its own process (``powerplane operator run``) against kmock's API
server (the site Lease lives there) and drives every maintenance through the lifecycle's
Reconciler; this process requests the maintenances (full ceremony) into the store,
keeping 10 active: a new one is requested as soon as one completes. Every node is a
machine behind a simulated channel with 50 ms latency per call (ten racks of 100, each its
own endpoint), in a simulated cluster with two pods per node and a three-member control
plane left alone.

Figures:
* wall time against the ideal (100 waves x one 50 ms reboot call = 5.0 s), from the moment
  the operator holds the site's lease (its start-up is printed apart),
* API requests per maintenance: the operator's (every request kmock received from the
  operator's kubeconfig during the run, by kind) and, apart, the requester's (the
  lifecycle's request path this process runs). With ``--store kubernetes`` this process is
  a long-lived requester (as a gateway is): it keeps a watch of the NodeMaintenances
  (:func:`powerplane_kubernetes.watch.following`, its list and watch counted among its
  requests), which answers its guard (no list per request) and tells it each maintenance
  that finished; with SQLite it looks at the maintenances in flight every 5 ms,
* peak memory of the operator process (its VmHWM from /proc, read before it stops).

The store is the SQLite file (``--store sqlite``, the default) or, with ``--store
kubernetes``, NodeMaintenance objects on kmock (the request figures then include them; a
request is then ``Pending`` until the operator admits it: the node's lock and the
admission's status write are among the operator's requests).
kmock keeps counts only (``record=False``), so its memory and its time per request stay
flat over the run.

The test API server enforces RBAC and the admission policy: the operator and the requester
each hold the roles ``operator manifests`` prints for them (the requester also
``powerplane-admin``, for the reboot verb the policy checks), and the policy is stored.

The test API server runs in a process of its own (its methods called through a
multiprocessing proxy), as a real one is apart from its clients; its own cost is measured
in the same run: the CPU time of its thread (every request it answered, its watches)
beside the requests it received from everyone, and the CPU time of the operator's process
and of this one (the requester), so the wall shows what is the operator's and what is the
fake's: on a machine with fewer cores than the three processes need, their CPU time over
the cores is a floor no operator goes below.

``--base REF`` (e.g. ``7b505a9``, the build before the NodeMaintenance API): the same
benchmark of that commit (checked out into a temporary git worktree, removed after; its
own ``bench/bench_operator.py`` run with that tree's packages first on ``PYTHONPATH``) in
the same run, after this build's, and the ratios of the two.

Usage: python bench/bench_operator.py [--nodes N] [--parallel K] [--latency-ms L]
       [--store sqlite|kubernetes] [--base REF]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

import yaml

from powerplane import PowerHost, load_config
from powerplane.lifecycle import Lifecycle, NodeMaintenance
from powerplane.lifecycle.ceremony import Ceremony
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.operator.leases import lease_name
from powerplane_kubernetes.store import KubernetesStore
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_kubernetes.watch import following

RACKS = 10
LEASES = "coordination.k8s.io/v1/leases"
RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"


def deployment(tmp: Path, nodes: int, latency_ms: float, store: str) -> tuple[Path, list[str]]:
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
        spec[n] = {"site": "bench", "labels": labels,
                   "channels": [{"channel": rack, "target": n}]}
    store_cfg: Any = "bench.db" if store == "sqlite" else {
        "type": "kubernetes", "kubeconfig": "kubeconfig", "namespace": "ops"}
    raw = {
        "channels": channels,
        "nodes": spec,
        "limits": {"per_endpoint": 4, "total": 256, "timeout_s": 30},
        "lifecycle": {
            "store": store_cfg,
            "cluster": {"type": "simulated",
                        "pods": {n: [f"{n}-a", f"{n}-b"] for n in names},
                        "eviction_ticks": 0},
            "storage": {"type": "none"},
            "tick_s": 0.005,
            "concurrency": 10,
        },
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path, names


def _kind(path: str) -> str:
    """The resource a request went to (``leases``, ``nodemaintenances``, ...)."""
    parts = [p for p in path.split("/") if p]
    for plural in ("leases", "nodemaintenances", "maintenanceaudits", "events"):
        if plural in parts:
            return plural + ("/status" if parts[-1] == "status" else "")
    return path


class _ServerProcess(BaseManager):
    """The test API server in a process of its own (its methods called through a proxy):
    the requester's and this loop's work never waits on the server's interpreter lock, nor
    the server on theirs; the API server the operator sees is a process apart from its
    clients, as a real one is."""


class _Served(KubeApiServer):
    def begin(self) -> None:
        """Start the server (``start`` answers the server itself, which stays in its
        process)."""
        self.start()


_ServerProcess.register("KubeApiServer", _Served, exposed=(
    "begin", "stop", "write_kubeconfig", "object", "request_counts",
    "cpu_seconds", "grant"))


def holder(api: Any) -> str | None:
    """The holder of the benchmark site's Lease (None: no Lease yet)."""
    lease = api.object(LEASES, "ops", lease_name("bench")) or {}
    found = (lease.get("spec") or {}).get("holderIdentity")
    return str(found) if found else None


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def main(nodes: int, parallel: int, latency_ms: float, store: str) -> None:
    with tempfile.TemporaryDirectory(prefix="pp-bench-op-") as tmpdir, \
            _ServerProcess() as manager:
        api: Any = manager.KubeApiServer(record=False)  # type: ignore[attr-defined]
        api.begin()
        tmp = Path(tmpdir)
        # each holds the roles operator manifests prints for it, which the server enforces
        # (and the admission policy, stored when it starts): the operator its ClusterRole,
        # site-lease Role and node-lock Role; the requester powerplane-maintainer, its
        # locks Role and powerplane-admin (the reboot verb the policy checks)
        api.grant("operator", m.cluster_role(), m.lease_role("ops"),
                  m.operator_lock_role("ops"))
        api.grant("requester", m.maintainer_role(), m.maintainer_lock_role("ops"),
                  m.people_roles()[0])
        # the operator's kubeconfig and the requester's (this process) are told apart
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig", client="operator")
        api.write_kubeconfig(tmp / "requester-kubeconfig", client="requester")
        config, names = deployment(tmp, nodes, latency_ms, store)
        mine = tmp / "requester.yaml"
        mine.write_text(config.read_text(encoding="utf-8").replace(
            "kubeconfig: kubeconfig", "kubeconfig: requester-kubeconfig"), encoding="utf-8")
        host = PowerHost(load_config(mine))
        await host.start()
        lc = Lifecycle.for_host(host)

        waiting: dict[str, asyncio.Event] = {}
        finished: set[str] = set()

        def ended(name: str) -> None:
            finished.add(name)
            if name in waiting:
                waiting.pop(name).set()

        async def poll() -> None:
            """SQLite: every 5 ms, one look at every maintenance in flight; each one found
            terminal is told."""
            while True:
                await asyncio.sleep(0.005)
                for name in [n for n in list(waiting) if lc.store.get(n).phase.terminal]:
                    ended(name)

        def delivered(kind: str, m: NodeMaintenance | None) -> None:
            """kubernetes: what this requester's watch delivered; a terminal one is told."""
            if m is not None and m.phase.terminal:
                ended(m.name)
        # the operator's log goes to a file: a pipe read only at the end fills (64 KiB) and
        # blocks the operator in its next log write (what stopped the 1,000-node run before)
        log_path = tmp / "operator.log"
        log_file = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        op = subprocess.Popen(
            [sys.executable, "-c", RUN, "--config", str(config), "operator", "run",
             "--kubeconfig", str(kubeconfig), "--namespace", "ops", "--identity", "bench",
             "--interval", "0.01", "--max-in-flight", str(parallel),
             "--lease-duration", "15", "--renew-deadline", "10", "--retry-period", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file, text=True)
        try:
            # the clock starts once the operator holds the site's lease (its start-up, the
            # imports and the host's discovery, is reported apart)
            launched = time.perf_counter()
            while holder(api) != "bench":
                if op.poll() is not None:
                    raise SystemExit(f"the operator exited {op.returncode}: "
                                     f"{log_path.read_text()[-2000:]}")
                await asyncio.sleep(0.02)
            startup = time.perf_counter() - launched
            before = api.request_counts()
            slots = asyncio.Semaphore(parallel)

            async def one(node: str) -> None:
                async with slots:  # 10 in flight; the next starts as soon as one completes
                    m = await lc.request(node, "reboot", Ceremony(
                        reason="rolling kernel update", confirm_node=node,
                        ack_preflight=True))
                    done = waiting[m.name] = asyncio.Event()
                    if m.name in finished:
                        ended(m.name)
                    while not done.is_set():
                        if op.poll() is not None:
                            raise SystemExit(f"the operator exited {op.returncode}: "
                                             f"{log_path.read_text()[-2000:]}")
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(done.wait(), 1.0)

            async with contextlib.AsyncExitStack() as stack:
                poller: asyncio.Task[None] | None = None
                if store == "sqlite":
                    poller = asyncio.create_task(poll())
                else:  # a long-lived requester: its watch feeds its store (its requests
                    # list nothing) and tells the ends; its list and watch are counted
                    assert isinstance(lc.store, KubernetesStore)
                    watch = await stack.enter_async_context(
                        following(lc.store, on_object=delivered))
                    while watch.active_view() is None:  # listed: the clock starts
                        await asyncio.sleep(0.005)
                start = time.perf_counter()
                fake_cpu, op_cpu, own_cpu = (api.cpu_seconds(), cpu_seconds(op.pid),
                                             time.process_time())
                await asyncio.gather(*(one(n) for n in names))
                wall = time.perf_counter() - start
                if poller is not None:
                    poller.cancel()
            fake_cpu, op_cpu = api.cpu_seconds() - fake_cpu, cpu_seconds(op.pid) - op_cpu
            own_cpu = time.process_time() - own_cpu
            peak = peak_rss_mib(op.pid)
            counts = api.request_counts() - before
        finally:
            op.terminate()
            try:
                op.wait(timeout=30)
            except subprocess.TimeoutExpired:
                op.kill()
                op.wait(timeout=30)
            log_file.close()
        every = lc.store.all()
        complete = sum(1 for m in every if m.phase.value == "Complete")
        reboots = sum(1 for m in every for d in m.status.dispatches
                      if d.verb == "reboot" and d.outcome is not None
                      and d.outcome.value == "accepted")
        lc.close()
        await host.close()
    if complete != nodes or reboots != nodes:
        raise SystemExit(f"benchmark invalid: {complete} complete, {reboots} reboots accepted")
    ideal = math.ceil(nodes / parallel) * latency_ms / 1000
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for (client, verb, what), n in counts.items():
        by[client][f"{verb} {_kind(what)}"] += n
    print(f"operator: {nodes} reboots, {parallel} in flight, {latency_ms:g} ms channel latency, "
          f"store {store}, kmock API server")
    print(f"  complete: {complete}/{nodes}; reboots accepted: {reboots}")
    print(f"  wall time: {wall:.2f} s; ideal: {ideal:.2f} s; ratio to ideal: {wall / ideal:.2f}x "
          f"(operator start-up to its lease held, not counted: {startup:.2f} s)")
    for client in ("operator", "requester"):
        kinds = by.get(client, collections.Counter())
        total = sum(kinds.values())
        print(f"  API requests of the {client}: {total} in all, {total / nodes:.3f} per "
              f"maintenance ({', '.join(f'{k}: {v}' for k, v in kinds.most_common(8))})")
    others = sum(n for c, kinds in by.items() if c not in ("operator", "requester")
                 for n in kinds.values())
    if others:
        print(f"  API requests of no known client: {others}")
    print(f"  peak memory of the operator (VmHWM): {peak:.1f} MiB")
    received = sum(counts.values())
    print(f"  the test API server: {received} requests received in the run (every client), "
          f"its thread's CPU {fake_cpu:.2f} s = {1e3 * fake_cpu / max(received, 1):.2f} ms "
          f"per request, {100 * fake_cpu / wall:.0f}% of the wall (a process of its own); "
          f"this process's (the requester, its watch or its poll) {own_cpu:.2f} s "
          f"({100 * own_cpu / wall:.0f}%); the operator process's {op_cpu:.2f} s "
          f"({100 * op_cpu / wall:.0f}%)")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_base(ref: str, args: argparse.Namespace) -> None:
    """The same benchmark of commit ``ref``, in a temporary git worktree (removed after)."""
    root = Path(__file__).resolve().parent.parent
    tmp = Path(tempfile.mkdtemp(prefix="pp-bench-base-"))
    tree = tmp / "tree"
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), ref],
                   check=True, capture_output=True)
    try:
        srcs = [str(p) for p in sorted(tree.glob("*/src")) + sorted(tree.glob("plugins/*/src"))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(srcs)}
        print(f"\nbaseline {ref} (its own bench/bench_operator.py, its packages):", flush=True)
        subprocess.run([sys.executable, str(tree / "bench" / "bench_operator.py"),
                        "--nodes", str(args.nodes), "--parallel", str(args.parallel),
                        "--latency-ms", str(args.latency_ms), "--store", args.store],
                       env=env, check=True)
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)
        tmp.rmdir()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--store", choices=("sqlite", "kubernetes"), default="sqlite")
    parser.add_argument("--base", metavar="REF",
                        help="also run this benchmark as of commit REF, side by side")
    args = parser.parse_args()
    if not os.path.exists("/proc/self/status"):
        raise SystemExit("this benchmark reads the operator's peak memory from /proc (Linux)")
    asyncio.run(main(args.nodes, args.parallel, args.latency_ms, args.store))
    if args.base:
        run_base(args.base, args)
