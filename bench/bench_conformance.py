"""Benchmark: the full conformance suite's wall time, so vendors run it on every change.

1. Against core's ``simulated`` channel (two machines, one on and one off, every check
   allowed, repeat 3, settle_timeout_s 2).
2. Against the sushy-tools emulator (the redfish plugin, TLS and basic auth, power changes
   applied at once: delay zero), two systems, every check allowed including the negative
   network cases. Skipped with a note when powerplane-redfish is not installed.

Baseline: 30 s each (the issue's target). Each figure is printed with its ratio to it
(below 1.0 meets the target). Starts its own peers; exits 0.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from powerplane_conformance.api import RunSummary, run_suite

BASELINE_S = 30.0
PASSWORD_ENV = "PP_BENCH_CONFORMANCE_PASSWORD"


def timed(target: dict[str, Any], work: Path) -> tuple[float, RunSummary]:
    start = time.perf_counter()
    summary = run_suite(target, report=work / "results.json")
    return time.perf_counter() - start, summary


def report(label: str, seconds: float, summary: RunSummary) -> None:
    c = summary.data["counts"]
    print(f"{label}: {seconds:.2f} s for {len(summary.data['results'])} checks "
          f"(pass {c['pass']}, fail {c['fail']}, skip {c['skip']}, "
          f"not tested {c['not_tested']}); ratio to the {BASELINE_S:g} s baseline: "
          f"{seconds / BASELINE_S:.3f}")


def simulated(work: Path) -> None:
    os.environ[PASSWORD_ENV] = "bench-secret"
    target = {
        "channels": {"lab": {"type": "simulated", "machines": {"m1": "on", "m2": "off"},
                             "password": {"env": PASSWORD_ENV},
                             "expect_password": {"env": PASSWORD_ENV}}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m1"}]},
                  "n2": {"channels": [{"channel": "lab", "target": "m2"}]}},
        "conformance": {"allow_destructive": True, "settle_timeout_s": 2, "repeat": 3,
                        "expected_capabilities": {"lab": ["reboot", "shutdown", "power-on"]},
                        "negative": {"lab": {"secret_key": "password"}}},
    }
    seconds, summary = timed(target, work)
    report("full suite vs simulated", seconds, summary)


def sushy_emulator(work: Path) -> None:
    try:
        from powerplane_redfish.testing.emulator import SushyEmulator
    except ImportError:
        print("full suite vs sushy-tools emulator: skipped (powerplane-redfish not installed)")
        return
    with SushyEmulator(work / "emulator", systems=2, zero_delay=True) as emu:
        os.environ[PASSWORD_ENV] = emu.password
        target = {
            "channels": {"bmc": {"type": "redfish", "endpoint": emu.endpoint,
                                 "username": emu.username, "password": {"env": PASSWORD_ENV},
                                 "verify": str(emu.tls.ca), "auth": "basic",
                                 "connect_timeout_s": 5, "read_timeout_s": 10}},
            "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": path}]}
                      for i, path in enumerate(emu.system_paths)},
            "conformance": {
                "allow_destructive": True, "settle_timeout_s": 10, "repeat": 3,
                "expected_capabilities": {"bmc": ["reboot", "shutdown", "power-on"]},
                "negative": {"bmc": {
                    "address_key": "endpoint", "address_format": "https://{host}:{port}",
                    "secret_key": "password", "timeout_s": 1,
                    "timeout_key": ["connect_timeout_s", "read_timeout_s"]}},
            },
        }
        seconds, summary = timed(target, work)
    report("full suite vs sushy-tools emulator (delay 0)", seconds, summary)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-conformance-") as tmp:
        work = Path(tmp)
        (work / "emulator").mkdir()
        simulated(work)
        sushy_emulator(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
