"""The talos plugin in the one plugin shape: core's HTTP status rule, the declared address and
timeouts, the connect bound, the mock's PKI from powerplane.testing, and the old names."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpclib import client as grpclib_client
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from powerplane import (
    Address,
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    RefusedByDevice,
    Unreachable,
)
from powerplane_talos import TalosConfig
from powerplane_talos.errors import map_error
from powerplane_talos.plugin import TALOS
from powerplane_talos.talosconfig import dump_talosconfig, load_talosconfig
from powerplane_talos.testing import pki

pytestmark = pytest.mark.timeout(60)

HTTP_RULE = {400: RefusedByDevice, 401: AuthenticationFailed, 403: AuthenticationFailed,
             404: RefusedByDevice, 429: RefusedByDevice, 500: RefusedByDevice,
             502: RefusedByDevice, 503: RefusedByDevice, 504: RefusedByDevice}


@pytest.mark.parametrize(("status", "expected"), sorted(HTTP_RULE.items()))
def test_an_http_answer_that_is_not_grpc_follows_cores_status_rule(
    status: int, expected: type[ChannelError]
) -> None:
    # the GRPCError grpclib raises for a non-200 :status (its own status map and words)
    grpc_status = grpclib_client._H2_TO_GRPC_STATUS_MAP.get(str(status), Status.UNKNOWN)
    exc = GRPCError(grpc_status, f"Received :status = {str(status)!r}")
    err = map_error(exc, channel="talos", target="10.0.0.11", endpoint="127.0.0.1:50000",
                    timeout=5)
    assert type(err) is expected  # never Unreachable: something answered
    assert f"HTTP {status}" in err.message and "127.0.0.1:50000" in err.message


def test_talos_own_unavailable_is_still_unreachable() -> None:
    err = map_error(GRPCError(Status.UNAVAILABLE, "node down"), channel="t", target="n",
                    endpoint="e:1", timeout=5)
    assert type(err) is Unreachable


def test_the_type_declares_its_address_and_timeouts(tmp_path: Path) -> None:
    ca = pki.new_ca(tmp_path)
    (tmp_path / "ca").write_bytes(ca.cert)
    inline = TalosConfig(endpoint="10.0.0.2:50000", ca={"file": str(tmp_path / "ca")})
    assert TALOS.address_for(inline) == Address("endpoint", format="host:port")
    assert TALOS.address_for(inline).read(inline) == "10.0.0.2:50000"  # type: ignore[union-attr]
    client = pki.issue(ca, tmp_path, "admin", organization="os:admin")
    tc = dump_talosconfig(tmp_path / "tc", context="c", endpoints=["10.0.0.2"], ca=ca.cert,
                          crt=client.cert, key=client.key)
    assert TALOS.address_for(TalosConfig(talosconfig=str(tc))) is None  # in the file
    assert TALOS.timeouts_field() == "timeouts"
    timeouts = TALOS.timeouts_of(inline)
    assert timeouts is not None and (timeouts.connect_s, timeouts.read_s) == (10, 10)


async def test_connecting_is_bounded_by_connect_s_not_the_whole_deadline(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path, hanging_port: int
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    cfg = dump_talosconfig(tmp_path / "tc", context="x", endpoints=[f"127.0.0.1:{hanging_port}"],
                           ca=creds.ca, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, talosconfig=str(cfg), timeouts={"connect_s": 0.5, "read_s": 60})
    with pytest.raises(ChannelTimeout, match=r"within 0\.5 s"):
        await asyncio.wait_for(ch.reboot(node), 10)
    await ch.close()


def test_the_mock_pki_is_talos_shaped(ed_mock: Any) -> None:
    admin = pki.load(ed_mock.certs, "admin")
    assert admin.key.startswith(b"-----BEGIN ED25519 PRIVATE KEY-----")
    cert = x509.load_pem_x509_certificate(admin.cert)
    org = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [a.value for a in org] == ["os:admin"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    ca = x509.load_pem_x509_certificate(pki.load(ed_mock.certs, "ca").cert)
    assert [a.value for a in ca.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] \
        == ["talos"]
    assert cert.issuer == ca.subject


def test_the_old_mock_names_still_work() -> None:
    import powerplane_talos.mock
    import powerplane_talos.testing

    assert powerplane_talos.mock.MockControl is powerplane_talos.testing.MockControl
    out = subprocess.run([sys.executable, "-m", "powerplane_talos.mock", "--help"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "not Talos" in out.stdout


@pytest.mark.perf
def test_importing_the_package_loads_neither_grpclib_nor_protobuf() -> None:
    code = ("import sys, powerplane_talos, powerplane_talos.plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpclib', 'google')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, check=True)
    assert out.stdout.strip() == "[]", f"perf (import time): imported {out.stdout.strip()}"
    names = subprocess.run([sys.executable, "-c", "import powerplane_talos as p; "
                            "print(p.TalosChannel.__name__, sorted(p.__all__) == p.__all__)"],
                           capture_output=True, text=True, timeout=30, check=True)
    assert names.stdout.split() == ["TalosChannel", "True"]
