"""The plugin: discovery, config validation, lazy imports."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from cloud_peers import KEY_ENV, SECRET_ENV, SECRET_VALUE

from powerplane import ConfigError, parse_config
from powerplane.plugins import Registry, load_plugins


def test_the_cloud_entry_point_registers_ec2_and_openstack() -> None:
    reg = load_plugins()
    assert isinstance(reg, Registry)
    info = next(p for p in reg.plugins if p.name == "cloud")
    assert info.distribution == "powerplane-cloud"
    assert info.channel_types == ("ec2", "openstack")
    assert reg.failures == [] or all(f.name != "cloud" for f in reg.failures)


def test_plugin_discovery_imports_neither_boto3_nor_httpx() -> None:
    code = (
        "import sys\n"
        "from powerplane.plugins import load_plugins\n"
        "reg = load_plugins()\n"
        "assert 'ec2' in reg.channel_types and 'openstack' in reg.channel_types\n"
        "heavy = sorted(m for m in ('boto3', 'botocore', 'httpx') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    env = {**os.environ, "POWERPLANE_LOAD_PLUGINS": "cloud,simulated"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, env=env)
    assert out.stdout.strip() == ""


def ec2(**keys: Any) -> dict[str, Any]:
    return {"channels": {"aws": {"type": "ec2", "region": "eu-west-1", **keys}},
            "nodes": {"w": {"channels": [{"channel": "aws", "target": "i-0abc1234def567890"}]}}}


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return [str(p) for p in err.value.problems]


def test_ec2_config_accepts_the_default_credential_chain() -> None:
    dep = parse_config(ec2())
    assert dep.channels["aws"].type.name == "ec2"


def test_ec2_keys_go_together() -> None:
    (problem,) = problems(ec2(access_key_id={"env": KEY_ENV}))
    assert problem.startswith("channels.aws")
    assert "access_key_id and secret_access_key go together" in problem


def test_an_inline_secret_is_refused_and_not_echoed() -> None:
    (problem,) = problems(ec2(access_key_id={"env": KEY_ENV}, secret_access_key=SECRET_VALUE))
    assert problem.startswith("channels.aws.secret_access_key")
    assert "inline secret values are not accepted" in problem
    assert SECRET_VALUE not in problem


def test_a_bad_instance_id_names_the_node_target() -> None:
    data = ec2(access_key_id={"env": KEY_ENV}, secret_access_key={"env": SECRET_ENV})
    data["nodes"]["w"]["channels"][0]["target"] = "web-1"
    (problem,) = problems(data)
    assert problem == "nodes.w.channels[0].target: expected an EC2 instance id such as " \
                      "i-0abc1234def567890"


def test_openstack_auth_needs_a_known_method_and_one_project() -> None:
    base = {"type": "openstack", "auth_url": "https://keystone.test:5000/v3"}
    data = {"channels": {"os": {**base, "auth": {"method": "token", "id": "x"}}}}
    assert any("channels.os.auth" in p for p in problems(data))
    data = {"channels": {"os": {**base, "auth": {
        "method": "password", "username": "u", "password": {"env": SECRET_ENV}}}}}
    assert any("exactly one of project_name or project_id" in p for p in problems(data))
    data = {"channels": {"os": {**base, "auth": {
        "method": "application_credential", "id": "x", "secret": "inline"}}}}
    assert any("inline secret values are not accepted" in p for p in problems(data))


def test_an_endpoint_url_must_be_a_url() -> None:
    (problem,) = problems(ec2(endpoint_url="ec2.local"))
    assert problem.startswith("channels.aws.endpoint_url")
