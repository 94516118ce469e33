"""``powerplane offers -o json`` on 10,000- and 100,000-node files, and YAML parse cost per node
at 10,000, 100,000 and 1,000,000 nodes: this build against a baseline build, side by side.

Each file has one simulated channel with a machine per node, and per node a site, two labels
and one channel reference (142 bytes a node). Figures:

* ``offers -o json`` in a child process (wall time, median of ``--runs``), against the
  targets (1.0 s at 10,000 nodes, 8 s at 100,000);
* where that time goes, measured inside one child: imports, plugin discovery, reading and
  parsing the YAML, validating the deployment, discovery of the channels (the host's start),
  the offers, the JSON output;
* whether ``offers -o json`` printed the same bytes on both builds (sha256);
* the YAML parse alone (``load_yaml``), CPU microseconds per node (median of ``--runs``
  at 10k/100k, of two at 1M), which should be flat from 10k to 1M.

The baseline is another checkout with its own venv (``--base /path/to/checkout``, e.g.
``git worktree add /tmp/base18c <commit>`` then ``./dev install`` there); its bounds are
lifted in-process for the parse figures (older builds refuse files over 4 MiB). Without
``--base`` only this build is measured. The machine's load average is printed: on a shared
machine wall times carry it, CPU times less so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS = {10_000: 1.0, 100_000: 8.0}

PHASES = r"""
import asyncio, gc, json, sys, time
t0 = time.perf_counter()
import powerplane._yaml as Y, powerplane.config as C
if not hasattr(Y, "node_bound"):  # an older build: lift its fixed bounds for the figure
    Y.MAX_BYTES = Y.MAX_NODES = C.MAX_BYTES = 256 * 1024 * 1024  # as this build
from powerplane.config import load_config, parse_config
try:
    from powerplane.config import read_config
except ImportError:  # an older build: reading and validating in one call (counted as yaml)
    read_config = None
from powerplane.host import PowerHost
from powerplane.plugins import registry
import powerplane.simulated
t1 = time.perf_counter()
reg = registry()
t2 = time.perf_counter()
if read_config is None:
    dep = load_config(sys.argv[1], registry=reg)
    t3 = t4 = time.perf_counter()
else:
    data, lines, source = read_config(sys.argv[1])
    t3 = time.perf_counter()
    dep = parse_config(data, registry=reg, source=source, lines=lines)
    t4 = time.perf_counter()
marks = {}
async def go():
    async with PowerHost(dep) as host:
        marks["started"] = time.perf_counter()
        offers = host.offers(None)
        rows = [o.as_dict() for o in offers]
        marks["offers"] = time.perf_counter()
        return rows if dumps_indented is None else (rows, [id(o.verbs) for o in offers])
try:  # the CLI's own output path where the build has it (C-encoded, verbs shared)
    from powerplane.cli._json import dumps_indented
    from powerplane.cli.commands import _shared_verbs
except ImportError:  # an older build: the standard library's indented encoder
    dumps_indented = _shared_verbs = None
if dumps_indented is None:
    rows = asyncio.run(go())
    t7 = time.perf_counter()
    text = json.dumps({"nodes": rows}, indent=2, default=str)
else:
    gc.freeze()  # as the CLI does after loading
    rows, ids = asyncio.run(go())
    t7 = time.perf_counter()
    text = dumps_indented({"nodes": _shared_verbs(rows, ids)})
t8 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "plugins": t2 - t1, "yaml": t3 - t2,
                  "validate": t4 - t3, "discovery": marks["started"] - t4,
                  "offers": marks["offers"] - marks["started"],
                  "close": t7 - marks["offers"], "json": t8 - t7}))
"""

PARSE = r"""
import json, statistics, sys, time
import powerplane._yaml as Y
if not hasattr(Y, "node_bound"):  # an older build: lift its fixed bounds for the figure
    Y.MAX_BYTES = Y.MAX_NODES = 256 * 1024 * 1024
text = open(sys.argv[1], encoding="utf-8").read()
runs = []
for _ in range(int(sys.argv[2])):
    c = time.process_time()
    data, lines = Y.load_yaml(text, "x")
    runs.append(time.process_time() - c)
    del data, lines
print(json.dumps({"cpu": statistics.median(runs), "best": min(runs)}))
"""


def write_config(path: Path, nodes: int) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write("channels:\n  lab:\n    type: simulated\n    machines:\n")
        out.writelines(f"      m{i:07d}: 'on'\n" for i in range(nodes))
        out.write("nodes:\n")
        for i in range(nodes):
            out.write(f"  node-{i:07d}:\n    site: site-{i % 20}\n"
                      f"    labels: {{rack: r{i % 500}, role: worker}}\n"
                      f"    channels: [{{channel: lab, target: m{i:07d}}}]\n")


def offers_wall(python: str, path: Path, runs: int,
                digest: Path | None = None) -> tuple[float, float] | None:
    """Median wall and median CPU (user + system, of the child) seconds of ``offers -o json``;
    ``None`` when the build refuses the file (exit 2: an older build's 4 MiB bound).
    ``digest``: the first run's output goes to that file (to compare builds' bytes)."""
    walls, cpus = [], []
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    for i in range(runs):
        keep = digest is not None and i == 0
        with open(digest if keep and digest else os.devnull, "wb") as sink:
            t0 = time.perf_counter()
            proc = subprocess.Popen([python, "-m", "powerplane.cli", "--config", str(path),
                                     "offers", "-o", "json"], stdout=sink,
                                    stderr=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            walls.append(time.perf_counter() - t0)
        cpus.append(usage.ru_utime + usage.ru_stime)
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code
        if code == 2:
            return None
        if code != 0:
            raise SystemExit(f"{python}: offers exit {code}")
    return statistics.median(walls), statistics.median(cpus)


def child_json(python: str, code: str, *args: str) -> dict[str, float]:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                         check=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="checkout of the baseline build (with .venv)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-1m", action="store_true", help="no 1,000,000-node parse")
    parser.add_argument("--parse-only", action="store_true", help="the parse figures alone")
    args = parser.parse_args()
    builds = {"after": sys.executable}
    if args.base is not None:
        builds = {"before": str(args.base / ".venv" / "bin" / "python"), **builds}
    sizes = [10_000, 100_000] + ([] if args.skip_1m else [1_000_000])
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    results: dict[str, dict[str, Any]] = {b: {} for b in builds}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for n in sizes:
            files[n] = Path(tmp) / f"n{n}.yaml"
            write_config(files[n], n)
        mib = {n: f.stat().st_size / 2**20 for n, f in files.items()}
        for n in [] if args.parse_only else TARGETS:
            for build, python in builds.items():
                out = Path(tmp) / f"{build}{n}.json"
                results[build][f"offers{n}"] = offers_wall(python, files[n], args.runs, out)
                results[build][f"sha{n}"] = (hashlib.sha256(out.read_bytes()).hexdigest()
                                             if out.stat().st_size else None)
                results[build][f"phases{n}"] = child_json(python, PHASES, str(files[n]))
        for n in sizes:
            for build, python in builds.items():
                runs = args.runs if n < 1_000_000 else 2
                got = child_json(python, PARSE, str(files[n]), str(runs))
                results[build][f"parse{n}"] = got["cpu"]
                results[build][f"best{n}"] = got["best"]
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    for n, target in {} if args.parse_only else TARGETS.items():
        print(f"\noffers -o json, {n:,} nodes ({mib[n]:.1f} MiB) — "
              f"median wall of {args.runs}, target {target:.1f} s")
        for build in builds:
            phases: dict[str, float] = results[build][f"phases{n}"]
            config = phases["yaml"] + phases["validate"]
            rest = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
            if results[build][f"offers{n}"] is None:
                head = "refused (exit 2, over its size bound); in-process, bounds lifted:"
            else:
                wall, cpu = results[build][f"offers{n}"]
                head = (f"{wall:6.2f} s wall ({wall / target:.2f}x target), {cpu:6.2f} s CPU"
                        "   ")
            print(f"  {build:6s} {head}"
                  f"config {config:.2f} s, discovery {phases['discovery']:.2f} s, "
                  f"output {phases['offers'] + phases['json']:.2f} s   [{rest}]")
        if len(builds) == 2:
            shas = {results[b][f"sha{n}"] for b in builds}
            same = "identical" if len(shas) == 1 and None not in shas else (
                "not compared (the baseline refused the file)"
                if results["before"][f"sha{n}"] is None else "DIFFERENT")
            print(f"  output bytes (sha256), after vs before: {same}")
        if len(builds) == 2 and results["before"][f"offers{n}"] is not None:
            before = results["before"][f"offers{n}"][0]
            after = results["after"][f"offers{n}"][0]
            cpu_ratio = results["after"][f"offers{n}"][1] / results["before"][f"offers{n}"][1]
            b_cfg = sum(results["before"][f"phases{n}"][k]
                        for k in ("yaml", "validate"))
            a_cfg = sum(results["after"][f"phases{n}"][k]
                        for k in ("yaml", "validate"))
            print(f"  after/before: whole command {after / before:.2f}x wall, "
                  f"{cpu_ratio:.2f}x CPU, "
                  f"config (yaml + validate) {a_cfg / b_cfg:.2f}x")
    print("\nYAML parse (load_yaml), CPU µs per node — median; flat from 10k to 1M is the goal")
    for build in builds:
        per = {n: float(results[build][f"parse{n}"]) / n * 1e6
               for n in sizes}
        row = "  ".join(f"{n:>9,}: {v:6.1f}" for n, v in per.items())
        print(f"  {build:6s} {row}   (largest/smallest {per[sizes[-1]] / per[sizes[0]]:.2f}x)")
        best = {n: float(results[build][f"best{n}"]) / n * 1e6 for n in sizes}
        row = "  ".join(f"{n:>9,}: {v:6.1f}" for n, v in best.items())
        print(f"  {build:6s} {row}   (best run; largest/smallest "
              f"{best[sizes[-1]] / best[sizes[0]]:.2f}x)")
    if len(builds) == 2:
        ratios = {n: results["after"][f"parse{n}"] / results["before"][f"parse{n}"]
                  for n in sizes}
        row = "  ".join(f"{n:>9,}: {r:6.2f}x" for n, r in ratios.items())
        print(f"  after/before {row}")


if __name__ == "__main__":
    main()
