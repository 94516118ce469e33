"""The chaos driver: concurrent ``maintenance run`` processes, SIGKILLed at random.

Used by ``test_chaos.py`` (sized to run in well under a minute) and by
``bench/bench_settle.py --chaos N`` (the full size: 300 maintenances). Rounds of
maintenances (reboots and shutdowns, one per worker node) are requested; three
``maintenance run`` processes share the store and the simulated machines (one
``state_file``, locked and re-read per call; its dispatch log only grows);
a random one is killed with SIGKILL every few hundred milliseconds and started again.
Parked shutdowns are returned to service by a person and the chaos goes on until every
maintenance of the round is terminal. :func:`check` then returns every violation found.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from powerplane import PowerHost
from powerplane.config import load_config
from powerplane.lifecycle import Ceremony, Lifecycle, Phase, Store
from powerplane.lifecycle.phases import is_allowed

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
CP = ("cp1", "cp2", "cp3")


@dataclass
class ChaosReport:
    maintenances: int = 0
    kills: int = 0
    wall_s: float = 0.0
    applied: Counter[tuple[str, str]] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


def write_config(tmp: Path, workers: int) -> Path:
    names = [f"w{i:03d}" for i in range(workers)]
    cfg: dict[str, Any] = {
        "channels": {"lab": {
            "type": "simulated",
            "machines": {n: "on" for n in (*CP, *names)},
            "state_file": str(tmp / "machines.json"),
            "transition_ms": 60,
        }},
        "nodes": {
            **{cp: {"labels": {"node-role.kubernetes.io/control-plane": ""},
                    "channels": [{"channel": "lab", "target": cp}]} for cp in CP},
            **{n: {"channels": [{"channel": "lab", "target": n}]} for n in names},
        },
        "lifecycle": {
            "store": "lifecycle.db",
            "cluster": {"type": "simulated"},  # readiness and boot id follow the machines
            "tick_s": 0.02,
            "readback_window_s": 1,
            "readback_cadence_s": 0.02,
            "settle_window_s": 0.4,
            "concurrency": 64,
        },
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _spawn(config: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CRASH_AT"}
    return subprocess.Popen(
        [sys.executable, "-c", RUN, "--config", str(config), "maintenance", "run"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _lifecycle_call(config: Path, fn: Any) -> Any:
    async def go() -> Any:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                return await fn(lc)
            finally:
                lc.close()

    return asyncio.run(go())


def _phases(tmp: Path, names: list[str]) -> dict[str, Phase]:
    store = Store(tmp / "lifecycle.db")
    try:
        return {n: store.get(n).phase for n in names}
    finally:
        store.close()


def _chaos_until(tmp: Path, config: Path, names: list[str], done: set[Phase],
                 rng: random.Random, report: ChaosReport, timeout_s: float) -> None:
    procs = [_spawn(config) for _ in range(3)]
    end = time.monotonic() + timeout_s
    try:
        while True:
            time.sleep(rng.uniform(0.15, 0.6))
            phases = _phases(tmp, names)
            if all(p in done for p in phases.values()):
                break
            if time.monotonic() >= end:
                store = Store(tmp / "lifecycle.db")
                try:
                    for n, p in phases.items():
                        if p not in done:
                            m = store.get(n)
                            conds = {k: (c.status.value, c.message)
                                     for k, c in m.status.conditions.items()
                                     if c.status.value == "True" or k == "RebootObserved"}
                            report.violations.append(
                                f"{n}: stuck in {p} after {timeout_s:g} s; {conds}; "
                                f"{[(d.outcome, d.detail) for d in m.status.dispatches]}")
                finally:
                    store.close()
                break
            i = rng.randrange(len(procs))
            procs[i].send_signal(signal.SIGKILL)
            procs[i].wait()
            report.kills += 1
            procs[i] = _spawn(config)
    finally:
        for p in procs:  # the last ones die by SIGKILL too
            p.send_signal(signal.SIGKILL)
            p.wait()


def run_chaos(tmp: Path, maintenances: int, workers: int, seed: int = 0,
              timeout_s: float = 120) -> ChaosReport:
    rng = random.Random(seed)
    config = write_config(tmp, workers)
    report = ChaosReport()
    start = time.monotonic()
    all_names: list[str] = []
    left = maintenances
    nodes = [f"w{i:03d}" for i in range(workers)]
    while left > 0:
        batch = nodes[:min(left, workers)]
        left -= len(batch)
        intents = {n: ("shutdown" if rng.random() < 0.3 else "reboot") for n in batch}

        async def request(lc: Lifecycle, intents: dict[str, str] = intents) -> list[str]:
            return [(await lc.request(n, i, Ceremony(
                reason="chaos maintenance", confirm_node=n,
                ack_preflight=True))).name for n, i in intents.items()]

        names = _lifecycle_call(config, request)
        all_names += names
        parked = {Phase.COMPLETE, Phase.FAILED, Phase.REFUSED, Phase.POWERED_OFF}
        _chaos_until(tmp, config, names, parked, rng, report, timeout_s)
        check_powered_off(tmp, names, report)
        off = [n for n, p in _phases(tmp, names).items() if p is Phase.POWERED_OFF]

        async def back(lc: Lifecycle, off: list[str] = off) -> None:
            for name in off:
                node = lc.store.get(name).node
                await lc.return_to_service(node, Ceremony(reason="chaos return"))

        _lifecycle_call(config, back)
        terminal = {Phase.COMPLETE, Phase.FAILED, Phase.REFUSED}
        _chaos_until(tmp, config, names, terminal, rng, report, timeout_s)
    report.maintenances = len(all_names)
    report.wall_s = time.monotonic() - start
    check(tmp, all_names, report)
    return report


def check_powered_off(tmp: Path, names: list[str], report: ChaosReport) -> None:
    """No ``PoweredOff`` on a machine that reads on without the status saying so."""
    machines = json.loads((tmp / "machines.json").read_text())["machines"]
    store = Store(tmp / "lifecycle.db")
    try:
        for name in names:
            m = store.get(name)
            if m.phase is not Phase.POWERED_OFF or machines[m.node] == "off":
                continue
            poc = m.condition("PowerOffConfirmed")
            if poc is not None and poc.status == "False":
                continue  # still reading back
            if not m.is_true("MachineReadsOn"):
                report.violations.append(f"{name}: PoweredOff, machine {machines[m.node]}, "
                                         "status does not say it still reads on")
    finally:
        store.close()


def check(tmp: Path, names: list[str], report: ChaosReport) -> None:
    sent = json.loads((tmp / "machines.json").read_text())["dispatches"]
    report.applied = Counter((str(v), str(t)) for v, t in sent)
    store = Store(tmp / "lifecycle.db")
    try:
        audit = store.audit()
        expected: Counter[tuple[str, str]] = Counter()
        for name in names:
            m = store.get(name)
            prev = Phase.REQUESTED
            for t in m.status.history:
                if t.from_phase is not prev or not is_allowed(prev, t.to):
                    report.violations.append(f"{name}: invalid transition {t.from_phase} -> "
                                             f"{t.to}")
                prev = t.to
            if not m.phase.terminal:
                report.violations.append(f"{name}: ended in {m.phase}")
            took: Counter[str] = Counter(
                d.verb for d in m.status.dispatches
                if d.outcome is not None and d.outcome.value in ("accepted", "applied"))
            for verb, n in took.items():
                if n > 1:
                    report.violations.append(f"{name}: {verb} took effect {n} times")
                expected[(verb, m.node)] += 1
            if m.spec.intent.value == "reboot" and m.phase is Phase.COMPLETE:
                observed = m.condition("RebootObserved")
                resolved = bool(m.spec.resolutions)
                if not resolved and (observed is None or observed.status != "True"):
                    report.violations.append(f"{name}: Complete without evidence of a reboot")
            if not any(a.maintenance == name for a in audit):
                report.violations.append(f"{name}: no audit record")
        for key, n in report.applied.items():
            if n != expected[key]:
                report.violations.append(f"{key}: applied {n} times at the machine, "
                                         f"{expected[key]} recorded as taking effect")
    finally:
        store.close()
    db = sqlite3.connect(tmp / "lifecycle.db")
    try:
        ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()
    if ok != "ok":
        report.violations.append(f"integrity_check: {ok}")
