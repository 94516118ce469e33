"""One-node CLI commands against the single-purpose tools, on the same sushy-tools system.

Side by side, in the same run, alternating (every round runs each tool once, so drift hits
all alike), medians of ``--runs`` rounds, each command a fresh process as a shell loop
would start it:

- state: ``powerplane state n0`` / ``fence_redfish -o status`` / ``redfishtool Systems get``
- power cycle: ``powerplane invoke n0 reboot`` (the channel's reboot: one
  ``GracefulRestart`` POST) / ``fence_redfish -o reboot`` (``ForceOff``, read back until off,
  ``On``: fence_redfish has no one-request cycle, its ``--method cycle`` is not wired to a
  reset) / ``redfishtool Systems reset ForceRestart`` (one POST)

and, beside them at 50 nodes, ``floor: libraries alone``: a child that only imports what
this design needs (asyncio and ssl, click, PyYAML, pluggy, pydantic with one model built
and validated, see ``FLOOR``), the lower bound no change inside powerplane goes under;

with two deployment files: 50 nodes (one per emulated system, all on the one BMC) and
10,050 nodes (the same 50 plus 10,000 simulated nodes on 100 simulated channels). Targets
(issue 35): powerplane ``state`` <= 1.8x ``fence_redfish -o status`` at 50 nodes, <= 2.0x
at 10,050, and <= 2 requests per Redfish state read (every request the emulator received during the
command: with basic authentication the channel's direct client reads no service root and
has no session to log in or out, so the figure is the discovery GET and the fresh read of
the system; the share under ``/redfish/v1/Systems/`` is printed beside it).

``--baseline /path/to/venv/bin/powerplane`` (or ``POWERPLANE_BASELINE``; e.g. a
``git worktree add /tmp/base HEAD`` with its own ``./dev install``) runs an earlier build
too, in the same rounds; ``--base DIR`` does the same with the ``powerplane`` package under
``DIR`` (an older build's ``core/src``, e.g. from ``git archive``), run by this venv's
Python with ``DIR`` first on ``PYTHONPATH`` (the plugins are this venv's).

Every tool runs with a temporary ``$XDG_CACHE_HOME`` and ``$XDG_STATE_HOME`` of the run's
own: the warm-up round fills powerplane's validated-config cache, as any earlier command on
the same file would (a build without one ignores it). The time ``load_config`` takes for
each file is measured in a child process and printed, so its share of a command is visible
(``load_config`` is the library's full load: the CLI goes through the cache).

The emulator is the sushy-tools app (fake driver) with power changes applied at the next
GET (zero delay), over TLS with basic auth. powerplane and fence_redfish verify the
emulator's certificate against its CA; redfishtool never verifies (``verify=False`` in its
transport). Credentials reach every tool through the environment, stdin or a 0600 file,
never argv. Needs ``/usr/sbin/fence_redfish`` (fence-agents) and ``redfishtool`` (PyPI) in
this venv; a missing tool is reported and skipped.

Each figure is the wall time with the process's CPU time (user + system) beside it: on a
shared machine the CPU time bends less. Bytecode is cached for every tool in a tree of the
run's own (``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` dropped), as an installed
copy has it; ``--no-pyc`` keeps the environment's setting, under which an editable install
compiles every project module again in every run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from powerplane_redfish.testing.emulator import SushyEmulator

SYSTEMS = 50
PASSWORD_ENV = "PP_BENCH_ONE_NODE_PASSWORD"
SYSTEMS_PREFIX = "/redfish/v1/Systems/"
FENCE = "/usr/sbin/fence_redfish"
TARGET_STATE = {50: 1.8, 10_050: 2.0}
FLOOR = ("import asyncio, ssl, http.client, json, click, yaml, pluggy\n"
         "from pydantic import BaseModel\n"
         "class Config(BaseModel):\n    endpoint: str\n    verify: bool | str = True\n"
         "Config.model_validate({'endpoint': 'https://bmc'})\n")
"""What any one-node command of this design imports before it does anything: the event loop
and TLS (the host's API is async), click (the CLI), PyYAML (the config format) and pluggy
(the plugins), and pydantic with one model built and used (the contract validates every
channel type's keys with its pydantic model). Timed in the same rounds as the tools: a lower
bound for ``powerplane state`` that no change inside powerplane can go under."""


@dataclass
class Tool:
    """One command line to time, with what it reads on stdin."""

    name: str
    argv: list[str]
    stdin: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """What this tool's environment adds (a base build's ``PYTHONPATH``)."""
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """User plus system CPU seconds of the process (and its children): less bent by a
    loaded machine than the wall time."""
    requests: list[int] = field(default_factory=list)
    system_requests: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def channel(emu: SushyEmulator) -> dict[str, Any]:
    return {"type": "redfish", "endpoint": emu.endpoint, "username": emu.username,
            "password": {"env": PASSWORD_ENV}, "verify": str(emu.tls.ca), "auth": "basic"}


def write_config(path: Path, emu: SushyEmulator, simulated: int) -> None:
    """50 redfish nodes n0..n49, then ``simulated`` nodes on channels of 100 machines."""
    channels: dict[str, Any] = {"bmc": channel(emu)}
    nodes: dict[str, Any] = {f"n{i}": {"channels": [{"channel": "bmc", "target": p}]}
                             for i, p in enumerate(emu.system_paths)}
    per = 100
    for c in range(0, simulated, per):
        name = f"sim{c // per}"
        machines = {f"m{i}": "on" for i in range(c, min(c + per, simulated))}
        channels[name] = {"type": "simulated", "machines": machines}
        for m in machines:
            nodes[f"s{m[1:]}"] = {"channels": [{"channel": name, "target": m}]}
    text = yaml.dump({"channels": channels, "nodes": nodes}, Dumper=_dumper(),
                     sort_keys=False)
    path.write_text(text, encoding="utf-8")


def _dumper() -> type[yaml.SafeDumper]:
    dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return dumper


def load_seconds(exe_python: str, path: Path, runs: int,
                 env: dict[str, str] | None = None) -> tuple[float, float] | None:
    """Medians of plugin discovery and of ``load_config(path)``, in a child of ``exe_python``."""
    code = ("import time, sys\n"
            "t0 = time.perf_counter()\n"
            "from powerplane.config import load_config\n"
            "from powerplane.plugins import registry\n"
            "registry()\n"
            "t1 = time.perf_counter(); load_config(sys.argv[1]); t2 = time.perf_counter()\n"
            "print(t1 - t0, t2 - t1)\n")
    found: list[tuple[float, float]] = []
    for _ in range(runs):
        proc = subprocess.run([exe_python, "-c", code, str(path)], capture_output=True,
                              text=True, check=False, env=_env(env))
        if proc.returncode != 0:
            return None
        first, second = proc.stdout.strip().splitlines()[-1].split()
        found.append((float(first), float(second)))
    return (statistics.median(f for f, _ in found), statistics.median(s for _, s in found))


_ENV: dict[str, str] = {}

_LIBRARIES = ("sushy", "requests", "urllib3", "pydantic", "yaml", "rich", "pluggy")


def loaded_libraries(exe: str, path: Path, env: dict[str, str] | None = None) -> str:
    """Which of :data:`_LIBRARIES` one ``state n0`` run of ``exe``'s build imports."""
    py = str(Path(exe).parent / "python")
    code = ("import sys\nfrom powerplane.cli import cli\n"
            "try:\n    cli.main(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
            f"{set(_LIBRARIES)!r})))\n")
    proc = subprocess.run([py, "-c", code, "--config", str(path), "state", "n0"],
                          capture_output=True, text=True, check=False, env=_env(env))
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines else f"(exit {proc.returncode})"


_DROP: set[str] = set()


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **_ENV, **(extra or {})}
    for name in _DROP:
        env.pop(name, None)
    return env


Build = tuple[str, str, dict[str, str]]
"""(label, the ``powerplane`` executable, what its environment adds)."""


def ours(builds: list[Build], config: Path, *cmd: str) -> list[Tool]:
    """``powerplane --config CONFIG CMD...`` of each build."""
    return [Tool(f"{label} {cmd[0]}", [build, "--config", str(config), *cmd], env=env)
            for label, build, env in builds]


def run_round(emu: SushyEmulator, tools: list[Tool]) -> None:
    for tool in tools:
        emu.reset_count()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(tool.argv, input=tool.stdin, capture_output=True, text=True,
                              check=False, env=_env(tool.env))
        tool.times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        tool.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        seen = emu.requests()
        tool.requests.append(len(seen))
        tool.system_requests.append(sum(1 for _, p in seen if p.startswith(SYSTEMS_PREFIX)))
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
            tool.failures.append(f"exit {proc.returncode}: {first[:200]}")


def med(values: list[float] | list[int]) -> float:
    return statistics.median(values) if values else float("nan")


def report(title: str, tools: list[Tool], reference: str, target: float | None) -> None:
    print(f"  {title}")
    ref = next((t for t in tools if t.name == reference), None)
    ref_s = med(ref.times) if ref is not None else float("nan")
    ref_cpu = med(ref.cpu) if ref is not None else float("nan")
    for tool in tools:
        s = med(tool.times)
        ratio = f"{s / ref_s:5.2f}x {reference}" if ref is not None else ""
        cpu = med(tool.cpu)
        cpu_ratio = f" ({cpu / ref_cpu:4.2f}x)" if ref is not None else ""
        print(f"    {tool.name:<34} {s * 1000:7.0f} ms  {ratio}  cpu {cpu * 1000:5.0f} ms"
              f"{cpu_ratio}  requests {med(tool.requests):.0f} "
              f"(systems {med(tool.system_requests):.0f})")
        if tool.failures:
            print(f"      {len(tool.failures)} of {len(tool.times)} runs failed; first: "
                  f"{tool.failures[0]}")
    mine = next((t for t in tools if t.name.startswith("powerplane ")), None)
    if target is not None and mine is not None and ref is not None:
        factor = med(mine.times) / ref_s
        verdict = "met" if factor <= target and not mine.failures else "NOT met"
        print(f"    target <= {target:.1f}x {reference}: {factor:.2f}x, {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds per figure (median)")
    parser.add_argument("--simulated", type=int, default=10_000)
    parser.add_argument("--baseline", default=os.environ.get("POWERPLANE_BASELINE"),
                        help="another build's powerplane executable, run in the same rounds")
    parser.add_argument("--base", help="an older build's core/src, run in the same rounds "
                        "(this venv's Python, that directory first on PYTHONPATH)")
    parser.add_argument("--no-pyc", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE as the environment has it (every "
                        "run compiles the project's sources again) instead of a bytecode "
                        "cache in the temporary directory")
    args = parser.parse_args()
    exe = shutil.which("powerplane", path=os.path.dirname(sys.executable)) or "powerplane"
    rft = shutil.which("redfishtool", path=os.path.dirname(sys.executable))
    fence = FENCE if os.access(FENCE, os.X_OK) else None
    if rft is None:
        print("redfishtool not installed in this venv (pip install redfishtool): skipped")
    if fence is None:
        print(f"{FENCE} not found (fence-agents): skipped")
    with tempfile.TemporaryDirectory(prefix="bench-one-node-") as tmp_name:
        tmp = Path(tmp_name)
        with SushyEmulator(tmp / "emulator", systems=SYSTEMS, zero_delay=True) as emu:
            return _bench(args, emu, tmp, exe, rft, fence)


def _bench(args: argparse.Namespace, emu: SushyEmulator, tmp: Path, exe: str,
           rft: str | None, fence: str | None) -> int:
    _ENV.update({PASSWORD_ENV: emu.password, "NO_COLOR": "1",
                 "REQUESTS_CA_BUNDLE": str(emu.tls.ca),  # fence_redfish verifies with it
                 "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_STATE_HOME": str(tmp / "state")})
    if not args.no_pyc:
        # as installed: a wheel's modules have their bytecode; an editable install under
        # PYTHONDONTWRITEBYTECODE compiles every project module again in every run. The
        # cache is a tree of its own (nothing written beside the sources), filled by the
        # warm-up round for every tool alike.
        _ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        _DROP.add("PYTHONDONTWRITEBYTECODE")
    path0 = emu.system_paths[0]
    rft_cfg = tmp / "redfishtool.json"
    rft_cfg.touch(mode=0o600)
    rft_cfg.write_text(json.dumps({"user": emu.username, "password": emu.password}))
    host = emu.endpoint.removeprefix("https://")
    fence_in = (f"ip=127.0.0.1\nipport={emu.port}\nusername={emu.username}\n"
                f"password={emu.password}\nssl=1\nsystems-uri={path0}\n")
    sizes = {SYSTEMS: tmp / "fifty.yaml", SYSTEMS + args.simulated: tmp / "large.yaml"}
    for size, path in sizes.items():
        write_config(path, emu, size - SYSTEMS)
    builds: list[Build] = [("powerplane", exe, {})]
    if args.baseline:
        builds.append(("powerplane (baseline)", args.baseline, {}))
    if args.base:
        path = os.environ.get("PYTHONPATH")
        builds.append(("powerplane (base)", exe, {
            "PYTHONPATH": args.base + (os.pathsep + path if path else "")}))

    print(f"one-node commands; sushy-tools emulator with {SYSTEMS} systems (zero delay, TLS, "
          f"basic auth); medians of {args.runs} rounds, each tool once per round; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (cpu: user + system "
          "time of the process, beside the wall time and its ratio); bytecode "
          + ("compiled again in every run (--no-pyc)" if args.no_pyc
             else "cached (PYTHONPYCACHEPREFIX in the temporary directory)"))
    print("before targeted discovery (issue 18's figures): state 5.0x fence_redfish -o status "
          "at 50 nodes, 29x at 10,050; power cycle 1.9x; 52 requests per state read")
    print("after targeted discovery, before the direct client (sushy): state 4.14x at 50 "
          "nodes, 6.70x at 10,050; invoke reboot 3.67x / 4.57x; 3 requests per state read")
    print("after the direct client, before lazy plugin hooks and Rich-free lines: state 2.29x "
          "at 50 nodes, power cycle 2.48x")
    for size, path in sizes.items():
        print(f"\nconfig of {size:,} nodes ({path.stat().st_size / 1e6:.1f} MB)")
        for label, build, env in builds:
            py = str(Path(build).parent / "python")
            loaded = load_seconds(py, path, 3, env) if os.access(py, os.X_OK) else None
            if loaded is not None:
                print(f"  {label}: imports and plugin discovery {loaded[0] * 1000:.0f} ms, "
                      f"then load_config {loaded[1] * 1000:.0f} ms (in one process)")

        state = ours(builds, path, "state", "n0")
        cycle = ours(builds, path, "invoke", "n0", "reboot", "--yes", "--reason",
                     "bench power cycle")
        if fence is not None:
            state.append(Tool("fence_redfish -o status", [fence], fence_in + "action=status\n"))
            cycle.append(Tool("fence_redfish -o reboot", [fence], fence_in + "action=reboot\n"))
        if size == SYSTEMS:
            state.append(Tool("floor: libraries alone", [sys.executable, "-c", FLOOR]))
        if rft is not None:
            base = [rft, "-r", host, "-S", "Always", "-A", "Basic", "-c", str(rft_cfg),
                    "Systems", "-L", path0]
            state.append(Tool("redfishtool Systems get PowerState", [*base, "get", "-P",
                                                                     "PowerState"]))
            cycle.append(Tool("redfishtool Systems reset", [*base, "reset", "ForceRestart"]))
        for tools in (state, cycle):
            run_round(emu, tools)  # warm-up: page cache, first imports; not counted
            for tool in tools:
                tool.times.clear()
                tool.cpu.clear()
                tool.requests.clear()
                tool.system_requests.clear()
                tool.failures.clear()
            for _ in range(args.runs):
                run_round(emu, tools)
        report("state of one node", state, "fence_redfish -o status", TARGET_STATE.get(size))
        report("power cycle of one node", cycle, "fence_redfish -o reboot", None)
        for label, build, env in builds[1:]:
            print(f"  libraries a state run of {label} imports: "
                  f"{loaded_libraries(build, path, env)}")
        mine = state[0]
        reads = med(mine.requests)
        print(f"  requests per Redfish state read (powerplane, all it sent): {reads:.0f} "
              f"(target <= 2: {'met' if reads <= 2 else 'NOT met'}); under "
              f"{SYSTEMS_PREFIX}: {med(mine.system_requests):.0f}")
        print(f"  libraries a state run imports: {loaded_libraries(exe, path)}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
