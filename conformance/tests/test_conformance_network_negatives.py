"""The network negatives (closed port, silent server, wrong credentials) run on every
in-tree backend and the ``new-plugin`` template with no ``negative:`` hints at all: the
suite derives them from each channel type's declared address (and its transport), its
``SecretRef`` fields and its ``Timeouts`` field.

Each backend runs on the real peer the repository already uses (sushy-tools, snmpsim, a
Redfish PDU on DMTF's public-pdu mockup, the Talos mock over gRPC and through the
talosctl stand-in, moto with IAM authentication on, ipmi_sim, the template's stand-in
device), read-only and limited to the network negatives, so each run is short. Every
one of those checks must have run: PASS, or XFAIL where the peer declares the defect
(SNMPv2c cannot tell a wrong community from silence; SNMP over UDP reports a closed port
as silence); never NOT TESTED.
"""

from __future__ import annotations

import importlib
import json
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from powerplane_conformance.api import run_suite

NETWORK = ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT", "WRONG_CREDENTIALS_REJECTED")
ONLY_NETWORK = "closed_port_unreachable or silent_server_timeout or wrong_credentials_rejected"


@dataclass
class Backend:
    """A started peer: the channel config (no hints anywhere), two targets, how to stop."""

    channel: dict[str, Any]
    targets: list[Any]
    stop: Callable[[], None]
    xfail: dict[str, str] = field(default_factory=dict)
    verbs_to_fakes: bool = False
    """The channel cannot see power off, so it reads the fakes as unknown, as it must: the
    checks send a verb to the fake instead, which the target must allow (destructive)."""


def _secret(where: Path, name: str, value: str | bytes) -> dict[str, str]:
    path = where / name
    path.write_bytes(value if isinstance(value, bytes) else value.encode())
    path.chmod(0o600)
    return {"file": str(path)}


def _from_peer(start: Callable[[Path], Any], where: Path) -> Backend:
    peer = start(where)
    return Backend(dict(peer.config), list(peer.targets[:2]), peer.stop,
                   dict(peer.conformance.get("xfail", {})))


def redfish(where: Path) -> Backend:
    from powerplane_redfish.peer import start

    return _from_peer(start, where)


def pdu_snmp(where: Path) -> Backend:
    pytest.importorskip("snmpsim")
    from powerplane_pdu.peer import start

    backend = _from_peer(start, where)
    # only the network negatives run here: the peer's other declared defects do not apply
    backend.xfail = {k: v for k, v in backend.xfail.items() if k in NETWORK}
    return backend


def pdu_redfish(where: Path) -> Backend:
    from powerplane_pdu.testing import RedfishPduServer
    from powerplane_redfish.testing.dmtf import mockups_dir

    password = "pp-" + secrets.token_hex(8)
    server = RedfishPduServer(mockups_dir() / "public-pdu", "admin", password)
    server.start()
    channel = {"type": "pdu", "protocol": "redfish", "endpoint": server.url,
               "username": "admin", "password": _secret(where, "pdu-password", password)}
    return Backend(channel, [{"outlets": ["A1"]}, {"outlets": ["A2"]}], server.stop)


def _talos(where: Path, **extra: Any) -> Backend:
    from powerplane_talos.peer import start_mock
    from powerplane_talos.testing import pki

    mock = start_mock(where / "mock", "ed25519", reboot_seconds=0.3)
    ca, admin = pki.load(mock.certs, "ca"), pki.load(mock.certs, "admin")
    channel = {"type": "talos", "endpoint": mock.endpoint,
               "ca": _secret(where, "ca.pem", ca.cert),
               "crt": _secret(where, "admin.pem", admin.cert),
               "key": _secret(where, "admin.key", admin.key), **extra}
    return Backend(channel, ["10.77.0.1", "10.77.0.2"], mock.stop, verbs_to_fakes=True)


def talos_grpc(where: Path) -> Backend:
    return _talos(where, transport="grpc")


def talos_talosctl(where: Path) -> Backend:
    standin = Path(sys.executable).parent / "talosctl-standin"
    if not standin.exists():
        pytest.skip("the talosctl stand-in (powerplane-talos) is not installed")
    return _talos(where, transport="talosctl", talosctl=str(standin))


def ec2(where: Path) -> Backend:
    """moto with IAM authentication on (after the calls that make the operator)."""
    from powerplane_cloud.peer import AMI, REGION, start_moto

    moto = start_moto(where, INITIAL_NO_AUTH_ACTION_COUNT="3")
    try:
        iam = moto.client("iam")
        iam.create_user(UserName="operator")
        key = iam.create_access_key(UserName="operator")["AccessKey"]
        iam.put_user_policy(UserName="operator", PolicyName="ec2", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]}))
        client = moto.client(aws_access_key_id=key["AccessKeyId"],
                             aws_secret_access_key=key["SecretAccessKey"])
        ids = [i["InstanceId"] for i in client.run_instances(
            ImageId=AMI, MinCount=2, MaxCount=2, InstanceType="t2.micro")["Instances"]]
    except BaseException:
        moto.stop()
        raise
    channel = {"type": "ec2", "region": REGION, "endpoint_url": moto.url,
               "access_key_id": _secret(where, "key-id", key["AccessKeyId"]),
               "secret_access_key": _secret(where, "secret", key["SecretAccessKey"])}
    return Backend(channel, ids, moto.stop)


def ipmi(where: Path) -> Backend:
    if shutil.which("ipmi_sim") is None:
        pytest.skip("ipmi_sim (OpenIPMI) is not installed")
    from powerplane_ipmi.peer import start

    return _from_peer(start, where)


def template(where: Path) -> Backend:
    """A plugin written by ``powerplane new-plugin``, registered in this process."""
    from powerplane.cli import cli
    from powerplane.plugins import registry

    result = CliRunner().invoke(cli, ["new-plugin", "acme-negatives", "--dir", str(where)])
    assert result.exit_code == 0, result.output
    src = str(where / "powerplane-acme-negatives" / "src")
    sys.path.insert(0, src)
    reg = registry()
    reg.add_module("acme-negatives", importlib.import_module("powerplane_acme_negatives.plugin"),
                   "powerplane-acme-negatives", "0.1.0")
    peer = importlib.import_module("powerplane_acme_negatives.peer").start_peer(where)

    def stop() -> None:
        try:
            peer.stop()
        finally:
            reg.remove("acme-negatives")
            sys.path.remove(src)
            for name in [m for m in sys.modules if m.startswith("powerplane_acme_negatives")]:
                del sys.modules[name]

    return Backend(dict(peer.config), list(peer.targets[:2]), stop)


BACKENDS: dict[str, tuple[str, Callable[[Path], Backend]]] = {
    "redfish": ("powerplane_redfish", redfish),
    "pdu-snmp": ("powerplane_pdu", pdu_snmp),
    "pdu-redfish": ("powerplane_pdu", pdu_redfish),
    "talos-grpc": ("powerplane_talos", talos_grpc),
    "talos-talosctl": ("powerplane_talos", talos_talosctl),
    "ec2": ("powerplane_cloud", ec2),
    "ipmi": ("powerplane_ipmi", ipmi),
    "template": ("powerplane_conformance", template),
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    module, start = BACKENDS[request.param]
    pytest.importorskip(module)
    started = start(tmp_path)
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.slow
def test_network_negatives_run_with_no_hints(backend: Backend, tmp_path: Path) -> None:
    channel = backend.channel
    name = str(channel["type"])
    target = {
        "channels": {"dev": channel},
        "nodes": {f"n{i}": {"channels": [{"channel": "dev", "target": t}]}
                  for i, t in enumerate(backend.targets)},
        # only the network negatives run (-k): with allow_destructive their verbs go to
        # the fakes, nothing else changes any machine
        "conformance": {"allow_destructive": backend.verbs_to_fakes, "xfail": backend.xfail},
    }
    assert "negative" not in target["conformance"]
    summary = run_suite(target, report=tmp_path / "results.json",
                        pytest_args=["-k", ONLY_NETWORK])
    results = summary.data["results"]
    for ident in NETWORK:
        got = [(r["node"], r["outcome"], r["message"]) for r in results if r["id"] == ident]
        assert len(got) == len(backend.targets), (name, ident, got)
        # a probe of the suite's own fake is made once per channel when the address is in
        # the channel's config: the other nodes' checks name the one that made it
        got = [g for g in got if not (g[1] == "skip" and "made once per channel" in g[2])]
        assert got, (name, ident)
        want = "xfail" if ident in backend.xfail else "pass"
        assert {o for _, o, _ in got} == {want}, (name, ident, got)
    assert summary.data["counts"]["fail"] == 0
    assert summary.exit_code == 0
