"""The talos channel's boot marker: ``SystemStat.boot_time`` through the machine API.

Against the Talos mock, whose machines take a new ``boot_time`` on every boot (a
reboot through the mock, a power-on after a shutdown): the marker holds still while
the machine does not boot, changes after a reboot through the host, and a failed or
dark read raises instead of passing for a marker. The talosctl transport publishes
none.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    HasBootMarker,
    PowerHost,
    Unreachable,
    Verb,
    parse_config,
)

pytestmark = pytest.mark.timeout(60)


def deployment(mock: Any, node: str) -> Any:
    return parse_config({
        "channels": {"talos": {"type": "talos", "talosconfig": str(mock.talosconfig),
                               "timeouts": {"connect_s": 5, "read_s": 5}}},
        "nodes": {"node-1": {"site": "plant-a",
                             "channels": [{"channel": "talos", "target": node}]}},
    })


async def until_on(mock: Any, node: str) -> None:
    """Wait (explicitly bounded) until the mock's machine answers again after a reboot."""
    async with asyncio.timeout(30):
        while mock.control.state(node) != "on":
            await asyncio.sleep(0.05)


async def test_marker_is_the_machines_boot_time_and_holds_without_a_boot(
    mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(mock)
    assert isinstance(ch, HasBootMarker)
    first = await ch.boot_marker(node)
    boot_time, boots = mock.control.boot(node)
    assert first == f"boot_time={boot_time}" and boots == 1
    await ch.read_power_state(node)
    assert await ch.boot_marker(node) == first
    assert mock.control.boot(node) == (boot_time, 1)
    await ch.close()


async def test_marker_changes_after_a_reboot_through_the_host(ed_mock: Any, node: str) -> None:
    async with PowerHost(deployment(ed_mock, node)) as host:
        before = await host.boot_marker("node-1")
        assert before is not None and before[0] == "talos"
        assert await host.boot_marker("node-1") == before
        await host.invoke("node-1", Verb.REBOOT, reason="kernel update")
        await until_on(ed_mock, node)
        after = await host.boot_marker("node-1")
    boot_time, boots = ed_mock.control.boot(node)
    assert after == ("talos", f"boot_time={boot_time}") and boots == 2
    assert after != before
    assert [d["verb"] for d in ed_mock.control.dispatches() if d["node"] == node] == ["reboot"]


async def test_a_failed_read_raises_and_is_never_a_marker(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock, timeouts={"connect_s": 0.5, "read_s": 0.5})
    ed_mock.control.fault(node, "permission_denied")
    with pytest.raises(AuthenticationFailed, match="permission denied"):
        await ch.boot_marker(node)
    ed_mock.control.fault(node, "unavailable")
    with pytest.raises(Unreachable, match="unavailable"):
        await ch.boot_marker(node)
    async with PowerHost(deployment(ed_mock, node)) as host:
        assert await host.boot_marker("node-1") is None
    ed_mock.control.clear(node)
    assert await ch.boot_marker(node) == f"boot_time={ed_mock.control.boot(node)[0]}"
    await ch.close()


async def test_a_dark_machine_raises_then_a_power_on_is_a_new_boot(
    ed_mock: Any, channel_for: Any, node: str
) -> None:
    ch = channel_for(ed_mock)
    before = await ch.boot_marker(node)
    await ch.shutdown(node)
    assert ed_mock.control.state(node) == "off"
    with pytest.raises(Unreachable, match="machine is off"):
        await ch.boot_marker(node)
    async with PowerHost(deployment(ed_mock, node)) as host:
        assert await host.boot_marker("node-1") is None
    ed_mock.control.power_on(node)
    after = await ch.boot_marker(node)
    assert after is not None and after != before
    assert after == f"boot_time={ed_mock.control.boot(node)[0]}"
    await ch.close()


async def test_talosctl_transport_publishes_no_marker(
    ed_mock: Any, channel_for: Any, node: str, standin: Path
) -> None:
    ch = channel_for(ed_mock, transport="talosctl", talosctl=str(standin), context="mock")
    assert await ch.boot_marker(node) is None
    assert await ch.transport.boot_time(node) is None
    await ch.close()
