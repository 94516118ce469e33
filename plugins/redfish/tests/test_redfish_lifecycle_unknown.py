"""A BMC that holds the Reset POST past ``limits.timeout_s``: one reset, settled by evidence.

A maintenance drives node ``n1`` on the DMTF ``public-rackmount1`` mockup (its system
publishes ``LastResetTime``; the mockup server applies a reset when the POST arrives and,
for a boot, sets a new ``LastResetTime``). The server holds the answer to the reset POST
longer than the host's ``limits.timeout_s``, so the host gives up after the request left:
the dispatch is recorded ``unknown`` (never ``failed``, which would invite a second
request), then settled by what can be observed:

- reboot: the simulated cluster is configured without a node boot id
  (``lifecycle.cluster: {type: simulated, boot_id: false}``), so the boot marker is the
  channel's (``LastResetTime``); it changed -> ``applied`` by evidence, ``Complete`` with
  ``RebootObserved=True``;
- shutdown: the mockup models power off (``PowerState`` ``Off`` after ``ForceOff``) and the
  channel sees power, so the readback ``off`` -> ``applied`` by evidence, ``PoweredOff``.

Either way the server received exactly one reset POST.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from powerplane import PowerHost, parse_config
from powerplane.lifecycle import Ceremony, Lifecycle, Phase
from powerplane.lifecycle.model import DispatchOutcome
from powerplane_redfish.testing.mockup import MockupServer

CfgFn = Callable[..., dict[str, Any]]
MockupFn = Callable[..., MockupServer]

RESET = "/Actions/ComputerSystem.Reset"
CALL_TIMEOUT_S = 0.5  # limits.timeout_s: the host gives up on the call after this
POST_HOLD_S = 2.0  # the BMC holds the reset's answer this long (longer than the call)
RUN_BOUND_S = 60.0  # an explicit bound on driving the maintenance to rest


def deployment(tmp: Path, channel: dict[str, Any], target: str) -> dict[str, Any]:
    """One worker node ``n1`` on the mockup's system; the cluster has no node boot id."""
    return {
        "channels": {"bmc": channel},
        "nodes": {"n1": {"channels": [{"channel": "bmc", "target": target}]}},
        "limits": {"timeout_s": CALL_TIMEOUT_S},
        "lifecycle": {
            "store": str(tmp / "lifecycle.db"),
            "cluster": {"type": "simulated", "boot_id": False},  # the channel's marker
            "storage": {"type": "none"},
            "no_control_plane": True,
            "tick_s": 0.05,
            "settle_window_s": 1.0,
            "readback_window_s": 5,
            "readback_cadence_s": 0.05,
        },
    }


def ceremony() -> Ceremony:
    return Ceremony(reason="firmware update on the BMC", confirm_node="n1", ack_preflight=True)


async def drive(tmp: Path, channel: dict[str, Any], target: str, intent: str) -> Any:
    """Request ``intent`` on ``n1`` and run the lifecycle until nothing is left to do."""
    async with PowerHost(parse_config(deployment(tmp, channel, target))) as host:
        lc = Lifecycle.for_host(host)
        try:
            m = await lc.request("n1", intent, ceremony())
            await asyncio.wait_for(lc.run(until_idle=True), RUN_BOUND_S)
            return lc.store.get(m.name)
        finally:
            lc.close()


def reset_posts(server: MockupServer, target: str) -> int:
    """Reset POSTs the server received, answered or not."""
    return server.requests.count(("POST", target + RESET))


@pytest.mark.slow
async def test_a_reboot_whose_reset_post_is_held_is_unknown_then_applied_by_the_marker(
    tmp_path: Path, mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.reset_delay_s = POST_HOLD_S
    done = await drive(tmp_path, mockup_cfg(server), target, "reboot")

    assert done.phase is Phase.COMPLETE, (done.phase, done.status.last_error)
    (d,) = done.status.dispatches  # one attempt: never sent again
    assert d.verb == "reboot"
    # first the host's answer: outcome unknown (the request had left), never failed ...
    assert d.detail.startswith("outcome unknown (no answer: "), d.detail
    assert "may have been applied" in d.detail
    # ... then applied, by the boot marker the BMC publishes
    assert d.outcome is DispatchOutcome.APPLIED
    assert d.settled_by == "evidence"
    assert d.before is not None
    assert d.before.boot_marker == "LastResetTime=2021-03-13T04:02:57+06:00"
    assert d.before.boot_marker_source == "bmc"
    assert ("settled by evidence: boot marker changed LastResetTime=2021-03-13T04:02:57+06:00"
            " -> LastResetTime=") in d.detail
    observed = done.status.conditions["RebootObserved"]
    assert observed.status == "True"
    assert reset_posts(server, target) == 1
    assert server.reset_log() == [(target, "GracefulRestart")]
    assert server.boots[target] == 1


@pytest.mark.slow
async def test_a_shutdown_whose_reset_post_is_held_is_unknown_then_applied_by_readback(
    tmp_path: Path, mockup: MockupFn, mockup_cfg: CfgFn
) -> None:
    server = mockup("public-rackmount1")
    target = server.systems[0]
    server.reset_delay_s = POST_HOLD_S
    off = await drive(tmp_path, mockup_cfg(server, shutdown="force"), target, "shutdown")

    assert off.phase is Phase.POWERED_OFF, (off.phase, off.status.last_error)
    (d,) = off.status.dispatches
    assert d.verb == "shutdown"
    assert d.detail.startswith("outcome unknown (no answer: "), d.detail
    assert d.outcome is DispatchOutcome.APPLIED
    assert d.settled_by == "evidence"
    assert d.before is not None and d.before.power == "on" and d.before.sees_power
    assert "settled by evidence: the machine reads off (via bmc)" in d.detail
    assert off.status.conditions["PowerOffConfirmed"].status == "True"
    assert reset_posts(server, target) == 1
    assert server.reset_log() == [(target, "ForceOff")]
    assert server.power[target] == "Off"
