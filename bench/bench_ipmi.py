"""Benchmarks of the ipmi channel against OpenIPMI's ipmi_sim, with ipmitool and fence_ipmilan.

1. One power cycle (reboot: hard reset) and one status read on one ipmi_sim, through a
   counting UDP proxy: the powerplane CLI (a process per action: discovery, session, verb),
   ``PowerHost`` (in process, steady state: the session is open), ``ipmitool -I lanplus``
   (``chassis power reset`` / ``chassis power status``, password from a file) and
   ``fence_ipmilan`` (``--action reboot`` / ``--action status``, password from a script).
   Wall time and UDP datagrams (both directions) per action, ratios to powerplane's CLI and
   to ipmitool. The CLI runs twice: with compiled bytecode cached (as an installed package
   runs; a private ``PYTHONPYCACHEPREFIX``, warmed once) and as this environment runs it
   (``PYTHONDONTWRITEBYTECODE`` set: every module compiled on every start).
   Where a one-shot command's time goes: the interpreter (``python -c pass``), the CLI's
   own floor (``powerplane --version``: click and core), importing the plugin and pyghmi,
   and in process the sessionless probe, a fresh session's state read and a read on the
   open session.
   Two IPMI accounts on one BMC at once (two channels in one process, two CLI processes)
   against each alone.
2. Fan-out over N ipmi_sim instances (default 50): status of all and a power cycle of all,
   ``PowerHost`` (``read_power_state`` gathered, ``invoke_many``) against an ``ipmitool``
   loop and ``xargs -P 8 ipmitool``. Targets: at least 5x the loop, 1.5x xargs.

Needs ipmi_sim, ipmitool and fence_ipmilan (Debian: openipmi, ipmitool, fence-agents); a tool
that is missing is reported and its rows skipped. Prints each figure; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from powerplane import PowerHost, Verb, parse_config
from powerplane_ipmi.peer import IpmiSim
from powerplane_ipmi.testing import UdpProxy


def deployment(targets: list[str], pwfile: Path) -> dict[str, Any]:
    return {
        "channels": {"bmc": {"type": "ipmi", "username": "oper",
                             "password": {"file": str(pwfile)}}},
        "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": t}]}
                  for i, t in enumerate(targets)},
        "limits": {"timeout_s": 30, "per_endpoint": 1, "total": 256},
    }


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(argv: list[str], env: dict[str, str] | None = None) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({out.returncode}): {out.stderr.strip()[:300]}")


def cached_env(work: Path) -> dict[str, str]:
    """The environment of an installed package: bytecode compiled once and reused."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def run_env(argv: list[str], env: dict[str, str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                         env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({out.returncode}): {out.stderr.strip()[:300]}")


def ipmitool(host: str, port: int, pwfile: Path, *cmd: str) -> list[str]:
    return ["ipmitool", "-I", "lanplus", "-C", "3", "-H", host, "-p", str(port), "-U", "oper",
            "-f", str(pwfile), "-L", "OPERATOR", *cmd]


def fence(host: str, port: int, pwscript: Path, action: str) -> list[str]:
    return ["fence_ipmilan", "--lanplus", "--cipher", "3", "--ip", host, "--ipport", str(port),
            "--username", "oper", "--password-script", str(pwscript), "--privlvl", "operator",
            "--action", action, "--method", "cycle"]


def single(work: Path) -> None:
    print("== one BMC (ipmi_sim), through a counting UDP proxy")
    with IpmiSim(work / "one") as sim, UdpProxy(sim.host, sim.port) as proxy:
        pwfile = sim.secret_file("oper")
        pwscript = work / "pw.sh"
        pwscript.write_text(f"#!/bin/sh\ncat {pwfile}\n")
        pwscript.chmod(0o700)
        cfg_path = work / "one.yaml"
        cfg_path.write_text(yaml.safe_dump(deployment([proxy.address], pwfile)))
        rows: list[tuple[str, str, float, int]] = []

        def measure(tool: str, action: str, fn: Callable[[], Any], rounds: int = 3) -> None:
            walls = []
            packets = []
            for _ in range(rounds):
                proxy.reset()
                walls.append(timed(fn))
                time.sleep(0.05)
                packets.append(proxy.up + proxy.down)
            rows.append((tool, action, sorted(walls)[len(walls) // 2],
                         sorted(packets)[len(packets) // 2]))

        py = [sys.executable, "-m", "powerplane.cli", "--config", str(cfg_path)]
        cached = cached_env(work)
        run_env([*py, "state", "n0"], cached)  # compile once, as an install does
        measure("powerplane CLI", "status", lambda: run_env([*py, "state", "n0"], cached),
                rounds=5)
        measure("powerplane CLI", "cycle", lambda: run_env(
            [*py, "invoke", "n0", "reboot", "--reason", "bench cycle", "--yes"], cached),
            rounds=5)
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            measure("CLI, no bytecode cache", "status", lambda: run([*py, "state", "n0"]))
            measure("CLI, no bytecode cache", "cycle", lambda: run(
                [*py, "invoke", "n0", "reboot", "--reason", "bench cycle", "--yes"]))
        floors = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("powerplane --version", [sys.executable, "-m", "powerplane.cli", "--version"]),
            ("import core config", [sys.executable, "-c", "import powerplane.config"]),
            ("import plugin+pyghmi", [sys.executable, "-c", "import powerplane_ipmi.channel, "
                                      "pyghmi.ipmi.private.session"]),
        ]
        for label, argv in floors:
            run_env(argv, cached)
            measure(label, "status", lambda argv=argv: run_env(argv, cached),  # type: ignore[misc]
                    rounds=5)

        async def host_rows() -> None:
            async with PowerHost(parse_config(deployment([proxy.address], pwfile))) as host:
                await host.read_power_state("n0")  # the session is open from here on
                loop = asyncio.get_running_loop()
                for action, coro in (
                        ("status", lambda: host.read_power_state("n0")),
                        ("cycle", lambda: host.invoke("n0", Verb.REBOOT, reason="bench"))):
                    walls, packets = [], []
                    for _ in range(3):
                        proxy.reset()
                        t0 = loop.time()
                        await coro()
                        walls.append(loop.time() - t0)
                        await asyncio.sleep(0.05)
                        packets.append(proxy.up + proxy.down)
                    rows.append(("PowerHost (open session)", action, sorted(walls)[1],
                                 sorted(packets)[1]))

        from powerplane_ipmi.channel import IpmiChannel, probe
        from powerplane_ipmi.config import IpmiConfig, parse_target

        cfg = IpmiConfig(username="oper", password={"file": str(pwfile)})
        measure("in process: probe only", "status",
                lambda: probe(parse_target(proxy.address), 2.0))

        def fresh() -> None:
            ch = IpmiChannel("bmc", cfg)
            ch.read_power_state(proxy.address)
            ch.close()

        measure("in process: fresh session", "status", fresh, rounds=5)
        asyncio.run(host_rows())
        if shutil.which("ipmitool"):
            measure("ipmitool -I lanplus", "status", lambda: run(
                ipmitool("127.0.0.1", proxy.port, pwfile, "chassis", "power", "status")))
            measure("ipmitool -I lanplus", "cycle", lambda: run(
                ipmitool("127.0.0.1", proxy.port, pwfile, "chassis", "power", "reset")))
        else:
            print("  ipmitool not installed: its rows are skipped")
        if shutil.which("fence_ipmilan"):
            measure("fence_ipmilan", "status", lambda: run(
                fence("127.0.0.1", proxy.port, pwscript, "status")), rounds=1)
            sim.set_power("on")
            measure("fence_ipmilan", "cycle", lambda: run(
                fence("127.0.0.1", proxy.port, pwscript, "reboot")), rounds=1)
        else:
            print("  fence_ipmilan not installed: its rows are skipped")
        two_accounts(work, sim, proxy)
    base = {a: w for t, a, w, _ in rows if t == "powerplane CLI"}
    basep = {a: p for t, a, _, p in rows if t == "powerplane CLI"}
    tool = {a: w for t, a, w, _ in rows if t == "ipmitool -I lanplus"}
    print(f"  {'tool':28} {'action':7} {'wall s':>8} {'x CLI':>7} {'x ipmitool':>10} "
          f"{'UDP pkts':>9} {'x CLI':>7}")
    for name, action, wall, pk in rows:
        ratio = f"{wall / tool[action]:10.2f}" if action in tool else f"{'-':>10}"
        print(f"  {name:28} {action:7} {wall:8.3f} {wall / base[action]:7.2f} {ratio} "
              f"{pk:9d} {pk / basep[action]:7.2f}")


def two_accounts(work: Path, sim: IpmiSim, proxy: UdpProxy) -> None:
    """Two IPMI accounts on one BMC at once, against each alone."""
    import threading

    from powerplane_ipmi.channel import IpmiChannel
    from powerplane_ipmi.config import IpmiConfig

    users = ("oper", "admin")
    cfgs = {u: IpmiConfig(username=u, password={"file": str(sim.secret_file(u))})
            for u in users}

    def read(user: str) -> None:
        ch = IpmiChannel("bmc", cfgs[user])
        ch.read_power_state(proxy.address)
        ch.close()

    alone = {u: sorted(timed(lambda u=u: read(u)) for _ in range(3))[1]  # type: ignore[misc]
             for u in users}
    both = []
    for _ in range(3):
        threads = [threading.Thread(target=read, args=(u,)) for u in users]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        both.append(time.perf_counter() - t0)
    print(f"  two accounts, in process: each alone {alone['oper']:.3f} / {alone['admin']:.3f} s,"
          f" both at once {sorted(both)[1]:.3f} s")
    env = cached_env(work)
    paths = []
    for u in users:
        doc = deployment([proxy.address], sim.secret_file(u))
        doc["channels"]["bmc"]["username"] = u
        path = work / f"two-{u}.yaml"
        path.write_text(yaml.safe_dump(doc))
        paths.append(path)

    def cli(path: Path) -> list[str]:
        return [sys.executable, "-m", "powerplane.cli", "--config", str(path), "state", "n0"]

    solo = [sorted(timed(lambda p=p: run_env(cli(p), env)) for _ in range(3))[1]  # type: ignore[misc]
            for p in paths]
    together = []
    for _ in range(3):
        t0 = time.perf_counter()
        procs = [subprocess.Popen(cli(p), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for p in paths]
        codes = [p.wait(timeout=120) for p in procs]
        together.append(time.perf_counter() - t0)
        if any(codes):
            raise RuntimeError(f"two accounts at once: exit codes {codes}")
    print(f"  two accounts, two CLI processes: each alone {solo[0]:.3f} / {solo[1]:.3f} s, "
          f"both at once {sorted(together)[1]:.3f} s (the processes also share the CPU cores)")
    both_doc = {
        "channels": {u: {"type": "ipmi", "username": u,
                         "password": {"file": str(sim.secret_file(u))}} for u in users},
        "nodes": {u: {"channels": [{"channel": u, "target": proxy.address}]} for u in users},
        "limits": {"timeout_s": 30},
    }
    both_path = work / "two-accounts.yaml"
    both_path.write_text(yaml.safe_dump(both_doc))
    one = [sys.executable, "-m", "powerplane.cli", "--config", str(both_path), "state"]
    walls = {label: sorted(timed(lambda a=args: run_env([*one, *a], env))  # type: ignore[misc]
                           for _ in range(5))
             for label, args in (("oper alone", ["oper"]), ("both", ["oper", "admin"]))}
    print(f"  two accounts, one CLI process (state oper admin): {walls['both'][2]:.3f} s "
          f"(worst of 5 {walls['both'][-1]:.3f} s); one account {walls['oper alone'][2]:.3f} s")


def fanout(work: Path, n: int) -> None:
    print(f"== fan-out over {n} ipmi_sim instances")
    sims = [IpmiSim(work / f"f{i}", passwords={"oper": "pp-bench-oper", "usr": "pp-bench-u",
                                               "admin": "pp-bench-a"}) for i in range(n)]
    try:
        t0 = time.perf_counter()
        for s in sims:
            s.start()
        print(f"  started {n} ipmi_sim in {time.perf_counter() - t0:.1f} s")
        pwfile = sims[0].secret_file("oper")
        nodes = [f"n{i}" for i in range(n)]

        async def ours() -> tuple[float, float, float]:
            t0 = time.perf_counter()
            async with PowerHost(parse_config(deployment([s.address for s in sims], pwfile))
                                 ) as host:
                t1 = time.perf_counter()
                readings = await asyncio.gather(*(host.read_power_state(x) for x in nodes))
                t2 = time.perf_counter()
                results = await host.invoke_many(nodes, Verb.REBOOT, reason="bench fan-out")
                t3 = time.perf_counter()
            bad = [r for r in readings if r.state.value != "on"]
            failed = [r for r in results if getattr(r, "error", None)]
            if bad or failed:
                raise RuntimeError(f"fan-out: {len(bad)} bad readings, {len(failed)} failures")
            return t1 - t0, t2 - t1, t3 - t2

        discover, status, cycle = asyncio.run(ours())
        print(f"  PowerHost: discovery (sessions opened) {discover:.2f} s, status of all "
              f"{status:.2f} s, power cycle of all {cycle:.2f} s")
        if not shutil.which("ipmitool"):
            print("  ipmitool not installed: the baselines are skipped")
            return
        actions = {"status": ["chassis", "power", "status"],
                   "cycle": ["chassis", "power", "reset"]}
        for action, cmd in actions.items():
            loop = timed(lambda cmd=cmd: _loop(sims, pwfile, cmd))  # type: ignore[misc]
            xargs = timed(lambda cmd=cmd: _xargs(sims, pwfile, cmd))  # type: ignore[misc]
            ours_s = status if action == "status" else cycle
            ours_total = ours_s + discover
            print(f"  {action:6}: ipmitool loop {loop:.2f} s, xargs -P 8 {xargs:.2f} s; "
                  f"PowerHost {ours_s:.2f} s (with discovery {ours_total:.2f} s): "
                  f"{loop / ours_s:.1f}x the loop ({loop / ours_total:.1f}x with discovery), "
                  f"{xargs / ours_s:.1f}x xargs ({xargs / ours_total:.1f}x with discovery)")
    finally:
        for s in sims:
            s.stop()


def _loop(sims: list[IpmiSim], pwfile: Path, cmd: list[str]) -> None:
    for s in sims:
        run(ipmitool("127.0.0.1", s.port, pwfile, *cmd))


def _xargs(sims: list[IpmiSim], pwfile: Path, cmd: list[str]) -> None:
    argv = ["xargs", "-P", "8", "-I", "{}", "ipmitool", "-I", "lanplus", "-C", "3", "-H",
            "127.0.0.1", "-p", "{}", "-U", "oper", "-f", str(pwfile), "-L", "OPERATOR", *cmd]
    subprocess.run(argv, input="\n".join(str(s.port) for s in sims) + "\n", text=True,
                   capture_output=True, check=True, timeout=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fanout", type=int, default=50, help="ipmi_sim instances (50)")
    args = parser.parse_args()
    if shutil.which("ipmi_sim") is None:
        print("ipmi_sim is not installed (Debian package openipmi): nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="pp-bench-ipmi-") as tmp:
        single(Path(tmp))
        fanout(Path(tmp), args.fanout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
