"""Direct BMC channels for hosts a BareMetalHost manages: refused (exit 2) naming the
BareMetalHost, where a metal3 channel says where BareMetalHosts are: by the guard alone, by
``powerplane check`` and by ``PowerHost.start`` (so ``powerplane invoke``) before any power
request; no request without a metal3 channel; an API server that cannot be asked is exit 1
under ``check`` and a warning at a host's start."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from metal3_peers import channel_config, metal3_cluster

from powerplane import ConfigError, PowerHost, load_config, parse_config
from powerplane.testing import JsonHttpServer, closed_port
from powerplane_metal3.guard import managed_conflicts, refuse_managed
from powerplane_metal3.hosts import BmcEndpoint, bmc_endpoint

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
        run = subprocess.run([sys.executable, "-m", "powerplane_metal3.guard",
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


# -- wired in: powerplane check, PowerHost.start (and so invoke), the plugins listing --------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "BMC_PASSWORD": "not-a-real-password", **(env or {})}
    full.pop("POWERPLANE_LOAD_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "powerplane.cli", *args], capture_output=True,
                          text=True, env=full, timeout=60, check=False)


def _direct(bmc: JsonHttpServer, metal3: dict[str, Any] | None) -> dict[str, Any]:
    """A redfish channel to ``bmc`` (node a) beside a metal3 channel (node h), when given."""
    channels: dict[str, Any] = {
        "bench-bmc": {"type": "redfish", "endpoint": f"http://127.0.0.1:{bmc.port}",
                      "username": "admin", "password": PASSWORD}}
    nodes: dict[str, Any] = {"a": {"channels": [{"channel": "bench-bmc"}]}}
    if metal3 is not None:
        channels["m3"] = metal3
        nodes["h"] = {"channels": [{"channel": "m3", "target": "metal3/h1"}]}
    return {"channels": channels, "nodes": nodes}


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_powerplane_check_refuses_a_direct_channel_to_a_managed_bmc(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo), JsonHttpServer() as bmc:
        bmo.add_host("metal3", "h0", bmc=f"redfish+http://127.0.0.1:{bmc.port}/redfish/v1/Systems/1")
        bmo.add_host("metal3", "h1", bmc="ipmi://192.0.2.21")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", client="powerplane")
        path = _write(tmp_path / "powerplane.yaml", _direct(bmc, channel_config(kubeconfig)))
        load_config(path)  # loading stays offline: no request, no refusal
        assert api.requests == []
        run = _cli("check", "--config", str(path))
        assert run.returncode == 2, run.stderr
        assert f"invalid config {path}: 1 problem(s)" in run.stderr
        assert "channels.bench-bmc.endpoint (line 4): channel bench-bmc (redfish) reaches " \
            f"http://127.0.0.1:{bmc.port}, the BMC of BareMetalHost metal3/h0" in run.stderr
        assert "use a metal3 channel with target metal3/h0" in run.stderr
        assert [str(r) for r in api.requests] == [
            "GET /apis/metal3.io/v1alpha1/namespaces/metal3/baremetalhosts"]
        assert bmc.requests == []  # the BMC was never asked
        # the same deployment without the direct channel: checked, exit 0
        good = _direct(bmc, channel_config(kubeconfig))
        del good["channels"]["bench-bmc"], good["nodes"]["a"]
        run = _cli("check", "--config", str(_write(tmp_path / "good.yaml", good)))
        assert run.returncode == 0, run.stderr


async def test_a_host_refuses_to_start_before_any_power_request(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo), JsonHttpServer() as bmc:
        bmo.add_host("metal3", "h0", bmc=f"redfish+http://127.0.0.1:{bmc.port}")
        bmo.add_host("metal3", "h1", bmc="ipmi://192.0.2.21")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", client="powerplane")
        data = _direct(bmc, channel_config(kubeconfig))
        os.environ["BMC_PASSWORD"] = "not-a-real-password"
        try:
            host = PowerHost(parse_config(data))
            with pytest.raises(ConfigError) as raised:
                async with host:
                    pytest.fail("started")
        finally:
            del os.environ["BMC_PASSWORD"]
        (problem,) = raised.value.problems
        assert problem.path == "channels.bench-bmc.endpoint"
        assert "BareMetalHost metal3/h0" in problem.message
        assert raised.value.exit_code == 2
        path = _write(tmp_path / "powerplane.yaml", data)
        run = _cli("invoke", "a", "power-on", "--yes", "--reason", "test", "--config", str(path))
        assert run.returncode == 2, run.stderr
        assert "channels.bench-bmc.endpoint" in run.stderr and "metal3/h0" in run.stderr
        assert bmc.requests == []  # no power request, no login: refused before any channel
        assert not api.writes()


def test_without_a_metal3_channel_no_request_is_made(tmp_path: Path) -> None:
    """$KUBECONFIG reaches a cluster whose BareMetalHost manages the BMC, but the deployment
    names no cluster (no metal3 channel): check and start ask nothing (see the README)."""
    with metal3_cluster() as (api, bmo), JsonHttpServer() as bmc:
        bmo.add_host("metal3", "h0", bmc=f"redfish+http://127.0.0.1:{bmc.port}")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", client="powerplane")
        path = _write(tmp_path / "powerplane.yaml", _direct(bmc, None))
        run = _cli("check", "--config", str(path), env={"KUBECONFIG": str(kubeconfig)})
        assert run.returncode == 0, run.stderr
        os.environ["BMC_PASSWORD"] = "not-a-real-password"
        try:

            async def start() -> None:
                async with PowerHost(load_config(path)):
                    pass

            asyncio.run(start())
        finally:
            del os.environ["BMC_PASSWORD"]
        assert api.requests == []


def test_an_api_server_that_cannot_be_asked_is_not_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``powerplane check`` exits 1 with the reason (never 0, never 2); a host's start warns
    and goes on."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
        "users": [{"name": "u", "user": {}}]}), encoding="utf-8")
    with JsonHttpServer() as bmc:
        path = _write(tmp_path / "powerplane.yaml", _direct(bmc, channel_config(kubeconfig)))
        run = _cli("check", "--config", str(path))
        assert run.returncode == 1, run.stderr
        assert "channel 'm3': listing BareMetalHosts for the metal3.guard deployment check " \
            "(the redfish, ipmi and pdu channels are not checked): ConnectError" in run.stderr

        async def start() -> None:
            async with PowerHost(load_config(path)) as host:
                assert host.channel("bench-bmc") is not None

        monkeypatch.setenv("BMC_PASSWORD", "not-a-real-password")
        with caplog.at_level(logging.WARNING, logger="powerplane.host"):
            asyncio.run(start())
        (record,) = [r for r in caplog.records if r.name == "powerplane.host"]
        assert "the deployment checks could not run" in record.getMessage()
        assert "metal3.guard" in record.getMessage()


def test_the_plugins_listing_names_the_check() -> None:
    run = _cli("plugins", "-o", "json")
    assert run.returncode == 0, run.stderr
    found = {p["name"]: p["deployment_checks"] for p in json.loads(run.stdout)["plugins"]}
    assert found["metal3"] == ["metal3.guard"]
    assert found["kubernetes"] == []
    assert "deployment check metal3.guard (plugin metal3)" in _cli("plugins").stdout
