"""Loading a 10,000-node deployment file: time and peak memory, against ``python -c pass``.

The file has one simulated channel with 10,000 machines and 10,000 nodes, each with a site,
two labels and one channel reference (about 1.3 MB of YAML). Each figure is the best of 5
child processes: wall time, and peak resident memory (``ru_maxrss`` of the child); inside
the child, plugin discovery and ``load_config`` (parse + validate) are timed apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5
NODES = 10_000


def write_config(path: Path) -> None:
    rows = ["channels:", "  lab:", "    type: simulated", "    machines:"]
    rows += [f"      m{i:05d}: 'on'" for i in range(NODES)]
    rows.append("nodes:")
    for i in range(NODES):
        rows.append(f"  node-{i:05d}:")
        rows.append(f"    site: site-{i % 20}")
        rows.append(f"    labels: {{rack: r{i % 500}, role: worker}}")
        rows.append(f"    channels: [{{channel: lab, target: m{i:05d}}}]")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def child(code: str) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in bytes and stdout of ``python -c code``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {code}")
    return wall, usage.ru_maxrss * 1024, out


def best(code: str) -> tuple[float, int, str]:
    runs = [child(code) for _ in range(RUNS)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "powerplane.yaml"
        write_config(path)
        size = path.stat().st_size
        base_t, base_m, _ = best("pass")
        imp_t, imp_m, _ = best("import powerplane.config, powerplane.simulated, pydantic")
        load = (
            "import time\n"
            "from powerplane import load_config\n"
            "from powerplane.plugins import registry\n"
            "t0 = time.perf_counter()\n"
            "registry()\n"
            "t1 = time.perf_counter()\n"
            f"dep = load_config({str(path)!r})\n"
            "print(time.perf_counter() - t1, t1 - t0, len(dep.nodes))\n"
        )
        load_t, load_m, out = best(load)
        inner, plugins, count = out.split()
        assert int(count) == NODES
    mib = 1024 * 1024
    print(f"config: {NODES} nodes, {size / mib:.2f} MiB of YAML")
    print(f"python -c pass:             {base_t * 1000:7.0f} ms  {base_m / mib:6.1f} MiB peak")
    print(f"import (no file):           {imp_t * 1000:7.0f} ms  {imp_m / mib:6.1f} MiB peak")
    print(f"load_config, whole process: {load_t * 1000:7.0f} ms  {load_m / mib:6.1f} MiB peak  "
          f"({load_t / base_t:.1f}x python's time, {load_m / base_m:.1f}x its memory)")
    print(f"plugin discovery (once):    {float(plugins) * 1000:7.0f} ms")
    print(f"load_config alone:          {float(inner) * 1000:7.0f} ms  "
          f"{(load_m - imp_m) / mib:6.1f} MiB over the imports  "
          f"({float(inner) / (NODES / 1000) * 1000:.1f} ms per 1,000 nodes)")


if __name__ == "__main__":
    main()
