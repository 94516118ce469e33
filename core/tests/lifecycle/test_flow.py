"""End-to-end flows through the lifecycle on simulated machines and a simulated cluster."""

from __future__ import annotations

from lifecycle_support import ceremony

from powerplane.lifecycle import Phase


async def test_reboot_goes_through_every_phase_and_sends_one_reboot(open_lifecycle) -> None:
    lc = await open_lifecycle(cluster={"type": "simulated", "pods": {"w1": ["a", "b"]}})
    m = await lc.request("w1", "reboot", ceremony("w1"))
    await lc.run(until_idle=True)
    done = lc.store.get(m.name)
    assert done.phase is Phase.COMPLETE
    path = [t.to for t in done.status.history]
    assert path == [Phase.CORDONED, Phase.DRAINING, Phase.DRAINED, Phase.REBOOTING,
                    Phase.RETURNING, Phase.COMPLETE]
    assert lc.host.channel("lab").dispatches == [("reboot", "w1")]
    assert not await lc.ports.cluster.is_cordoned("w1")
