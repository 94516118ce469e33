"""Boot markers of the cloud channels: none, because neither API shows a per-boot value.

Against moto's server: ``LaunchTime`` stays the same across ``RebootInstances`` (as on EC2,
where an instance reboot keeps the instance) and, in moto, across a stop/start too (EC2
moves it on start); ``StateTransitionReason`` is empty while running. A marker taken from
them would stay the same across a reboot that happened, so the channels offer none and the
host finds no marker for their nodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from cloud_peers import Moto, ec2_channel_config

from powerplane import HasBootMarker, PowerHost, Verb, parse_config
from powerplane_cloud.config import EC2Config, OpenStackConfig
from powerplane_cloud.ec2 import EC2Channel
from powerplane_cloud.openstack import OpenStackChannel


def ec2(url: str) -> EC2Channel:
    cfg = {k: v for k, v in ec2_channel_config(url).items() if k != "type"}
    return EC2Channel("aws", EC2Config.model_validate(cfg))


def described(moto: Moto, iid: str) -> dict[str, Any]:
    r = moto.client().describe_instances(InstanceIds=[iid])
    inst: dict[str, Any] = r["Reservations"][0]["Instances"][0]
    return inst


def test_ec2_launch_time_does_not_change_on_a_reboot(moto: Moto) -> None:
    """The fact the decision rests on, read from the peer the tests run."""
    (iid,) = moto.run()
    before = described(moto, iid)
    ch = ec2(moto.url)
    try:
        ch.reboot(iid)
    finally:
        ch.close()
    after = described(moto, iid)
    assert after["LaunchTime"] == before["LaunchTime"]
    assert after.get("StateTransitionReason", "") == ""


def test_ec2_has_no_boot_marker_and_asks_nothing_for_it(moto: Moto) -> None:
    (iid,) = moto.run()
    ch = ec2(moto.url)
    try:
        assert isinstance(ch, HasBootMarker)
        assert ch.boot_marker(iid) is None
        ch.reboot(iid)
        assert ch.boot_marker(iid) is None
        ch.shutdown(iid)
        ch.power_on(iid)
        assert ch.boot_marker(iid) is None
        calls = sum(ch.api_calls.values())
        assert ch.boot_marker(iid) is None
        assert sum(ch.api_calls.values()) == calls
    finally:
        ch.close()


async def test_the_host_finds_no_marker_for_an_ec2_node(moto: Moto) -> None:
    (iid,) = moto.run()
    dep = parse_config({
        "channels": {"aws": ec2_channel_config(moto.url)},
        "nodes": {"w1": {"classification": "replaceable",
                         "channels": [{"channel": "aws", "target": iid}]}},
        "limits": {"timeout_s": 60},
    })
    async with PowerHost(dep) as host:
        assert await host.boot_marker("w1") is None
        result = await host.invoke("w1", Verb.REBOOT, reason="boot marker test")
        assert result.accepted
        assert await host.boot_marker("w1") is None


async def test_openstack_has_no_boot_marker_and_asks_nothing_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PP_CLOUD_TEST_MARKER_SECRET", "never-sent-4e0b")
    ch = OpenStackChannel("os", OpenStackConfig.model_validate({
        "auth_url": "https://keystone.invalid:5000/v3",
        "auth": {"method": "application_credential", "id": "app",
                 "secret": {"env": "PP_CLOUD_TEST_MARKER_SECRET"}},
    }))
    try:
        assert isinstance(ch, HasBootMarker)
        assert await ch.boot_marker("9168b536-cd40-4630-b43f-b259807c6e87") is None
        assert sum(ch.requests.values()) == 0
    finally:
        await ch.close()
