"""The talos channel over gRPC (grpclib, mutual TLS) against the mock, Ed25519 and ECDSA."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    NotSupported,
    OutcomeUnknown,
    PowerState,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane.channel import SendGate
from powerplane_talos.channel import DARK
from powerplane_talos.talosconfig import dump_talosconfig, load_talosconfig
from powerplane_talos.testing import pki

pytestmark = pytest.mark.timeout(60)


async def until_on(ch: Any, node: str) -> None:
    """Read back until the node answers again (bounded by the operation timeout)."""
    async with asyncio.timeout(20):
        while (await ch.read_power_state(node)).state is not PowerState.ON:
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("mode", ["default", "powercycle", "force"])
async def test_reboot_sends_each_mode_and_the_node_comes_back(
    mock: Any, channel_for: Any, node: str, mode: str
) -> None:
    ch = channel_for(mock, reboot_mode=mode)
    accepted = await ch.reboot(node)
    assert f"mode {mode}" in accepted.detail
    assert mock.control.dispatches()[-1] == {"node": node, "verb": "reboot",
                                             "mode": mode.upper()}
    await until_on(ch, node)
    await ch.close()


@pytest.mark.parametrize("force", [False, True])
async def test_shutdown_graceful_and_forced_then_readback_is_unknown_never_off(
    mock: Any, channel_for: Any, node: str, force: bool
) -> None:
    ch = channel_for(mock, shutdown_force=force)
    assert (await ch.read_power_state(node)).state is PowerState.ON
    await ch.shutdown(node)
    assert mock.control.dispatches()[-1] == {"node": node, "verb": "shutdown", "force": force}
    reading = await ch.read_power_state(node)
    assert reading.state is PowerState.UNKNOWN
    assert DARK in reading.detail
    mock.control.power_on(node)  # a person (or another channel) powers it on
    assert (await ch.read_power_state(node)).state is PowerState.ON
    await ch.close()


async def test_power_on_is_never_sent(mock: Any, channel_for: Any, node: str) -> None:
    ch = channel_for(mock)
    before = len(mock.control.dispatches())
    with pytest.raises(NotSupported):
        await ch.power_on(node)
    assert len(mock.control.dispatches()) == before
    await ch.close()


async def test_one_connection_is_reused_for_every_call(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock, reboot_mode="force")
    for _ in range(5):
        await ch.read_power_state(node)
    await ch.reboot(node)
    assert ch.transport.connections == 1
    await ch.close()


async def test_inline_secret_references_work_like_a_talosconfig(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    refs = {}
    for name in ("ca", "crt", "key"):
        path = tmp_path / name
        path.write_bytes(getattr(creds, name))
        refs[name] = {"file": str(path)}
    ch = channel_for(ed_mock, talosconfig=None, endpoint=ed_mock.endpoint, **refs)
    assert (await ch.read_power_state(node)).state is PowerState.ON
    await ch.close()


def _variant(peer: Any, tmp_path: Path, *, ca: bytes | None = None,
             client: pki.Pem | None = None, no_cert: bool = False) -> Path:
    creds = load_talosconfig(peer.talosconfig)
    return dump_talosconfig(
        tmp_path / "talosconfig", context="variant", endpoints=[peer.endpoint],
        ca=ca or creds.ca,
        crt=None if no_cert else (client.cert if client else creds.crt),
        key=None if no_cert else (client.key if client else creds.key),
    )


async def test_client_without_certificate_fails_authentication_naming_the_cause(
    mock: Any, channel_for: Any, node: str, tmp_path: Path
) -> None:
    ch = channel_for(mock, talosconfig=str(_variant(mock, tmp_path, no_cert=True)))
    with pytest.raises(AuthenticationFailed, match="no client certificate was presented"):
        await ch.reboot(node)
    assert all(d["node"] != node for d in mock.control.dispatches())
    await ch.close()


async def test_client_certificate_from_another_ca_fails_authentication(
    mock: Any, channel_for: Any, node: str, tmp_path: Path
) -> None:
    other = pki.new_ca(tmp_path / "other-ca", mock.algorithm)
    client = pki.issue(other, tmp_path / "other-ca", "admin", algorithm=mock.algorithm,
                       organization="os:admin")
    ch = channel_for(mock, talosconfig=str(_variant(mock, tmp_path, client=client)))
    with pytest.raises(AuthenticationFailed, match="not issued by the endpoint's CA"):
        await ch.shutdown(node)
    await ch.close()


async def test_endpoint_certificate_from_another_ca_fails_tls_verification(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path
) -> None:
    other = pki.new_ca(tmp_path / "other-ca", "ed25519")
    ch = channel_for(ed_mock, talosconfig=str(_variant(ed_mock, tmp_path, ca=other.cert)))
    with pytest.raises(TLSVerificationFailed, match="did not verify against the configured CA"):
        await ch.read_power_state(node)
    await ch.close()


async def test_reader_role_is_denied_reboot_but_reads_version(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path
) -> None:
    reader = pki.load(ed_mock.certs, "reader")
    ch = channel_for(ed_mock, talosconfig=str(_variant(ed_mock, tmp_path, client=reader)))
    assert (await ch.read_power_state(node)).state is PowerState.ON
    with pytest.raises(AuthenticationFailed, match="permission denied"):
        await ch.reboot(node)
    await ch.close()


async def test_unreachable_endpoint_fails_as_unreachable_and_reads_unknown(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path, closed_port: int
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    cfg = dump_talosconfig(tmp_path / "tc", context="x", endpoints=[f"127.0.0.1:{closed_port}"],
                           ca=creds.ca, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, talosconfig=str(cfg), timeouts={"connect_s": 5, "read_s": 5})
    with pytest.raises(Unreachable, match="connection refused"):
        await asyncio.wait_for(ch.reboot(node), 10)
    reading = await asyncio.wait_for(ch.read_power_state(node), 10)
    assert reading.state is PowerState.UNKNOWN and DARK in reading.detail
    await ch.close()


async def test_hanging_endpoint_fails_within_the_deadline(
    ed_mock: Any, channel_for: Any, node: str, tmp_path: Path, hanging_port: int
) -> None:
    creds = load_talosconfig(ed_mock.talosconfig)
    cfg = dump_talosconfig(tmp_path / "tc", context="x", endpoints=[f"127.0.0.1:{hanging_port}"],
                           ca=creds.ca, crt=creds.crt, key=creds.key)
    ch = channel_for(ed_mock, talosconfig=str(cfg), timeouts={"connect_s": 0.5, "read_s": 0.5})
    with pytest.raises(ChannelTimeout, match=r"within 0\.5 s"):
        await asyncio.wait_for(ch.shutdown(node), 10)
    await ch.close()


async def test_injected_faults_map_to_their_errors(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock, timeouts={"connect_s": 0.5, "read_s": 0.5})
    ed_mock.control.fault(node, "unavailable")
    with pytest.raises(Unreachable, match="unavailable"):
        await ch.reboot(node)
    assert (await ch.read_power_state(node)).state is PowerState.UNKNOWN
    ed_mock.control.fault(node, "permission_denied")
    with pytest.raises(AuthenticationFailed, match="permission denied"):
        await ch.shutdown(node)
    ed_mock.control.fault(node, "slow", seconds=30)
    with pytest.raises(ChannelTimeout):
        await asyncio.wait_for(ch.transport.version(node), 10)
    ed_mock.control.clear(node)
    assert (await ch.read_power_state(node)).state is PowerState.ON
    assert all(d["node"] != node for d in ed_mock.control.dispatches())
    await ch.close()


async def test_a_verb_sent_and_unanswered_within_the_deadline_is_outcome_unknown(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock, timeouts={"connect_s": 0.5, "read_s": 0.5})
    ed_mock.control.fault(node, "slow", seconds=30)
    for verb in (ch.reboot, ch.shutdown):
        with pytest.raises(OutcomeUnknown, match="may have been applied"):
            await asyncio.wait_for(verb(node), 10)
    rpcs = [r["rpc"] for r in ed_mock.control.received() if r["node"] == node]
    assert rpcs == ["Reboot", "Shutdown"]  # both requests did reach Talos
    ed_mock.control.clear(node)
    await ch.close()


async def test_a_verb_request_never_leaves_once_the_host_gave_up(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock)
    assert (await ch.read_power_state(node)).state is PowerState.ON  # connected already
    closed = SendGate()
    closed.close()
    with closed:
        for verb in (ch.reboot, ch.shutdown):
            with pytest.raises(ChannelTimeout, match="not sent"):
                await verb(node)
    assert [r["rpc"] for r in ed_mock.control.received() if r["node"] == node] == ["Version"]
    assert all(d["node"] != node for d in ed_mock.control.dispatches())
    with SendGate() as gate:
        await ch.reboot(node)
    assert gate.sent and ed_mock.control.dispatches()[-1]["node"] == node
    await ch.close()
