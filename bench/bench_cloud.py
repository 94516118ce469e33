"""Stop then start 500 EC2 instances: ``invoke_many`` against a sequential boto3 loop.

Both run against the same moto server (:func:`powerplane_cloud.peer.start_moto`, on a free
loopback port) in the same run. The baseline is the loop an operator would write: one
``StopInstances`` call per instance, then one ``StartInstances`` call per instance. powerplane's
``invoke_many`` groups the nodes of the ``ec2`` channel into ``invoke_batch`` calls
(``batch_size`` ids per API call, each batch read first with one ``DescribeInstances``).
Printed: wall time of each (best of two alternated rounds) and their ratio, API calls
of each and their ratio.
Discovery (entering ``PowerHost``) is timed separately and not part of the ratio.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3

from powerplane import InvokeResult, PowerHost, Verb, parse_config
from powerplane_cloud.ec2 import EC2Channel
from powerplane_cloud.peer import AMI, REGION, start_moto

INSTANCES = 500
ROUNDS = 2


def states(client: Any, ids: list[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for page in client.get_paginator("describe_instances").paginate(InstanceIds=ids):
        for res in page["Reservations"]:
            for inst in res["Instances"]:
                out[inst["State"]["Name"]] += 1
    return out


def baseline(client: Any, ids: list[str]) -> tuple[float, int]:
    calls = Counter[str]()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name] += 1

    client.meta.events.register("before-call.ec2", count)
    t0 = time.perf_counter()
    for iid in ids:
        client.stop_instances(InstanceIds=[iid])
    for iid in ids:
        client.start_instances(InstanceIds=[iid])
    wall = time.perf_counter() - t0
    client.meta.events.unregister("before-call.ec2", count)
    return wall, sum(calls.values())


async def powerplane_run(url: str, ids: list[str]) -> tuple[float, int, float]:
    cfg = {
        "channels": {"aws": {"type": "ec2", "region": REGION, "endpoint_url": url,
                             "access_key_id": {"env": "BENCH_AWS_KEY"},
                             "secret_access_key": {"env": "BENCH_AWS_SECRET"}}},
        "nodes": {f"n{i}": {"classification": "replaceable",
                            "channels": [{"channel": "aws", "target": iid}]}
                  for i, iid in enumerate(ids)},
        "limits": {"timeout_s": 120},
    }
    t0 = time.perf_counter()
    async with PowerHost(parse_config(cfg)) as host:
        discovery = time.perf_counter() - t0
        channel = host.channel("aws")
        assert isinstance(channel, EC2Channel)
        channel.api_calls.clear()
        nodes = list(host.nodes)
        t0 = time.perf_counter()
        stopped = await host.invoke_many(nodes, Verb.SHUTDOWN, reason="bench")
        started = await host.invoke_many(nodes, Verb.POWER_ON, reason="bench")
        wall = time.perf_counter() - t0
        bad = [n for r in (stopped, started) for n, v in r.items()
               if not isinstance(v, InvokeResult)]
        if bad:
            raise SystemExit(f"{len(bad)} nodes failed, e.g. {stopped.get(bad[0])}")
        return wall, sum(channel.api_calls.values()), discovery


def main() -> None:
    os.environ.setdefault("BENCH_AWS_KEY", "testing")
    os.environ.setdefault("BENCH_AWS_SECRET", "testing")
    with tempfile.TemporaryDirectory() as tmp:
        moto = start_moto(Path(tmp))
        url = moto.url
        try:
            client = boto3.client("ec2", region_name=REGION, endpoint_url=url,
                                  aws_access_key_id="testing",
                                  aws_secret_access_key="testing")
            ids = [i["InstanceId"] for i in client.run_instances(
                ImageId=AMI, MinCount=INSTANCES, MaxCount=INSTANCES)["Instances"]]
            base_walls, ours_walls = [], []
            for _ in range(ROUNDS):  # alternated, so both see the same machine load
                base_wall, base_calls = baseline(client, ids)
                assert states(client, ids) == {"running": INSTANCES}
                base_walls.append(base_wall)
                ours_wall, ours_calls, discovery = asyncio.run(powerplane_run(url, ids))
                assert states(client, ids) == {"running": INSTANCES}
                ours_walls.append(ours_wall)
            base_wall, ours_wall = min(base_walls), min(ours_walls)
        finally:
            moto.stop()
    print(f"stop then start of {INSTANCES} EC2 instances (moto server, loopback)")
    print(f"sequential boto3 loop (best of {ROUNDS}): {base_wall:.2f} s, {base_calls} API calls")
    print(f"invoke_many, ec2 invoke_batch (best of {ROUNDS}): {ours_wall:.2f} s, "
          f"{ours_calls} API calls "
          f"(discovery before it: {discovery:.2f} s)")
    print(f"wall-time ratio (loop / invoke_many): {base_wall / ours_wall:.1f}x faster")
    print(f"API-call ratio (loop / invoke_many): {base_calls / ours_calls:.1f}x fewer "
          f"({ours_calls} vs {base_calls})")


if __name__ == "__main__":
    main()
