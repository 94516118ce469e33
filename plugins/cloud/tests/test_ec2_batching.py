"""EC2 discovery batched: ``capabilities_batch`` counted at a proxy in front of moto's server.

Every API call passes the proxy (:mod:`powerplane_cloud.testing.throttling`, throttling
nothing here), which records each call's ``Action``: what moto's server received.
"""

from __future__ import annotations

from typing import Any

import pytest
from cloud_peers import Moto, ThrottlingProxy, ec2_channel_config, start_throttling_proxy

from powerplane import CapabilitySet, RefusedByDevice, Verb
from powerplane_cloud import EC2Channel
from powerplane_cloud.config import EC2Config
from powerplane_cloud.ec2 import DESCRIBE_IDS


@pytest.fixture
def proxy(moto: Moto) -> Any:
    counting = start_throttling_proxy(moto.url)
    yield counting
    counting.stop()


def _channel(url: str) -> EC2Channel:
    cfg = {k: v for k, v in ec2_channel_config(url).items() if k != "type"}
    return EC2Channel("aws", EC2Config.model_validate(cfg))


def _describes(proxy: ThrottlingProxy) -> int:
    return sum(1 for a in proxy.seen if a.startswith("Describe"))


@pytest.mark.perf
@pytest.mark.slow
def test_discovery_of_500_instances_is_one_call(moto: Moto, proxy: ThrottlingProxy) -> None:
    ids = moto.run(500)
    ch = _channel(proxy.url)
    try:
        caps = ch.capabilities_batch(ids)
    finally:
        ch.close()
    assert all(isinstance(c, CapabilitySet) and c.advertises(Verb.REBOOT) for c in caps)
    assert proxy.seen.count("DescribeInstances") == 1
    assert _describes(proxy) <= -(-len(ids) // DESCRIBE_IDS)


@pytest.mark.perf
@pytest.mark.slow
def test_discovery_of_2500_instances_is_one_call_per_1000_ids(
    moto: Moto, proxy: ThrottlingProxy,
) -> None:
    ids = [i for _ in range(5) for i in moto.run(500)]
    ch = _channel(proxy.url)
    try:
        caps = ch.capabilities_batch(ids)
    finally:
        ch.close()
    assert len(caps) == 2500 and all(isinstance(c, CapabilitySet) for c in caps)
    assert _describes(proxy) <= 3  # ceil(2500 / 1000); every page read


def test_each_instance_is_judged_from_its_own_state(moto: Moto, proxy: ThrottlingProxy) -> None:
    running, gone = moto.run(2)
    moto.client().terminate_instances(InstanceIds=[gone])
    unknown = "i-0123456789abcdef0"
    ch = _channel(proxy.url)
    try:
        caps = ch.capabilities_batch([running, unknown, gone, running])
    finally:
        ch.close()
    assert isinstance(caps[0], CapabilitySet) and caps[0].advertises(Verb.SHUTDOWN)
    assert isinstance(caps[1], RefusedByDevice) and unknown in str(caps[1])
    assert isinstance(caps[2], CapabilitySet) and not caps[2].advertises(Verb.POWER_ON)
    assert f"instance {gone} is" in caps[2].detail
    assert caps[3] == caps[0]
    assert _describes(proxy) == 1  # the unknown id does not fail the call for the others


@pytest.mark.perf
def test_one_at_a_time_discovery_is_one_call_per_instance(
    moto: Moto, proxy: ThrottlingProxy,
) -> None:
    """What the host's per-target discovery costs today (the baseline of the batch)."""
    ids = moto.run(20)
    ch = _channel(proxy.url)
    try:
        for i in ids:
            ch.capabilities(i)
    finally:
        ch.close()
    assert _describes(proxy) >= 20
