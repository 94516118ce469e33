"""``fence_powerplane`` against fence-agents' own agents on the same peer, action by action.

Two peers, each started as the plugins' tests start them: the sushy-tools Redfish emulator
(zero delay, TLS, basic auth) with ``fence_redfish``, and OpenIPMI's ``ipmi_sim`` with
``fence_ipmilan`` (lanplus, cipher suite 3, operator). Every agent runs as the fencer runs
it: a process per action, its options as ``key=value`` lines on stdin. Per action
(``status``, ``monitor``, ``off``, ``on``, ``reboot``) the exit code and the median wall
time of ``--runs N`` rounds for each agent, and the ratio powerplane / theirs. Each round
runs the actions in that order for one agent, then for the other, so both meet the machine
in the same state (on for status and off, off for on). powerplane's channels are configured
``shutdown: force`` (a fence is a power cut); both agents read the machine back after off
and on. Needs fence-agents, openipmi and the redfish and ipmi plugins; a peer whose tools
are missing is reported and skipped. Prints the table; exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

AGENT = str(Path(sys.executable).with_name("fence_powerplane"))
ACTIONS = ("status", "monitor", "off", "on", "reboot")
PASSWORD_ENV = "PP_BENCH_FENCE_PASSWORD"


def lines(**options: Any) -> str:
    return "".join(f"{k}={v}\n" for k, v in options.items())


def run(exe: str, stdin: str, env: dict[str, str]) -> tuple[int, float]:
    start = time.perf_counter()
    done = subprocess.run([exe], input=stdin, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)
    return done.returncode, time.perf_counter() - start


def rounds(agents: dict[str, tuple[str, str]], env: dict[str, str], runs: int
           ) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """``agents``: label -> (executable, stdin without the action)."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for _ in range(runs + 1):  # the first round warms the caches, uncounted
        for label, (exe, base) in agents.items():
            for action in ACTIONS:
                out.setdefault((label, action), []).append(
                    run(exe, base + f"action={action}\n", env))
    return {k: v[1:] for k, v in out.items()}


def table(peer: str, theirs: str, found: dict[tuple[str, str], list[tuple[int, float]]]) -> None:
    print(f"\n{peer}")
    print(f"| action | fence_powerplane exit | {theirs} exit | fence_powerplane s | "
          f"{theirs} s | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for action in ACTIONS:
        ours_runs, their_runs = found[("ours", action)], found[("theirs", action)]
        ours_s = statistics.median(t for _, t in ours_runs)
        their_s = statistics.median(t for _, t in their_runs)
        codes_ours = "/".join(sorted({str(c) for c, _ in ours_runs}))
        codes_theirs = "/".join(sorted({str(c) for c, _ in their_runs}))
        print(f"| {action} | {codes_ours} | {codes_theirs} | {ours_s:.2f} | {their_s:.2f} | "
              f"{ours_s / their_s:.2f}x |")


def redfish(work: Path, runs: int) -> None:
    if shutil.which("fence_redfish") is None:
        print("fence_redfish not found (fence-agents): the Redfish rows skipped")
        return
    from powerplane_redfish.testing.emulator import SushyEmulator

    with SushyEmulator(work / "emu", systems=1, zero_delay=True) as emu:
        system = emu.system_paths[0]
        cfg = work / "redfish.yaml"
        cfg.write_text(yaml.safe_dump({
            "channels": {"bmc": {"type": "redfish", "endpoint": emu.endpoint,
                                 "username": emu.username, "password": {"env": PASSWORD_ENV},
                                 "verify": str(emu.tls.ca), "auth": "basic",
                                 "shutdown": "force"}},
            "nodes": {"n1": {"channels": [{"channel": "bmc", "target": system}]}},
            "audit": {"path": str(work / "audit.jsonl")}}))
        env = {PASSWORD_ENV: emu.password, "REQUESTS_CA_BUNDLE": str(emu.tls.ca)}
        found = rounds({
            "ours": (AGENT, lines(plug="n1", config=cfg)),
            "theirs": ("fence_redfish", lines(ip="127.0.0.1", ipport=emu.port,
                                              username=emu.username, password=emu.password,
                                              ssl=1, **{"systems-uri": system})),
        }, env, runs)
        table("sushy-tools emulator (Redfish), fence_redfish", "fence_redfish", found)


def ipmi(work: Path, runs: int) -> None:
    if shutil.which("fence_ipmilan") is None or shutil.which("ipmi_sim") is None:
        print("fence_ipmilan or ipmi_sim not found (fence-agents, openipmi): IPMI rows skipped")
        return
    from powerplane_ipmi.peer import IpmiSim

    with IpmiSim(work / "sim") as sim:
        secret = sim.secret_file("oper")
        script = work / "pw.sh"
        script.write_text(f"#!/bin/sh\ncat {secret}\n")
        script.chmod(0o700)
        cfg = work / "ipmi.yaml"
        cfg.write_text(yaml.safe_dump({
            "channels": {"bmc": {"type": "ipmi", "username": "oper",
                                 "password": {"file": str(secret)}, "shutdown": "force"}},
            "nodes": {"n1": {"channels": [{"channel": "bmc", "target": sim.address}]}},
            "limits": {"timeout_s": 30},
            "audit": {"path": str(work / "audit.jsonl")}}))
        found = rounds({
            "ours": (AGENT, lines(plug="n1", config=cfg)),
            "theirs": ("fence_ipmilan", lines(ip=sim.host, ipport=sim.port, username="oper",
                                              password_script=script, lanplus=1, cipher=3,
                                              privlvl="operator")),
        }, {}, runs)
        table("ipmi_sim (IPMI), fence_ipmilan", "fence_ipmilan", found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="counted rounds (medians)")
    args = parser.parse_args()
    print(f"fence agents, a process per action, options on stdin; medians of {args.runs} "
          f"rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-fence-") as tmp:
        redfish(Path(tmp), args.runs)
        ipmi(Path(tmp), args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
