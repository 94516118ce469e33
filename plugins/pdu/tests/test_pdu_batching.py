"""PDU batching counted on the wire: a loopback UDP proxy in front of snmpsim.

The proxy forwards every datagram between the channel and snmpsim and counts the SNMP
requests that pass (the channel runs with ``retries: 0``, so one request is one datagram).
Power-on of 24 outlets through ``invoke_many`` reads every outlet in one GET, writes them
in one SET, and reads them back in one GET; before, each outlet was read, written and read
back on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pdu_peers import AUTH_KEY, PRIV_KEY, SnmpSim, write_snmprec

from powerplane import InvokeResult, PowerHost, PowerState, Verb, parse_config
from powerplane_pdu import PROFILES, PduChannel

OUTLETS = 24
DEVICES = {
    "b24-off": dict.fromkeys(range(1, OUTLETS + 1), "off"),
    "b24-mixed": {i: ("on" if i <= 12 else "off") for i in range(1, OUTLETS + 1)},
    "b24-cycle": {i: ("on" if i <= 2 else "off") for i in range(1, OUTLETS + 1)},
}
PROFILE = "apc-rpdu2"


class _Forward(asyncio.DatagramProtocol):
    """One client's path to the agent: answers come back to the client's address."""

    def __init__(self, front: asyncio.DatagramTransport, client: tuple[str, int]) -> None:
        self.front, self.client = front, client

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.front.sendto(data, self.client)


class CountingProxy(asyncio.DatagramProtocol):
    """UDP on 127.0.0.1:<port> forwarded to ``upstream``; ``requests`` counts what clients send."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.requests = 0
        self.front: asyncio.DatagramTransport | None = None
        self.backs: dict[tuple[str, int], asyncio.DatagramTransport] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.front = transport  # type: ignore[assignment]  # a datagram transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.requests += 1
        asyncio.get_running_loop().create_task(self._send(data, addr))

    async def _send(self, data: bytes, addr: tuple[str, int]) -> None:
        back = self.backs.get(addr)
        if back is None:
            assert self.front is not None
            front = self.front
            back, _ = await asyncio.get_running_loop().create_datagram_endpoint(
                lambda: _Forward(front, addr), remote_addr=self.upstream)
            self.backs[addr] = back
        back.sendto(data)

    @property
    def port(self) -> int:
        assert self.front is not None
        return int(self.front.get_extra_info("sockname")[1])

    def close(self) -> None:
        for back in self.backs.values():
            back.close()
        if self.front is not None:
            self.front.close()


@pytest.fixture(scope="module")
def batch_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SnmpSim]:
    """An snmpsim of this module's own: 24-outlet PDUs no other test writes to."""
    work = tmp_path_factory.mktemp("snmpsim-batch")
    data = work / "data"
    data.mkdir()
    for community, outlets in DEVICES.items():
        write_snmprec(data, community, PROFILES[PROFILE], outlets)
    sim = SnmpSim(data, work, AUTH_KEY, PRIV_KEY)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
async def proxy(batch_sim: SnmpSim) -> AsyncIterator[CountingProxy]:
    loop = asyncio.get_running_loop()
    _, counting = await loop.create_datagram_endpoint(
        lambda: CountingProxy(("127.0.0.1", batch_sim.port)), local_addr=("127.0.0.1", 0))
    try:
        yield counting
    finally:
        counting.close()


def _deployment(port: int, community: Path, **keys: Any) -> dict[str, Any]:
    return {
        "channels": {"rack": {
            "type": "pdu", "protocol": "snmp", "profile": PROFILE, "host": "127.0.0.1",
            "port": port, "community": {"file": str(community)},
            "timeouts": {"connect_s": 2, "read_s": 2}, "retries": 0, "reboot_delay_s": 0,
            **keys,
        }},
        "nodes": {f"n{i}": {"channels": [{"channel": "rack", "target": {"outlets": [i]}}]}
                  for i in range(1, OUTLETS + 1)},
    }


@pytest.fixture
def community(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        path = tmp_path / f"community-{name}"
        path.write_text(name + "\n")
        return path

    return make


async def _power_on(proxy: CountingProxy, cfg: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with PowerHost(parse_config(cfg)) as host:
        channel = host.channel("rack")
        assert isinstance(channel, PduChannel)
        before = proxy.requests
        async with asyncio.timeout(30):
            results = await host.invoke_many(list(host.nodes), Verb.POWER_ON, reason="back")
        sent = proxy.requests - before
        states = {n: (await host.read_power_state(n)).state for n in host.nodes}
    return sent, {"results": results, "states": states}


async def test_power_on_of_24_outlets_reads_once_writes_once_and_reads_back_once(
    proxy: CountingProxy, community: Callable[[str], Path],
) -> None:
    sent, got = await _power_on(proxy, _deployment(proxy.port, community("b24-off")))
    assert all(isinstance(r, InvokeResult) for r in got["results"].values()), got["results"]
    assert all(s is not PowerState.OFF for s in got["states"].values())
    # one GET of every outlet, one SET of all 24, one GET reading them back
    assert sent <= 3, f"{sent} SNMP requests for a power-on of {OUTLETS} outlets"


async def test_each_target_keeps_its_own_already_on_policy_in_one_batch(
    proxy: CountingProxy, community: Callable[[str], Path],
) -> None:
    sent, got = await _power_on(proxy, _deployment(proxy.port, community("b24-mixed")))
    results = got["results"]
    for i in range(1, 13):  # refused as already on: read back on, so done (never switched)
        result = results[f"n{i}"]
        assert isinstance(result, InvokeResult), result
        assert result.readback is PowerState.ON and "already on" in result.detail
    for i in range(13, OUTLETS + 1):
        assert isinstance(results[f"n{i}"], InvokeResult)
        assert results[f"n{i}"].detail == f"rack/{i}: switched on"
    # one read, one write, one readback for the batch; one readback per refused outlet
    assert sent <= 3 + 12


async def test_already_on_targets_are_cycled_together_when_configured(
    proxy: CountingProxy, community: Callable[[str], Path],
) -> None:
    cfg = _deployment(proxy.port, community("b24-cycle"), on_when_already_on="cycle")
    sent, got = await _power_on(proxy, cfg)
    results = got["results"]
    for i in (1, 2):
        assert results[f"n{i}"].detail == f"rack/{i}: already on; switched off and on again"
    assert all(isinstance(results[f"n{i}"], InvokeResult) for i in range(3, OUTLETS + 1))
    # read, write the 22, read back; then off, read back, on, read back for the 2
    assert sent <= 7
