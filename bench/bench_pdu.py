"""Benchmark: power-cycle 48 outlets on one simulated PDU, invoke_many vs a sequential loop.

Starts its own snmpsim (an APC rPDU2 with 48 metered outlets) on a free loopback port,
then, for each reboot delay, power-cycles the 48 nodes (one outlet each) through
``PowerHost.invoke_many`` (the channel batches every outlet into one SET per step, up to
``max_varbinds`` per request) and through a sequential ``invoke`` loop in the same run.
Prints wall time, the ratio to the sequential loop, and SNMP requests per outlet per verb.

    .venv/bin/python bench/bench_pdu.py [--outlets 48] [--delays 0,0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from powerplane import PowerHost, PowerState, Verb, parse_config
from powerplane_pdu import PROFILES, PduChannel
from powerplane_pdu.testing import SnmpSim, write_snmprec

PROFILE = "apc-rpdu2"


def deployment(port: int, community_file: Path, n: int, delay: float) -> dict[str, Any]:
    return {
        "channels": {"rack": {
            "type": "pdu", "protocol": "snmp", "profile": PROFILE, "host": "127.0.0.1",
            "port": port, "community": {"file": str(community_file)},
            "timeouts": {"connect_s": 2, "read_s": 2}, "retries": 1, "reboot_delay_s": delay,
        }},
        "nodes": {f"n{i}": {"channels": [{"channel": "rack", "target": {"outlets": [i]}}]}
                  for i in range(1, n + 1)},
        "limits": {"timeout_s": 600},
    }


async def run(port: int, community_file: Path, n: int, delay: float) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    async with PowerHost(parse_config(deployment(port, community_file, n, delay))) as host:
        channel = host.channel("rack")
        assert isinstance(channel, PduChannel)

        before = channel.requests()
        start = time.perf_counter()
        for node in nodes:
            await host.invoke(node, Verb.REBOOT, reason="bench: sequential")
        seq_s = time.perf_counter() - start
        seq_req = (channel.requests() - before) / n

        before = channel.requests()
        start = time.perf_counter()
        results = await host.invoke_many(nodes, Verb.REBOOT, reason="bench: invoke_many")
        many_s = time.perf_counter() - start
        many_req = (channel.requests() - before) / n
        failed = [k for k, v in results.items() if not hasattr(v, "accepted")]
        if failed:
            raise SystemExit(f"invoke_many failed for {failed[:5]}: {results[failed[0]]}")

        readings = [await host.read_power_state(node) for node in nodes]
        on = sum(r.state is PowerState.ON for r in readings)
        if on != n:
            raise SystemExit(f"after the cycles only {on} of {n} nodes read on")

    print(f"reboot_delay_s={delay:g}, {n} outlets, profile {PROFILE}")
    print(f"  sequential invoke loop (baseline): {seq_s:8.3f} s   ratio 1.00   "
          f"SNMP requests per outlet per verb {seq_req:.3f}")
    print(f"  invoke_many (batched)            : {many_s:8.3f} s   ratio {many_s / seq_s:.3f} "
          f"  SNMP requests per outlet per verb {many_req:.3f} "
          f"(ratio {many_req / seq_req:.3f})")
    print(f"  speed-up: {seq_s / many_s:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outlets", type=int, default=48)
    parser.add_argument("--delays", default="0,0.2",
                        help="comma-separated reboot delays in seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pdu-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        write_snmprec(data, "bench", PROFILES[PROFILE],
                      dict.fromkeys(range(1, args.outlets + 1), "on"))
        community = work / "community"
        community.write_text("bench\n")
        sim = SnmpSim(data, work, "bench-auth-key-1", "bench-priv-key-1")
        sim.start()
        try:
            for delay in (float(d) for d in args.delays.split(",")):
                asyncio.run(run(sim.port, community, args.outlets, delay))
        finally:
            sim.stop()


if __name__ == "__main__":
    main()
