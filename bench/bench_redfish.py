"""Benchmarks of the redfish channel against the sushy-tools emulator (TLS, basic auth).

1. HTTP requests per steady-state verb, counted at the emulator, against the naive sushy
   script (``Sushy()``, ``get_system``, ``reset_system``, ``refresh``). Target: 1 per verb.
2. Reset (reboot) of N emulated systems (default 200) through ``PowerHost.invoke_many``
   against a sequential sushy loop (``get_system`` + ``reset_system`` per system, one root),
   in the same run: wall-time ratio. Target: at least 2x faster.

Starts its own emulator (the sushy-tools app, fake driver, power changes applied at once)
on a free loopback port with a generated CA and a bcrypt-4 htpasswd. Prints each figure and
its ratio to the baseline; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import sushy
from sushy import auth as sushy_auth

from powerplane import PowerHost, Verb, parse_config
from powerplane_redfish.testing.emulator import SushyEmulator

PASSWORD_ENV = "PP_BENCH_REDFISH_PASSWORD"


def channel_cfg(emu: SushyEmulator) -> dict[str, Any]:
    return {
        "type": "redfish",
        "endpoint": emu.endpoint,
        "username": emu.username,
        "password": {"env": PASSWORD_ENV},
        "verify": str(emu.tls.ca),
        "auth": "basic",
    }


def naive_requests_per_verb(emu: SushyEmulator, path: str, rounds: int) -> float:
    """The naive script, counted at the emulator."""
    emu.reset_count()
    for _ in range(rounds):
        root = sushy.Sushy(
            emu.endpoint,
            auth=sushy_auth.BasicAuth(emu.username, emu.password),
            verify=str(emu.tls.ca),
        )
        system = root.get_system(path)
        system.reset_system(sushy.ResetType.ON)
        system.refresh()
    return len(emu.requests()) / rounds


async def ours_requests_per_verb(emu: SushyEmulator, path: str, rounds: int) -> float:
    cfg = {
        "channels": {"bmc": channel_cfg(emu)},
        "nodes": {"n1": {"channels": [{"channel": "bmc", "target": path}]}},
    }
    async with PowerHost(parse_config(cfg)) as host:  # discovery happens here
        emu.reset_count()
        for _ in range(rounds):
            await host.invoke("n1", Verb.POWER_ON, reason="bench")
        return len(emu.requests()) / rounds


def sequential_loop(emu: SushyEmulator, paths: list[str]) -> float:
    root = sushy.Sushy(
        emu.endpoint,
        auth=sushy_auth.BasicAuth(emu.username, emu.password),
        verify=str(emu.tls.ca),
    )
    start = time.perf_counter()
    for path in paths:
        root.get_system(path).reset_system(sushy.ResetType.GRACEFUL_RESTART)
    return time.perf_counter() - start


async def invoke_many(
    emu: SushyEmulator, paths: list[str], per_endpoint: int
) -> tuple[float, float, int]:
    nodes = {
        f"n{i:03d}": {"channels": [{"channel": "bmc", "target": p}]} for i, p in enumerate(paths)
    }
    cfg = {
        "channels": {"bmc": channel_cfg(emu)},
        "nodes": nodes,
        "limits": {"per_endpoint": per_endpoint, "timeout_s": 120},
    }
    start = time.perf_counter()
    async with PowerHost(parse_config(cfg)) as host:
        discovered = time.perf_counter() - start
        emu.reset_count()
        start = time.perf_counter()
        results = await host.invoke_many(list(nodes), Verb.REBOOT, reason="bench")
        elapsed = time.perf_counter() - start
        failures = sum(1 for r in results.values() if isinstance(r, Exception))
        if failures:
            first = next(r for r in results.values() if isinstance(r, Exception))
            print(f"  {failures} failures, first: {first}")
        posts = sum(1 for m, _ in emu.requests() if m == "POST")
    return elapsed, discovered, posts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-endpoint", type=int, default=4, help="limits.per_endpoint")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-redfish-") as tmp:
        emu = SushyEmulator(Path(tmp), systems=args.systems)
        os.environ[PASSWORD_ENV] = emu.password
        with emu:
            first = emu.system_paths[0]
            naive = naive_requests_per_verb(emu, first, args.rounds)
            ours = asyncio.run(ours_requests_per_verb(emu, first, args.rounds))
            print("1. HTTP requests per steady-state verb (counted at the emulator)")
            print(f"   naive sushy script: {naive:.2f} requests/verb")
            print(f"   powerplane-redfish: {ours:.2f} requests/verb (target 1)")
            print(f"   ratio naive/ours:   {naive / ours:.2f}x fewer requests")

            paths = emu.system_paths
            seq = sequential_loop(emu, paths)
            ours_t, discovery, posts = asyncio.run(
                invoke_many(emu, paths, args.per_endpoint)
            )
            print(f"2. Reboot of {len(paths)} emulated systems (TLS + basic auth)")
            print(f"   sequential sushy loop:  {seq:.2f} s")
            print(f"   invoke_many (per_endpoint={args.per_endpoint}): {ours_t:.2f} s "
                  f"({posts} POSTs; discovery at host start took {discovery:.2f} s, "
                  "not counted)")
            print(f"   ratio sequential/invoke_many: {seq / ours_t:.2f}x faster (target >= 2x)")
            total = ours_t + discovery
            print(f"   with discovery counted too: {total:.2f} s, ratio {seq / total:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
