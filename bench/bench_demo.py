"""`powerplane demo` wall time from a warm virtual environment. Target: under 60 s.

(The time of README's first command from a fresh clone is measured by hand — it includes
creating the venv and installing every workspace member — and quoted in the closing note.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

TARGET_S = 60.0


def main() -> None:
    exe = shutil.which("powerplane", path=os.path.dirname(sys.executable)) or "powerplane"
    t0 = time.perf_counter()
    res = subprocess.run([exe, "demo"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    verdict = "passed" if res.returncode == 0 else f"FAILED (exit {res.returncode})"
    steps = [line.strip() for line in res.stdout.splitlines()
             if line.strip().startswith(("ok ", "FAILED "))]
    for line in steps:
        print(f"  {line}")
    print(f"powerplane demo: {wall:.1f} s, {verdict} "
          f"(target < {TARGET_S:.0f} s: ratio {wall / TARGET_S:.2f})")


if __name__ == "__main__":
    main()
