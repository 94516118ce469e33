"""Several runners on one store: optimistic concurrency keeps every verb at most once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lifecycle_support import ceremony, make_config

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.lifecycle import Lifecycle, Phase
from powerplane.lifecycle.model import DispatchOutcome


async def test_two_runners_race_and_one_reboot_is_sent(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, channel={"latency_ms": 30})
    host = PowerHost(parse_config(cfg))
    await host.start()
    a = Lifecycle.for_host(host)
    b = Lifecycle.for_host(host)  # a second runner: its own store connection and runner id
    b.ports = a.ports
    b.reconciler.ports = a.ports
    try:
        names = [(await a.request(n, "reboot", ceremony(n))).name for n in ("w1", "w2")]
        for _ in range(3):
            await asyncio.gather(a.run(until_idle=True), b.run(until_idle=True))
        for name in names:
            m = a.store.get(name)
            assert m.phase is Phase.COMPLETE
            assert [d.outcome for d in m.status.dispatches] == [DispatchOutcome.ACCEPTED]
        assert sorted(host.channel("lab").dispatches) == [("reboot", "w1"), ("reboot", "w2")]
    finally:
        a.close()
        b.close()
        await host.close()
