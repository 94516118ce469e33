"""The talos channel over the talosctl transport, end to end through the stand-in talosctl.

The stand-in (``powerplane_talos.testing.talosctl``, a test tool) accepts the argv subset
real talosctl takes and calls the mock, printing failures the way talosctl does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from talos_support import files_holding, key_body

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    ConfigError,
    OutcomeUnknown,
    PowerState,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    parse_config,
)
from powerplane.channel import SendGate
from powerplane_talos.channel import DARK
from powerplane_talos.talosconfig import dump_talosconfig, load_talosconfig
from powerplane_talos.talosctl_transport import map_stderr
from powerplane_talos.testing import pki

pytestmark = pytest.mark.timeout(90)


def test_argv_is_the_one_real_talosctl_takes(ed_mock: Any, channel_for: Any,
                                              standin: Path) -> None:
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin), context="mock")
    t = ch.transport
    head = [str(standin), "--talosconfig", str(ed_mock.talosconfig), "--context", "mock",
            "--nodes", "10.0.0.11"]
    assert t.argv("10.0.0.11", "version") == [*head, "version"]


@pytest.fixture
def recording_standin(tmp_path: Path) -> tuple[Path, Path]:
    """A talosctl stand-in that first records its argv and environment as JSON."""
    record = tmp_path / "child.json"
    script = tmp_path / "talosctl"
    dump = ("import json, os, sys; json.dump({'argv': sys.argv[2:], 'env': dict(os.environ)}, "
            "open(sys.argv[1], 'w'))")
    script.write_text(
        f'#!/bin/sh\n"{sys.executable}" -c "{dump}" "{record}" "$@"\n'
        f'exec "{sys.executable}" -m powerplane_talos.testing.talosctl "$@"\n'
    )
    script.chmod(0o755)
    return script, record


def inline_refs(peer: Any, tmp_path: Path) -> dict[str, Any]:
    """Secret references to the mock's admin ca, crt and key (as files under tmp_path/refs)."""
    creds = load_talosconfig(peer.talosconfig)
    refs = {}
    (tmp_path / "refs").mkdir(exist_ok=True)
    for name in ("ca", "crt", "key"):
        (tmp_path / "refs" / name).write_bytes(getattr(creds, name))
        refs[name] = {"file": str(tmp_path / "refs" / name)}
    return refs


async def test_inline_secrets_go_to_talosctl_as_an_inherited_memory_file(
    ed_mock: Any, channel_for: Any, recording_standin: tuple[Path, Path], tmp_path: Path,
    node: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    script, record = recording_standin
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(script), talosconfig=None,
                     endpoint=ed_mock.endpoint, **inline_refs(ed_mock, tmp_path))
    assert (await ch.read_power_state(node)).state is PowerState.ON
    argv = json.loads(record.read_text())["argv"]
    path = argv[argv.index("--talosconfig") + 1]
    assert path.startswith("/dev/fd/")  # no file: the child opened its inherited descriptor
    body = key_body(ed_mock.talosconfig)
    assert not any(body in arg for arg in argv)
    assert files_holding(body, scratch) == []  # the old private talosconfig would be here
    await ch.close()


async def test_talosctl_gets_a_minimal_environment_without_unrelated_secrets(
    ed_mock: Any, channel_for: Any, recording_standin: tuple[Path, Path], node: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UNRELATED_DB_PASSWORD", "hunter2-not-for-talosctl")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-not-for-talosctl")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.lan:3128")
    monkeypatch.setenv("LC_TIME", "C")
    script, record = recording_standin
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(script))
    await ch.reboot(node)
    env = json.loads(record.read_text())["env"]
    assert not any("not-for-talosctl" in value for value in env.values())
    assert "UNRELATED_DB_PASSWORD" not in env and "HTTPS_PROXY" not in env
    assert env["PATH"] == os.environ["PATH"] and env["LC_TIME"] == "C"
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(script),
                     talosctl_env=["HTTPS_PROXY"])
    await ch.read_power_state(node)
    env = json.loads(record.read_text())["env"]
    assert env["HTTPS_PROXY"] == "http://proxy.lan:3128"
    assert "AWS_SECRET_ACCESS_KEY" not in env


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


def test_missing_binary_is_a_config_error_at_load_naming_the_path(
    ed_mock: Any, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-talosctl")
    with pytest.raises(ConfigError, match="no-such-talosctl") as info:
        parse_config({"channels": {"talos": {
            "type": "talos", "talosconfig": str(ed_mock.talosconfig),
            "transport": "talosctl", "talosctl": missing}}})
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
    other = pki.new_ca(tmp_path / "other-ca", "ed25519")
    client = pki.issue(other, tmp_path / "other-ca", "admin", organization="os:admin")
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
                     talosconfig=str(hanging), timeouts={"connect_s": 1.5, "read_s": 1.5})
    with pytest.raises(ChannelTimeout, match="killed"):
        await asyncio.wait_for(ch.transport.version(node), 30)
    # talosctl was started, so it may have sent the shutdown: never a plain failure
    with pytest.raises(OutcomeUnknown, match=r"may have been applied.*killed"):
        await asyncio.wait_for(ch.shutdown(node), 30)


async def test_a_verb_whose_answer_does_not_come_is_outcome_unknown(
    ed_mock: Any, channel_for: Any, standin: Path, node: str
) -> None:
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin),
                     timeouts={"connect_s": 3, "read_s": 3})
    ed_mock.control.fault(node, "slow", seconds=60)
    with pytest.raises(OutcomeUnknown, match="may have been applied"):
        await asyncio.wait_for(ch.reboot(node), 30)
    assert {"node": node, "rpc": "Reboot"} in ed_mock.control.received()
    ed_mock.control.clear(node)


async def test_a_verb_is_not_started_once_the_host_gave_up(
    ed_mock: Any, channel_for: Any, recording_standin: tuple[Path, Path], node: str
) -> None:
    script, record = recording_standin
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(script))
    gate = SendGate()
    gate.close()
    with gate, pytest.raises(ChannelTimeout, match="not sent"):
        await ch.shutdown(node)
    assert not record.exists()  # talosctl never ran
    assert all(r["node"] != node for r in ed_mock.control.received())
    with SendGate() as open_gate:
        await ch.shutdown(node)
    assert open_gate.sent


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


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", OutcomeUnknown),
        ("rpc error: code = Unavailable desc = error reading from server: EOF", OutcomeUnknown),
        ("rpc error: code = Unavailable desc = transport is closing", OutcomeUnknown),
        ('rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
         'dialing: dial tcp 10.0.0.2:50000: connect: connection refused"', Unreachable),
        ("rpc error: code = Unavailable desc = node unavailable", Unreachable),
        ("rpc error: code = PermissionDenied desc = not authorized", AuthenticationFailed),
        ("rpc error: code = FailedPrecondition desc = upgrade in progress", RefusedByDevice),
    ],
)
def test_a_verb_talosctl_may_have_sent_is_unknown_unless_talos_answered(
    stderr: str, expected: type
) -> None:
    assert type(map_stderr(stderr, 1, channel="t", target="n", sent=True)) is expected


def test_standin_says_it_is_a_test_tool(standin: Path) -> None:
    import subprocess

    out = subprocess.run([str(standin), "--help"], capture_output=True, text=True, timeout=30,
                         env={**os.environ})
    assert "TEST TOOL" in out.stdout and "not talosctl" in out.stdout
