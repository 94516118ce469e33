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


@pytest.mark.perf
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
    assert out.stdout.strip() == "", f"perf (plugin load): imported {out.stdout.strip()}"


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


@pytest.mark.perf
def test_the_package_exports_lazily_and_imports_no_library() -> None:
    code = (
        "import sys, powerplane_cloud, powerplane_cloud.plugin, powerplane_cloud.testing\n"
        "names = dir(powerplane_cloud)\n"
        "assert 'EC2Channel' in names and 'map_error' in names, names\n"
        "assert powerplane_cloud.EC2Config.__name__ == 'EC2Config'\n"
        "heavy = sorted(m for m in ('boto3', 'botocore', 'httpx', 'respx') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "", f"perf (plugin load): imported {out.stdout.strip()}"


def test_the_source_imports_only_the_public_core() -> None:
    import ast
    from pathlib import Path

    import powerplane
    import powerplane_cloud

    root = Path(powerplane_cloud.__file__).parent
    bad = []
    for file in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "powerplane":
                bad += [f"{file.name}: {a.name}" for a in node.names
                        if a.name not in powerplane.__all__]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "powerplane.") and not (node.module or "").startswith("powerplane.testing"):
                bad.append(f"{file.name}: {node.module}")
    assert bad == []
    assert {p.name for p in root.iterdir()} >= {
        "__init__.py", "plugin.py", "config.py", "channel.py", "errors.py", "peer.py",
        "testing", "py.typed"}


def test_the_demo_peer_starts_moto_with_four_instances_and_stops_it(tmp_path: Any) -> None:
    from powerplane_cloud.peer import PEER

    started = PEER.start(tmp_path)
    try:
        assert len(started.targets) == 4 and started.pids
        assert started.config["endpoint_url"].startswith("http://127.0.0.1:")
        dep = parse_config({"channels": {"aws": started.config},
                            "nodes": {"w": {"channels": [{"channel": "aws",
                                                          "target": started.targets[0]}]}}})
        assert dep.channels["aws"].type.name == "ec2"
    finally:
        started.stop()
    with pytest.raises(OSError):
        import urllib.request
        urllib.request.urlopen(f"{started.config['endpoint_url']}/moto-api/", timeout=2)
