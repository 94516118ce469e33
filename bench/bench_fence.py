"""``fence_powerplane`` against fence-agents' own agents on the same peer, action by action.

Two peers, each started as the plugins' tests start them: the sushy-tools Redfish emulator
(zero delay, TLS, basic auth) with ``fence_redfish``, and OpenIPMI's ``ipmi_sim`` with
``fence_ipmilan`` (lanplus, cipher suite 3, operator). Every agent runs as the fencer runs
it: a process per action, its options as ``key=value`` lines on stdin. Per action
(``status``, ``monitor``, ``off``, ``on``, ``reboot``) the exit code, the requests each agent
made to the peer (median; counted at the peer: the emulator's own request log for Redfish,
the datagrams sent to ``ipmi_sim`` through a counting UDP proxy in front of it for IPMI,
session setup and close included) and the median wall time of ``--runs N`` rounds for each
agent, and the ratio powerplane / theirs. Each round
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

AGENT = str(Path(sys.executable).with_name("fence_powerplane"))
ACTIONS = ("status", "monitor", "off", "on", "reboot")
PASSWORD_ENV = "PP_BENCH_FENCE_PASSWORD"


def lines(**options: Any) -> str:
    return "".join(f"{k}={v}\n" for k, v in options.items())


Run = tuple[int, float, int]
"""One action of one agent: exit code, wall seconds, requests the peer received."""
Counter = tuple[Callable[[], None], Callable[[], int]]
"""The peer's request counter: (zero it, read it)."""


def run(exe: str, stdin: str, env: dict[str, str], counter: Counter) -> Run:
    zero, count = counter
    zero()
    start = time.perf_counter()
    done = subprocess.run([exe], input=stdin, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)
    took = time.perf_counter() - start
    return done.returncode, took, count()


def rounds(agents: dict[str, tuple[str, str]], env: dict[str, str], runs: int,
           counter: Counter) -> dict[tuple[str, str], list[Run]]:
    """``agents``: label -> (executable, stdin without the action)."""
    out: dict[tuple[str, str], list[Run]] = {}
    for _ in range(runs + 1):  # the first round warms the caches, uncounted
        for label, (exe, base) in agents.items():
            for action in ACTIONS:
                out.setdefault((label, action), []).append(
                    run(exe, base + f"action={action}\n", env, counter))
    return {k: v[1:] for k, v in out.items()}


def table(peer: str, theirs: str, found: dict[tuple[str, str], list[Run]],
          unit: str) -> None:
    print(f"\n{peer}; requests: {unit}")
    print(f"| action | fence_powerplane exit | {theirs} exit | fence_powerplane requests | "
          f"{theirs} requests | fence_powerplane s | {theirs} s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for action in ACTIONS:
        ours_runs, their_runs = found[("ours", action)], found[("theirs", action)]
        ours_s = statistics.median(t for _, t, _ in ours_runs)
        their_s = statistics.median(t for _, t, _ in their_runs)
        ours_n = statistics.median(n for _, _, n in ours_runs)
        their_n = statistics.median(n for _, _, n in their_runs)
        codes_ours = "/".join(sorted({str(c) for c, _, _ in ours_runs}))
        codes_theirs = "/".join(sorted({str(c) for c, _, _ in their_runs}))
        print(f"| {action} | {codes_ours} | {codes_theirs} | {ours_n:g} | {their_n:g} | "
              f"{ours_s:.2f} | {their_s:.2f} | {ours_s / their_s:.2f}x |")


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
        }, env, runs, (emu.reset_count, lambda: len(emu.requests())))
        table("sushy-tools emulator (Redfish), fence_redfish", "fence_redfish", found,
              "HTTP requests in the emulator's log")


def ipmi(work: Path, runs: int) -> None:
    if shutil.which("fence_ipmilan") is None or shutil.which("ipmi_sim") is None:
        print("fence_ipmilan or ipmi_sim not found (fence-agents, openipmi): IPMI rows skipped")
        return
    from powerplane_ipmi.peer import IpmiSim
    from powerplane_ipmi.testing import UdpProxy

    with IpmiSim(work / "sim") as sim, UdpProxy(sim.host, sim.port) as proxy:
        secret = sim.secret_file("oper")
        script = work / "pw.sh"
        script.write_text(f"#!/bin/sh\ncat {secret}\n")
        script.chmod(0o700)
        cfg = work / "ipmi.yaml"
        cfg.write_text(yaml.safe_dump({
            "channels": {"bmc": {"type": "ipmi", "username": "oper",
                                 "password": {"file": str(secret)}, "shutdown": "force"}},
            "nodes": {"n1": {"channels": [{"channel": "bmc", "target": proxy.address}]}},
            "limits": {"timeout_s": 30},
            "audit": {"path": str(work / "audit.jsonl")}}))
        found = rounds({
            "ours": (AGENT, lines(plug="n1", config=cfg)),
            "theirs": ("fence_ipmilan", lines(ip="127.0.0.1", ipport=proxy.port,
                                              username="oper",
                                              password_script=script, lanplus=1, cipher=3,
                                              privlvl="operator")),
        }, {}, runs, (proxy.reset, lambda: proxy.up))
        table("ipmi_sim (IPMI), fence_ipmilan", "fence_ipmilan", found,
              "UDP datagrams to ipmi_sim (session setup and close included)")


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
