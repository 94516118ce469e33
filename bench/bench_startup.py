"""Start-up of `powerplane --help` and `powerplane plugins` against `python -c pass`.

Plugin discovery must not import heavy libraries (sushy, boto3, grpc, pysnmp).
Target: `--help` under 0.35 s on this machine. Best of 7 runs each.

With ``POWERPLANE_BASELINE=/path/to/other/venv/bin/powerplane`` (an install of an earlier
commit, e.g. a ``git worktree`` with its own ``./dev install``) each command is also run
against that build, alternating, and the ratio printed (the one-house bound: no regression
beyond 10%, ratio <= 1.10).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

RUNS = 7
TARGET_HELP_S = 0.35
HEAVY = ("sushy", "boto3", "botocore", "grpc", "grpclib", "pysnmp", "httpx")


def best(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(a: list[str], b: list[str]) -> tuple[float, float]:
    """Medians of A and B run in turn (A B A B ...), so drift hits both alike."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(RUNS * 2 + 1):
        for cmd, into in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            into.append(time.perf_counter() - t0)
    return sorted(ta)[len(ta) // 2], sorted(tb)[len(tb) // 2]


def heavy_imported(args: list[str]) -> list[str]:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['powerplane', *{args!r}]\n"
        "try:\n    runpy.run_module('powerplane.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False).stdout.splitlines()
    line = next((x for x in out if x.startswith("HEAVY=")), "HEAVY=")
    return [m for m in line[len("HEAVY="):].split(",") if m]


def main() -> None:
    exe = shutil.which("powerplane", path=os.path.dirname(sys.executable)) or "powerplane"
    base = best([sys.executable, "-c", "pass"])
    help_s = best([exe, "--help"])
    plugins_s = best([exe, "plugins"])
    print(f"python -c pass:       {base * 1000:6.0f} ms")
    print(f"powerplane --help:    {help_s * 1000:6.0f} ms  ({help_s / base:.1f}x python; "
          f"target < {TARGET_HELP_S * 1000:.0f} ms: ratio {help_s / TARGET_HELP_S:.2f})")
    print(f"powerplane plugins:   {plugins_s * 1000:6.0f} ms  ({plugins_s / base:.1f}x python)")
    other = os.environ.get("POWERPLANE_BASELINE")
    if other:
        for args in (["--help"], ["plugins"]):
            mine, theirs = paired([exe, *args], [other, *args])
            print(f"powerplane {' '.join(args):<9} {mine * 1000:6.0f} ms vs baseline "
                  f"{theirs * 1000:6.0f} ms: ratio {mine / theirs:.2f} (bound 1.10)")
    print(f"heavy modules imported by --help: {heavy_imported(['--help']) or 'none'}")
    print(f"heavy modules imported by plugins: {heavy_imported(['plugins']) or 'none'}")


if __name__ == "__main__":
    main()
