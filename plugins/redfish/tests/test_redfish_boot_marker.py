"""The redfish channel's boot marker against DMTF mockups and the sushy-tools emulator.

Which peer publishes what: ``public-rackmount1`` has ``LastResetTime`` and ``BootProgress``
(ComputerSystem v1_27_0); ``public-bladed`` has neither; the sushy-tools emulator's system
(``#ComputerSystem.v1_13_0``) has neither. On the mockups a reset changes the served values
only as the test server models it (see :mod:`powerplane_redfish.testing.mockup`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import requests

from powerplane import ChannelError, PowerHost, Unreachable, Verb, parse_config
from powerplane_redfish import RedfishChannel
from powerplane_redfish.channel import boot_marker_of
from powerplane_redfish.testing.dmtf import mockups_dir
from powerplane_redfish.testing.emulator import SushyEmulator
from powerplane_redfish.testing.mockup import MockupServer

HostFor = Callable[[dict[str, Any]], AbstractAsyncContextManager[PowerHost]]
CfgFn = Callable[..., dict[str, Any]]

MOCKUPS = mockups_dir()


def channel_for(cfg: dict[str, Any]) -> RedfishChannel:
    dep = parse_config({"channels": {"bmc": cfg}})
    configured = dep.channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


def mockup_system(name: str) -> dict[str, Any]:
    """The first system of a DMTF mockup, as published (read from the files)."""
    root = MOCKUPS / name
    members = json.loads((root / "Systems" / "index.json").read_text(encoding="utf-8"))
    first = members["Members"][0]["@odata.id"].removeprefix("/redfish/v1/").strip("/")
    doc: dict[str, Any] = json.loads((root / first / "index.json").read_text(encoding="utf-8"))
    return doc


# -- what the DMTF mockups publish -----------------------------------------------------------
def test_the_mockups_publish_what_the_tests_rely_on(mockup: Callable[..., MockupServer]) -> None:
    mockup("public-rackmount1")  # skips where the mockups are absent
    rack = mockup_system("public-rackmount1")
    assert rack["LastResetTime"] == "2021-03-13T04:02:57+06:00"
    assert rack["BootProgress"]["LastState"] == "OSRunning"
    assert rack["BootProgress"]["LastStateTime"] == "2021-03-13T04:14:13+06:00"
    blade = mockup_system("public-bladed")
    assert "LastResetTime" not in blade
    assert "BootProgress" not in blade


# -- which property a marker comes from ----------------------------------------------------
def test_last_reset_time_is_preferred_and_named() -> None:
    body = {"LastResetTime": "2026-01-02T03:04:05Z",
            "BootProgress": {"LastState": "OSRunning", "LastStateTime": "2026-01-02T03:09:00Z"}}
    assert boot_marker_of(body) == "LastResetTime=2026-01-02T03:04:05Z"


def test_boot_progress_time_is_used_only_while_the_os_runs() -> None:
    running = {"BootProgress": {"LastState": "OSRunning", "LastStateTime": "2026-01-02T03:09Z"}}
    assert boot_marker_of(running) == "BootProgress.LastStateTime=2026-01-02T03:09Z"
    for state in ("OSBootStarted", "MemoryInitializationStarted", "None", "OEM", None):
        mid = {"BootProgress": {"LastState": state, "LastStateTime": "2026-01-02T03:05Z"}}
        assert boot_marker_of(mid) is None, state


@pytest.mark.parametrize("body", [
    {},
    {"LastResetTime": None},
    {"LastResetTime": ""},
    {"LastResetTime": 1700000000},
    {"BootProgress": None},
    {"BootProgress": {"LastState": "OSRunning"}},
    {"BootProgress": {"LastState": "OSRunning", "LastStateTime": None}},
    {"PowerState": "On", "BootProgress": "OSRunning"},
])
def test_nothing_usable_published_is_no_marker(body: dict[str, Any]) -> None:
    assert boot_marker_of(body) is None


def test_a_null_last_reset_time_falls_back_to_boot_progress() -> None:
    body = {"LastResetTime": None,
            "BootProgress": {"LastState": "OSRunning", "LastStateTime": "2026-01-02T03:09Z"}}
    assert boot_marker_of(body) == "BootProgress.LastStateTime=2026-01-02T03:09Z"


# -- against the mockup server -------------------------------------------------------------
async def test_host_reads_last_reset_time_and_a_reboot_changes_it(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    async with host_for(one_node(mockup_cfg(server), target, site="lab")) as host:
        first = await host.boot_marker("n1")
        again = await host.boot_marker("n1")
        result = await host.invoke("n1", Verb.REBOOT, reason="boot marker test")
        after = await host.boot_marker("n1")
    assert first == ("bmc", "LastResetTime=2021-03-13T04:02:57+06:00")
    assert again == first  # no boot, no change
    assert result.accepted, result
    assert server.boots[target] == 1
    assert after is not None and after[0] == "bmc"
    assert after[1].startswith("LastResetTime=") and after != first


def test_each_boot_changes_the_marker_and_nothing_else_does(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        seen = [ch.boot_marker(target)]
        ch.power_on(target)  # already on: On boots nothing
        assert ch.boot_marker(target) == seen[-1]
        for _ in range(3):
            ch.reboot(target)
            seen.append(ch.boot_marker(target))
        ch.shutdown(target)
        off = ch.boot_marker(target)
        ch.power_on(target)
        seen.append(ch.boot_marker(target))
    finally:
        ch.close()
    assert off == seen[-2]  # a power off is not a boot (the test server's model)
    assert len(set(seen)) == len(seen) == 5
    assert all(m is not None and m.startswith("LastResetTime=") for m in seen)
    assert server.boots[target] == 4


def test_boot_progress_is_the_marker_where_last_reset_time_is_absent(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1", omit=["LastResetTime"])
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server))
    try:
        first = ch.boot_marker(target)
        ch.reboot(target)
        rebooted = ch.boot_marker(target)
        ch.shutdown(target)
        off = ch.boot_marker(target)
        ch.power_on(target)
        on = ch.boot_marker(target)
    finally:
        ch.close()
    assert first == "BootProgress.LastStateTime=2021-03-13T04:14:13+06:00"
    assert rebooted is not None and rebooted.startswith("BootProgress.LastStateTime=")
    assert rebooted != first
    assert off is None  # BootProgress is not OSRunning: no marker, never a stale one
    assert on is not None and on.startswith("BootProgress.LastStateTime=")
    assert on not in (first, rebooted)


async def test_a_system_that_publishes_neither_has_no_marker(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, host_for: HostFor, one_node: CfgFn
) -> None:
    server = mockup("public-bladed")
    target = server.systems[0]
    async with host_for(one_node(mockup_cfg(server), target, site="lab")) as host:
        before = await host.boot_marker("n1")
        result = await host.invoke("n1", Verb.REBOOT, reason="boot marker test")
        after = await host.boot_marker("n1")
    assert result.accepted, result
    assert before is None and after is None
    ch = channel_for(mockup_cfg(server))
    try:
        assert ch.boot_marker(target) is None
    finally:
        ch.close()


def test_a_failed_read_raises_never_a_marker(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    ch = channel_for(mockup_cfg(server, timeouts={"connect_s": 2, "read_s": 2}))
    try:
        assert ch.boot_marker(target) is not None
        server.drop_next(2)  # the GET and its one retry on a fresh connection
        with pytest.raises(ChannelError):
            ch.boot_marker(target)
        server.stop()
        with pytest.raises(Unreachable):
            ch.boot_marker(target)
    finally:
        ch.close()


# -- against the sushy-tools emulator --------------------------------------------------------
def test_the_emulator_publishes_neither_property(
    emulator: SushyEmulator, emu_system: str, emu_cfg: CfgFn
) -> None:
    body = requests.get(f"{emulator.endpoint}{emu_system}", verify=str(emulator.tls.ca),
                        auth=(emulator.username, emulator.password), timeout=10).json()
    assert body["@odata.type"] == "#ComputerSystem.v1_13_0.ComputerSystem"
    assert "LastResetTime" not in body
    assert "BootProgress" not in body
    ch = channel_for(emu_cfg())
    try:
        assert ch.boot_marker(emu_system) is None
        ch.reboot(emu_system)
        assert ch.boot_marker(emu_system) is None
    finally:
        ch.close()
