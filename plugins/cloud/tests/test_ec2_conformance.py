"""The conformance suite against the ``ec2`` channel on moto (credentials checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cloud_peers import AMI, Moto, ec2_channel_config

from powerplane_conformance.api import run_suite

OP_KEY_ENV = "PP_CLOUD_TEST_OPERATOR_KEY"
OP_SECRET_ENV = "PP_CLOUD_TEST_OPERATOR_SECRET"


@pytest.mark.slow  # its silent-server check waits out a 1 s call timeout
def test_the_ec2_channel_passes_the_conformance_suite(
    moto_auth: Moto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert moto_auth.operator_key is not None
    key_id, secret = moto_auth.operator_key
    monkeypatch.setenv(OP_KEY_ENV, key_id)
    monkeypatch.setenv(OP_SECRET_ENV, secret)
    ec2 = moto_auth.client(aws_access_key_id=key_id, aws_secret_access_key=secret)
    ids = [i["InstanceId"] for i in ec2.run_instances(
        ImageId=AMI, MinCount=2, MaxCount=2, InstanceType="t2.micro")["Instances"]]
    channel = ec2_channel_config(moto_auth.url, access_key_id={"env": OP_KEY_ENV},
                                 secret_access_key={"env": OP_SECRET_ENV})
    target = {
        "channels": {"aws": channel},
        "nodes": {
            "cattle": {"classification": "replaceable",
                       "channels": [{"channel": "aws", "target": ids[0]}]},
            "pet": {"channels": [{"channel": "aws", "target": ids[1]}]},
        },
        "conformance": {
            "allow_destructive": True,
            "allow_terminate": True,
            "settle_timeout_s": 20,
            "repeat": 2,
            "expected_capabilities": {"aws": ["reboot", "shutdown", "power-on", "terminate"]},
            # the address (endpoint_url), the secret fields and the timeouts are the
            # channel type's declarations: no hints for them
            "negative": {"aws": {
                "timeout_s": 1.0, "unknown_target": "i-0123456789abcdef0",
            }},
        },
    }
    summary = run_suite(target, in_subprocess=True, report=tmp_path / "results.json")
    failed = [r for r in summary.data["results"] if r["outcome"] == "fail"]
    assert failed == [], [(r["id"], r["message"]) for r in failed]
    assert summary.exit_code == 0
    outcomes = {(r["id"], r["outcome"]) for r in summary.data["results"]}
    for check in ("WRONG_CREDENTIALS_REJECTED", "CLOSED_PORT_UNREACHABLE",
                  "SILENT_SERVER_TIMEOUT", "UNKNOWN_TARGET_ERROR", "SECRET_NOT_DISCLOSED",
                  "TERMINATE_READBACK", "SHUTDOWN_READBACK", "POWER_ON_READBACK"):
        assert (check, "pass") in outcomes, check
    assert ec2.describe_instances(InstanceIds=[ids[0]])["Reservations"][0]["Instances"][0][
        "State"]["Name"] == "terminated"
