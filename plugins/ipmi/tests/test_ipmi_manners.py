"""Manners an IPMI BMC can live with, counted at the peer: lock-out and "already there".

- Lock-out: a fleet call to 50 nodes behind one ``ipmi_sim`` endpoint with a wrong password
  makes exactly one login attempt, counted as RAKP messages 1 by a UDP proxy in front of
  the BMC (:class:`~powerplane_ipmi.testing.UdpProxy`, every datagram the host sends
  passes it). The other 49 fail at once with the first error and the hint; the host's
  next fleet call sends nothing at all.
- Already in that state: a BMC answers a chassis power up of a machine that is on (and a
  soft-off of one that is off) with completion code 0xD5, "Command not supported in
  present state" in ``ipmitool``'s words; pyghmi's BMC simulator answers so with
  ``already=0xD5``. The verb is read back through the same channel and reported done,
  quoting the BMC's answer; nothing was changed at the peer.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from ipmi_support import cli, deployment, need_ipmi_sim

from powerplane import AuthenticationFailed, InvokeResult, PowerHost, PowerState, parse_config
from powerplane_ipmi.peer import IpmiSim
from powerplane_ipmi.testing import OPEN_SESSION, PyghmiBmc, UdpProxy

FLEET = 50
TIMEOUTS = {"connect_s": 3, "read_s": 3}


def _fleet(password: Path, targets: list[str], **keys: Any) -> dict[str, Any]:
    return {"channels": {"bmc": {"type": "ipmi", "username": "oper",
                                 "password": {"file": str(password)}, **keys}},
            "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": t}]}
                      for i, t in enumerate(targets)},
            "limits": {"timeout_s": 30}}


def test_wrong_password_fleet_of_50_logs_in_once(tmp_path: Path) -> None:
    need_ipmi_sim()
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n", encoding="utf-8")
    wrong.chmod(0o600)
    with IpmiSim(tmp_path / "sim") as sim, UdpProxy(sim.host, sim.port) as proxy:
        cfg = _fleet(wrong, [proxy.address] * FLEET, timeouts=TIMEOUTS)
        nodes = list(cfg["nodes"])

        async def go() -> tuple[dict[str, Any], list[Any], dict[str, Any], int, float]:
            async with PowerHost(parse_config(cfg)) as host:
                first = await host.invoke_many(nodes, "power-on", reason="manners test")
                sent = proxy.up
                began = time.monotonic()
                # what follows (a runner's next pass): discovery again, a read of every
                # node and the fleet call again, each with the remembered failure
                await host.refresh()
                reads = [await host.read_power_state(n) for n in nodes]
                again = await host.invoke_many(nodes, "power-on", reason="manners test")
                return first, reads, again, sent, time.monotonic() - began

        first, reads, again, sent, took = asyncio.run(asyncio.wait_for(go(), 120))
        assert proxy.logins() == 1, proxy.payloads
        assert proxy.payloads.get(OPEN_SESSION) == 1, proxy.payloads
        assert proxy.up == sent, "a call after the refused login sent a datagram"
    assert set(first) == set(nodes) == set(again)
    refused = "the BMC rejected the credentials (RAKP 2 message authentication code did not verify"
    # the one discovery of the one target (the BMC) failed: every node's power-on says so
    for outcome in first.values():
        assert isinstance(outcome, AuthenticationFailed), outcome
        assert refused in outcome.message and "not tried again" not in outcome.message
    # every call since failed at once with that first error and the hint
    for outcome in again.values():
        assert isinstance(outcome, AuthenticationFailed), outcome
    for words in [o.message for o in again.values()] + [r.detail for r in reads]:
        assert refused in words and "[not tried again: this endpoint refused" in words, words
        assert "manners.lockout_s" in words
    assert all(r.state is PowerState.UNKNOWN for r in reads)
    assert took < 5.0, f"the locked-out calls took {took:.2f} s"


def _bmc(tmp_path: Path, power: str) -> PyghmiBmc:
    return PyghmiBmc(tmp_path / "pyghmi", power=power, already=0xD5, soft_off_delay_s=0.2)


def _one(bmc: PyghmiBmc) -> dict[str, Any]:
    cfg = _fleet(bmc.secret_file("oper"), [bmc.address], timeouts=TIMEOUTS,
                 manners={"min_interval_s": 0.2})
    return cfg


def test_power_on_answered_0xd5_while_on_is_read_back_and_done(tmp_path: Path) -> None:
    with _bmc(tmp_path, "on") as bmc:
        cfg = _one(bmc)

        async def go() -> Any:
            async with PowerHost(parse_config(cfg)) as host:
                return await host.invoke("n0", "power-on", reason="already on")

        result = asyncio.run(asyncio.wait_for(go(), 60))
        state = bmc.state()
    assert isinstance(result, InvokeResult), result
    assert result.readback is PowerState.ON
    assert result.detail.startswith("already on: the device refused power-on (")
    assert "completion code 0xD5, command not supported in the present state" in result.detail
    assert "a readback confirmed on" in result.detail
    assert "refused power up: already on" in state["log"]
    assert state["boots"] == 0 and state["power"] == "on"


def test_shutdown_answered_0xd5_while_off_is_read_back_and_done(tmp_path: Path) -> None:
    with _bmc(tmp_path, "off") as bmc:
        cfg = _one(bmc)

        async def go() -> Any:
            async with PowerHost(parse_config(cfg)) as host:
                return await host.invoke("n0", "shutdown", reason="already off")

        result = asyncio.run(asyncio.wait_for(go(), 60))
        state = bmc.state()
    assert isinstance(result, InvokeResult), result
    assert result.readback is PowerState.OFF
    assert result.detail.startswith("already off: the device refused shutdown (")
    assert "0xD5" in result.detail
    assert "refused soft-off: already off" in state["log"]


def test_power_on_answered_0xd5_does_the_verb_when_off(tmp_path: Path) -> None:
    # the same peer carries a power up of a machine that is off: the 0xD5 above is its
    # answer to "already there", not a refusal of every power up
    with _bmc(tmp_path, "off") as bmc:
        cfg = _one(bmc)

        async def go() -> Any:
            async with PowerHost(parse_config(cfg)) as host:
                return await host.invoke("n0", "power-on", reason="off, on")

        result = asyncio.run(asyncio.wait_for(go(), 60))
        state = bmc.state()
    assert isinstance(result, InvokeResult), result
    assert not result.detail.startswith("already")
    assert state["power"] == "on" and state["boots"] == 1


def test_offers_json_shows_the_channel_manners(tmp_path: Path) -> None:
    need_ipmi_sim()
    with IpmiSim(tmp_path / "sim") as sim:
        defaults = deployment(tmp_path / "defaults.yaml", sim)
        paced = deployment(tmp_path / "paced.yaml", sim, manners={"min_interval_s": 2})
        outs = [cli("--config", str(path), "offers", "-o", "json") for path in (defaults, paced)]
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    got = [json.loads(o.stdout)["channels"] for o in outs]
    # the ipmi type's defaults: one call and one session per BMC, Ironic's 5 s
    assert got[0] == [{"channel": "bmc", "type": "ipmi", "manners": {
        "per_endpoint": 1, "sessions": 1, "min_interval_s": 5.0, "lockout_s": 600.0}}]
    assert got[1][0]["manners"] == {
        "per_endpoint": 1, "sessions": 1, "min_interval_s": 2.0, "lockout_s": 600.0}
