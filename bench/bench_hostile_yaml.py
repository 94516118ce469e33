"""The hostile-YAML bound: time and peak memory for the alias bomb, against 1 s / 100 MB.

The bomb is 10 anchors x 10 levels (10**10 leaves once expanded). Each figure is the best
of 5 runs of ``powerplane --config FILE offers`` in a child process: wall time and peak
resident memory (``ru_maxrss``), beside the same command on a one-node config. The
limits apply to what the bomb costs over that baseline; in-process, ``load_yaml`` on the
bomb is timed alone.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5
LIMIT_S = 1.0
LIMIT_BYTES = 100 * 1024 * 1024

GOOD = ("channels:\n  lab: {type: simulated, machines: {m1: 'on'}}\n"
        "nodes:\n  n1: {channels: [{channel: lab, target: m1}]}\n")


def bomb() -> str:
    names = "abcdefghij"
    rows = ["a: &a [x,x,x,x,x,x,x,x,x,x]"]
    rows += [f"{n}: &{n} [{','.join(['*' + p] * 10)}]" for p, n in itertools.pairwise(names)]
    return "\n".join(rows) + "\n"


def child(path: Path) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "powerplane.cli", "--config", str(path),
                             "offers"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def best(path: Path) -> tuple[float, int, int]:
    runs = [child(path) for _ in range(RUNS)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]


def main() -> None:
    from powerplane import ConfigError
    from powerplane._yaml import load_yaml

    text = bomb()
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = Path(tmp) / "good.yaml", Path(tmp) / "bomb.yaml"
        good.write_text(GOOD)
        bad.write_text(text)
        good_t, good_m, good_rc = best(good)
        bomb_t, bomb_m, bomb_rc = best(bad)
    t0 = time.perf_counter()
    try:
        load_yaml(text, "bomb.yaml")
        raise SystemExit("the bomb loaded: no bound")
    except ConfigError as exc:
        inner = time.perf_counter() - t0
        message = str(exc.problems[-1])
    mib = 1024 * 1024
    extra_t, extra_m = bomb_t - good_t, bomb_m - good_m
    print(f"alias bomb: {len(text.encode())} bytes, 10 anchors x 10 levels")
    print(f"one-node config: {good_t * 1000:6.0f} ms  {good_m / mib:6.1f} MiB peak  exit {good_rc}")
    print(f"alias bomb:      {bomb_t * 1000:6.0f} ms  {bomb_m / mib:6.1f} MiB peak  exit {bomb_rc}")
    print(f"  {message}")
    print(f"whole process: {bomb_t / LIMIT_S:.2f} of the 1 s limit, "
          f"{bomb_m / LIMIT_BYTES:.2f} of the 100 MB limit")
    print(f"over the baseline: {extra_t * 1000:+.0f} ms ({extra_t / LIMIT_S:+.3f} of 1 s), "
          f"{extra_m / mib:+.1f} MiB ({extra_m / LIMIT_BYTES:+.3f} of 100 MB)")
    print(f"load_yaml alone: {inner * 1000:.1f} ms ({inner / LIMIT_S:.4f} of 1 s)")


if __name__ == "__main__":
    main()
