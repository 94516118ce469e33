"""``powerplane offers -o json`` on 10,000- and 100,000-node files, YAML and JSON side by side,
and the parse cost per node at 10,000, 100,000 and 1,000,000 nodes: this build against a
baseline build, in one run.

Each file has one simulated channel with a machine per node, and per node a site, two labels
and one channel reference (142 bytes a node in block YAML; the same document as JSON, as
``json.dump(indent=2)`` writes it, 262 bytes a node). This build reads both; the baseline
reads the YAML file. Figures:

* ``offers -o json`` in a child process (wall time, median of ``--runs``; the builds and
  formats alternate run by run, so the machine's load falls on each alike), against the
  targets (1.0 s at 10,000 nodes, 8 s at 100,000);
* where that time goes, measured inside one child: imports, plugin discovery, reading and
  parsing the file, validating the deployment, discovery of the channels (the host's start),
  the offers, the JSON output;
* whether ``offers -o json`` printed the same bytes on every build and format (sha256);
* the parse alone (``load_yaml``, ``load_json``), CPU microseconds per node (median of
  ``--runs`` at 10k/100k, of two at 1M), which should be flat from 10k to 1M.

The baseline is another checkout (``--base /path/to/checkout``, e.g. ``git worktree add
/tmp/base bb259b9``): its own ``.venv`` if it has one, else this venv's Python with the
checkout's sources first on ``PYTHONPATH``; its bounds are lifted in-process for the parse
figures (older builds refuse files over 4 MiB). Without ``--base`` only this build is
measured. The machine's load average is printed: on a shared machine wall times carry it,
CPU times less so.
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
from powerplane import PowerHost
from powerplane.plugins import registry
try:
    import powerplane.sim.channel
except ImportError:  # an older build: the simulator in its own module
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
load = Y.load_json if sys.argv[1].endswith(".json") else Y.load_yaml
runs = []
for _ in range(int(sys.argv[2])):
    c = time.process_time()
    data, lines = load(text, "x")
    runs.append(time.process_time() - c)
    del data, lines
print(json.dumps({"cpu": statistics.median(runs), "best": min(runs)}))
"""


def document(nodes: int) -> dict[str, Any]:
    """The deployment ``write_config`` writes as YAML, as data (what a generator holds)."""
    return {
        "channels": {"lab": {"type": "simulated",
                             "machines": {f"m{i:07d}": "on" for i in range(nodes)}}},
        "nodes": {f"node-{i:07d}": {"site": f"site-{i % 20}",
                                    "labels": {"rack": f"r{i % 500}", "role": "worker"},
                                    "channels": [{"channel": "lab", "target": f"m{i:07d}"}]}
                  for i in range(nodes)},
    }


def write_config(path: Path, nodes: int) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write("channels:\n  lab:\n    type: simulated\n    machines:\n")
        out.writelines(f"      m{i:07d}: 'on'\n" for i in range(nodes))
        out.write("nodes:\n")
        for i in range(nodes):
            out.write(f"  node-{i:07d}:\n    site: site-{i % 20}\n"
                      f"    labels: {{rack: r{i % 500}, role: worker}}\n"
                      f"    channels: [{{channel: lab, target: m{i:07d}}}]\n")


def write_json(path: Path, nodes: int) -> None:
    """The same deployment as JSON, as a generator writes it (``json.dump``, indented)."""
    with open(path, "w", encoding="utf-8") as out:
        json.dump(document(nodes), out, indent=2)


Run = tuple[str, str]
"""(build, format): ``("before", "yaml")``, ``("after", "yaml")``, ``("after", "json")``."""


def offers_once(python: str, env: dict[str, str], path: Path,
                keep: Path | None = None) -> tuple[float, float] | None:
    """Wall and CPU (user + system, of the child) seconds of one ``offers -o json``;
    ``None`` when the build refuses the file (exit 2: an older build's 4 MiB bound).
    ``keep``: the output goes to that file (to compare the bytes)."""
    with open(keep if keep is not None else os.devnull, "wb") as sink:
        t0 = time.perf_counter()
        proc = subprocess.Popen([python, "-m", "powerplane.cli", "--config", str(path),
                                 "offers", "-o", "json"], stdout=sink,
                                stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code == 2:
        return None
    if code != 0:
        raise SystemExit(f"{python}: offers exit {code} on {path.name}")
    return wall, usage.ru_utime + usage.ru_stime


def child_json(python: str, env: dict[str, str], code: str, *args: str) -> dict[str, float]:
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"{python} ({env.get('PYTHONPATH', 'this build')}) on {args}: "
                         f"exit {done.returncode}\n{done.stderr[-2000:]}")
    out = done.stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def base_build(base: Path, meta: Path) -> tuple[str, dict[str, str]]:
    """The Python and environment that run the baseline checkout ``base``: its own venv,
    else this venv's Python with the checkout's sources first on ``PYTHONPATH`` and, before
    them, its distributions' metadata (names, versions, entry points from its
    ``pyproject.toml`` files) written under ``meta``, so plugin discovery finds the
    baseline's modules (the first distribution of a name wins)."""
    import tomllib

    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    own = base / ".venv" / "bin" / "python"
    if own.exists():
        return str(own), env
    projects = [base / "core", *sorted(base.glob("plugins/*")), base / "conformance",
                base / "demo"]
    for project in projects:
        if not (project / "pyproject.toml").is_file():
            continue
        info = tomllib.loads((project / "pyproject.toml").read_text())["project"]
        name, version = info["name"], info.get("version", "0.1.0")
        dist = meta / f"{name.replace('-', '_')}-{version}.dist-info"
        dist.mkdir(parents=True, exist_ok=True)
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
            for group, items in info.get("entry-points", {}).items()))
    sources = [meta, *(p / "src" for p in projects)]
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sources if p.is_dir())
    return sys.executable, env


def median_pair(rows: list[tuple[float, float] | None]) -> tuple[float, float] | None:
    if not rows or any(r is None for r in rows):
        return None
    return (statistics.median(r[0] for r in rows if r is not None),
            statistics.median(r[1] for r in rows if r is not None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="checkout of the baseline build")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-1m", action="store_true", help="no 1,000,000-node parse")
    parser.add_argument("--parse-only", action="store_true", help="the parse figures alone")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    builds: dict[str, tuple[str, dict[str, str]]] = {"after": (sys.executable, env)}
    runs: list[Run] = [("after", "yaml"), ("after", "json")]
    sizes = [10_000, 100_000] + ([] if args.skip_1m else [1_000_000])
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    offers: dict[tuple[Run, int], tuple[float, float] | None] = {}
    phases: dict[tuple[Run, int], dict[str, float]] = {}
    shas: dict[tuple[Run, int], str | None] = {}
    parse: dict[tuple[Run, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.base is not None:
            builds = {"before": base_build(args.base, Path(tmp) / "meta"), **builds}
            runs = [("before", "yaml"), *runs]
        files: dict[tuple[str, int], Path] = {}
        for n in sizes:
            files["yaml", n] = Path(tmp) / f"n{n}.yaml"
            write_config(files["yaml", n], n)
            files["json", n] = Path(tmp) / f"n{n}.json"
            write_json(files["json", n], n)
        mib = {k: f.stat().st_size / 2**20 for k, f in files.items()}
        for n in [] if args.parse_only else TARGETS:
            rows: dict[Run, list[tuple[float, float] | None]] = {r: [] for r in runs}
            for i in range(args.runs):  # alternating: every run and format once a round
                for run in runs:
                    python, run_env = builds[run[0]]
                    keep = Path(tmp) / f"{run[0]}-{run[1]}{n}.out" if i == 0 else None
                    rows[run].append(offers_once(python, run_env, files[run[1], n], keep))
            for run in runs:
                python, run_env = builds[run[0]]
                offers[run, n] = median_pair(rows[run])
                out = Path(tmp) / f"{run[0]}-{run[1]}{n}.out"
                shas[run, n] = (hashlib.sha256(out.read_bytes()).hexdigest()
                                if out.stat().st_size else None)
                phases[run, n] = child_json(python, run_env, PHASES, str(files[run[1], n]))
        for n in sizes:
            rounds = args.runs if n < 1_000_000 else 2
            for _ in range(rounds):
                for run in runs:
                    python, run_env = builds[run[0]]
                    got = child_json(python, run_env, PARSE, str(files[run[1], n]), "1")
                    parse.setdefault((run, n), []).append(got["cpu"])
    print(f"load average at end: {os.getloadavg()[0]:.1f}")

    def name(run: Run) -> str:
        return f"{run[0]} {run[1]}"

    for n, target in {} if args.parse_only else TARGETS.items():
        print(f"\noffers -o json, {n:,} nodes (YAML {mib['yaml', n]:.1f} MiB, JSON "
              f"{mib['json', n]:.1f} MiB) — median wall of {args.runs}, target {target:.1f} s")
        for run in runs:
            ph = phases[run, n]
            config = ph["yaml"] + ph["validate"]
            rest = ", ".join(f"{k} {v:.2f}" for k, v in ph.items())
            wall_cpu = offers[run, n]
            if wall_cpu is None:
                head = "refused (exit 2, over its size bound); in-process, bounds lifted:"
            else:
                head = (f"{wall_cpu[0]:6.2f} s wall ({wall_cpu[0] / target:.2f}x target), "
                        f"{wall_cpu[1]:6.2f} s CPU   ")
            print(f"  {name(run):11s} {head}read {ph['yaml']:.2f} s, config {config:.2f} s, "
                  f"discovery {ph['discovery']:.2f} s, "
                  f"output {ph['offers'] + ph['json']:.2f} s   [{rest}]")
        digests = {shas[run, n] for run in runs}
        print("  output bytes (sha256) of every build and format: "
              + ("identical" if len(digests) == 1 and None not in digests else "DIFFERENT"))
        pairs = [(("after", "yaml"), ("before", "yaml")), (("after", "json"), ("before", "yaml")),
                 (("after", "json"), ("after", "yaml"))]
        for a, b in pairs:
            if a not in runs or b not in runs or offers[a, n] is None or offers[b, n] is None:
                continue
            wa, ca = offers[a, n]  # type: ignore[misc]
            wb, cb = offers[b, n]  # type: ignore[misc]
            read = phases[a, n]["yaml"] / phases[b, n]["yaml"]
            print(f"  {name(a)} / {name(b)}: whole command {wa / wb:.2f}x wall, "
                  f"{ca / cb:.2f}x CPU, reading the file {read:.2f}x")
    print("\nparse alone (load_yaml, load_json), CPU µs per node — median; flat from 10k to 1M "
          "is the goal")
    medians = {k: statistics.median(v) for k, v in parse.items()}
    for run in runs:
        per = {n: medians[run, n] / n * 1e6 for n in sizes}
        row = "  ".join(f"{n:>9,}: {v:6.1f}" for n, v in per.items())
        print(f"  {name(run):11s} {row}   (largest/smallest {per[sizes[-1]] / per[sizes[0]]:.2f}x)")
    for a, b in [(("after", "yaml"), ("before", "yaml")), (("after", "json"), ("before", "yaml")),
                 (("after", "json"), ("after", "yaml"))]:
        if a in runs and b in runs:
            row = "  ".join(f"{n:>9,}: {medians[a, n] / medians[b, n]:6.2f}x" for n in sizes)
            print(f"  {name(a)} / {name(b)}: {row}")


if __name__ == "__main__":
    main()
