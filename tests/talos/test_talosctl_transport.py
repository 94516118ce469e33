"""The talos channel over the talosctl transport, end to end through the stand-in talosctl.

The stand-in (``powerplane_talos.mock.talosctl``, a test tool) accepts the argv subset
real talosctl takes and calls the mock, printing failures the way talosctl does.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    ConfigError,
    PowerState,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_talos.channel import DARK
from powerplane_talos.mock import pki
from powerplane_talos.talosconfig import dump_talosconfig, load_talosconfig
from powerplane_talos.talosctl_transport import map_stderr

pytestmark = pytest.mark.timeout(90)


def test_argv_is_the_one_real_talosctl_takes(ed_mock: Any, channel_for: Any,
                                              standin: Path) -> None:
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin), context="mock")
    t = ch.transport
    head = [str(standin), "--talosconfig", str(ed_mock.talosconfig), "--context", "mock",
            "--nodes", "10.0.0.11"]
    assert t.argv("10.0.0.11", "version") == [*head, "version"]


async def test_inline_secrets_never_reach_the_command_line(
    ed_mock: Any, channel_for: Any, standin: Path, tmp_path: Path, node: str
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    refs = {}
    for name in ("ca", "crt", "key"):
        (tmp_path / name).write_bytes(getattr(creds, name))
        refs[name] = {"file": str(tmp_path / name)}
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin), talosconfig=None,
                     endpoint=ed_mock.endpoint, **refs)
    argv = ch.transport.argv(node, "version")
    key_body = creds.key.decode().splitlines()[1]
    assert not any(key_body in arg for arg in argv)
    written = Path(argv[argv.index("--talosconfig") + 1])
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert (await ch.read_power_state(node)).state is PowerState.ON
    await ch.close()
    assert not written.exists()


@pytest.mark.parametrize("mode", ["default", "powercycle", "force"])
async def test_reboot_each_mode_through_talosctl(
    mock: Any, channel_for: Any, standin: Path, node: str, mode: str
) -> None:
    ch = channel_for(mock, transport="talosctl", talosctl=str(standin), reboot_mode=mode)
    await ch.reboot(node)
    assert mock.control.dispatches()[-1] == {"node": node, "verb": "reboot",
                                             "mode": mode.upper()}


@pytest.mark.parametrize("force", [False, True])
async def test_shutdown_through_talosctl_then_readback_unknown_then_on(
    mock: Any, channel_for: Any, standin: Path, node: str, force: bool
) -> None:
    ch = channel_for(mock, transport="talosctl", talosctl=str(standin), shutdown_force=force)
    await ch.shutdown(node)
    assert mock.control.dispatches()[-1] == {"node": node, "verb": "shutdown", "force": force}
    reading = await ch.read_power_state(node)
    assert reading.state is PowerState.UNKNOWN and DARK in reading.detail
    mock.control.power_on(node)
    reading = await ch.read_power_state(node)
    assert reading.state is PowerState.ON and "v1.11.0-mock" in reading.detail


async def test_missing_binary_is_a_config_error_naming_the_path(
    ed_mock: Any, channel_for: Any, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-talosctl")
    with pytest.raises(ConfigError, match="no-such-talosctl") as info:
        channel_for(ed_mock, transport="talosctl", talosctl=missing)
    assert "channels.talos.talosctl" in str(info.value)


async def test_auth_failures_through_talosctl(
    ed_mock: Any, channel_for: Any, standin: Path, tmp_path: Path, node: str
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    no_cert = dump_talosconfig(tmp_path / "a", context="a", endpoints=[ed_mock.endpoint],
                               ca=creds.ca)
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     talosconfig=str(no_cert))
    with pytest.raises(AuthenticationFailed, match="no client certificate"):
        await ch.reboot(node)
    other = pki.new_ca("ed25519")
    client = pki.issue(other, "admin", organization="os:admin")
    foreign = dump_talosconfig(tmp_path / "b", context="b", endpoints=[ed_mock.endpoint],
                               ca=creds.ca, crt=client.cert, key=client.key)
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     talosconfig=str(foreign))
    with pytest.raises(AuthenticationFailed, match="not issued by the endpoint's CA"):
        await ch.shutdown(node)
    untrusted = dump_talosconfig(tmp_path / "c", context="c", endpoints=[ed_mock.endpoint],
                                 ca=other.cert, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     talosconfig=str(untrusted))
    with pytest.raises(TLSVerificationFailed, match="x509"):
        await ch.read_power_state(node)


async def test_unreachable_and_hanging_endpoints_through_talosctl(
    ed_mock: Any, channel_for: Any, standin: Path, tmp_path: Path, node: str,
    closed_port: int, hanging_port: int,
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    refused = dump_talosconfig(tmp_path / "r", context="r",
                               endpoints=[f"127.0.0.1:{closed_port}"],
                               ca=creds.ca, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     talosconfig=str(refused))
    with pytest.raises(Unreachable, match="connection refused"):
        await asyncio.wait_for(ch.reboot(node), 30)
    assert (await ch.read_power_state(node)).state is PowerState.UNKNOWN
    hanging = dump_talosconfig(tmp_path / "h", context="h",
                               endpoints=[f"127.0.0.1:{hanging_port}"],
                               ca=creds.ca, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     talosconfig=str(hanging), timeout_s=1.5)
    with pytest.raises(ChannelTimeout, match="killed"):
        await asyncio.wait_for(ch.shutdown(node), 30)


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ('rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
         'dialing: dial tcp 10.0.0.2:50000: connect: connection refused"', Unreachable),
        ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", ChannelTimeout),
        ("rpc error: code = PermissionDenied desc = not authorized", AuthenticationFailed),
        ("rpc error: code = Unauthenticated desc = no certificate", AuthenticationFailed),
        ('rpc error: code = Unavailable desc = connection error: desc = "transport: authentication'
         ' handshake failed: tls: failed to verify certificate: x509: certificate signed by '
         'unknown authority"', TLSVerificationFailed),
        ('rpc error: code = Unavailable desc = connection error: desc = "transport: authentication'
         ' handshake failed: remote error: tls: unknown certificate authority"',
         AuthenticationFailed),
        ("rpc error: code = FailedPrecondition desc = upgrade in progress", RefusedByDevice),
        ("panic: something odd", ProtocolError),
        ("", ProtocolError),
    ],
)
def test_talosctl_stderr_maps_into_the_hierarchy(stderr: str, expected: type) -> None:
    err = map_stderr(stderr, 1, channel="talos", target="10.0.0.11")
    assert type(err) is expected
    assert err.channel == "talos" and err.target == "10.0.0.11"


def test_standin_says_it_is_a_test_tool(standin: Path) -> None:
    import subprocess

    out = subprocess.run([str(standin), "--help"], capture_output=True, text=True, timeout=30,
                         env={**os.environ})
    assert "TEST TOOL" in out.stdout and "not talosctl" in out.stdout
