"""Direct BMC channels for hosts a BareMetalHost manages: refused (exit 2) naming the
BareMetalHost, where a metal3 channel says where BareMetalHosts are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from metal3_peers import channel_config, metal3_cluster

from powerplane import ConfigError, parse_config
from powerplane_kubernetes.metal3.guard import managed_conflicts, refuse_managed
from powerplane_kubernetes.metal3.hosts import BmcEndpoint, bmc_endpoint

pytestmark = pytest.mark.timeout(120)

PASSWORD = {"env": "BMC_PASSWORD"}


def _deployment(kubeconfig: Path | None) -> dict[str, Any]:
    channels: dict[str, Any] = {
        "bench-bmc": {"type": "redfish", "endpoint": "https://192.0.2.10",
                      "username": "admin", "password": PASSWORD},
        "other-bmc": {"type": "redfish", "endpoint": "https://192.0.2.99:8443",
                      "username": "admin", "password": PASSWORD},
        "fleet-ipmi": {"type": "ipmi", "username": "admin", "password": PASSWORD},
    }
    if kubeconfig is not None:
        channels["m3"] = channel_config(kubeconfig)
    return {
        "channels": channels,
        "nodes": {
            "a": {"channels": [{"channel": "bench-bmc"}]},
            "b": {"channels": [{"channel": "fleet-ipmi", "target": "192.0.2.20"}]},
            "c": {"channels": [{"channel": "fleet-ipmi", "target": "192.0.2.20:6231"}]},
        },
    }


def test_a_direct_channel_to_a_managed_bmc_is_refused_naming_the_host(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo):
        bmo.add_host("metal3", "h0", bmc="redfish+https://192.0.2.10/redfish/v1/Systems/1")
        bmo.add_host("metal3", "h1", bmc="ipmi://192.0.2.20")
        bmo.add_host("metal3", "h2", bmc="ipmi://192.0.2.21:6230")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        deployment = parse_config(_deployment(kubeconfig))
        with pytest.raises(ConfigError) as raised:
            refuse_managed(deployment)
        problems = {p.path: p.message for p in raised.value.problems}
        assert set(problems) == {"channels.bench-bmc.endpoint", "nodes.b.channels.0.target"}
        assert "BareMetalHost metal3/h0 (spec.bmc.address redfish+https://192.0.2.10" in \
            problems["channels.bench-bmc.endpoint"]
        assert "use a metal3 channel with target metal3/h1" in \
            problems["nodes.b.channels.0.target"]
        assert raised.value.exit_code == 2
        # the same from the command line: exit 2, each problem named
        path = tmp_path / "powerplane.yaml"
        path.write_text(yaml.safe_dump(_deployment(kubeconfig)), encoding="utf-8")
        run = subprocess.run([sys.executable, "-m", "powerplane_kubernetes.metal3.guard",
                              "--config", str(path)], capture_output=True, text=True,
                             timeout=60, check=False)
        assert run.returncode == 2, run.stderr
        assert "metal3/h0" in run.stderr and "metal3/h1" in run.stderr


def test_without_a_metal3_channel_nothing_is_asked(tmp_path: Path) -> None:
    refuse_managed(parse_config(_deployment(None)))  # no cluster named: no refusal


@pytest.mark.parametrize(("bmc", "theirs"), [
    ("ipmi://192.0.2.1:6230", BmcEndpoint("192.0.2.1", 6230)),
    ("ipmi://bmc.example.", BmcEndpoint("bmc.example", 623)),
    ("192.0.2.1", BmcEndpoint("192.0.2.1", None)),
    ("redfish://Bmc.Example/redfish/v1/Systems/1", BmcEndpoint("bmc.example", 443)),
    ("redfish+http://192.0.2.1:8000/redfish/v1/Systems/x", BmcEndpoint("192.0.2.1", 8000)),
    ("idrac-virtualmedia://192.0.2.1/redfish/v1/Systems/System.Embedded.1",
     BmcEndpoint("192.0.2.1", 443)),
    ("redfish+https://[2001:db8::1]:8443/redfish/v1/Systems/1", BmcEndpoint("2001:db8::1", 8443)),
])
def test_bmc_addresses(bmc: str, theirs: BmcEndpoint) -> None:
    got = bmc_endpoint(bmc, kind=None if "://" in bmc else "ipmi")
    if theirs.port is None:
        assert got == BmcEndpoint(theirs.host, 623)
    else:
        assert got == theirs


def test_a_port_tells_bmcs_on_one_host_apart() -> None:
    deployment = parse_config(_deployment(None))
    hosts: list[dict[str, Any]] = [{"metadata": {"namespace": "m", "name": "x"},
              "spec": {"bmc": {"address": "redfish+https://192.0.2.99:8444/redfish/v1"}}}]
    assert managed_conflicts(deployment, hosts) == []
    hosts[0]["spec"]["bmc"]["address"] = "redfish+https://192.0.2.99:8443/redfish/v1"
    (problem,) = managed_conflicts(deployment, hosts)
    assert problem.path == "channels.other-bmc.endpoint"
