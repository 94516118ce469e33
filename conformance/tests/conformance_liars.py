"""Channel types that lie, each in one way the conformance suite must catch.

Each wraps core's simulated channel; registered for the tests with
``Registry.add_module`` (see conftest.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from powerplane import (
    Acceptance,
    AuthenticationFailed,
    CapabilitySet,
    ChannelType,
    PowerplaneError,
    Reading,
    RefusedByDevice,
    Verb,
    hookimpl,
)
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target


class OffReader(SimulatedChannel):
    """Readback reports off while the machine is on."""

    async def read_power_state(self, target: str) -> Reading:
        await super().read_power_state(target)
        return Reading.off("chassis says off")


class BlindButSaysOff(SimulatedChannel):
    """Declares it cannot see power off, then reports off."""

    async def capabilities(self, target: str) -> CapabilitySet:
        caps = await super().capabilities(target)
        return CapabilitySet(caps.verbs, caps.source, caps.detail, sees_power_off=False)


class StaleReader(SimulatedChannel):
    """Caches the first reading of each machine forever. Every session to one endpoint
    shares one device (as real devices are), so a fresh session sees the truth."""

    _devices: ClassVar[dict[str, SimulatedChannel]] = {}

    def __init__(self, name: str, config: SimulatedConfig) -> None:
        super().__init__(name, config)
        key = config.endpoint or name
        self.device = self._devices.setdefault(key, SimulatedChannel(name, config))
        self._cache: dict[str, Reading] = {}

    async def reboot(self, target: str) -> Acceptance:
        return await self.device.reboot(target)

    async def shutdown(self, target: str) -> Acceptance:
        return await self.device.shutdown(target)

    async def power_on(self, target: str) -> Acceptance:
        return await self.device.power_on(target)

    async def read_power_state(self, target: str) -> Reading:
        if target not in self._cache:
            self._cache[target] = await self.device.read_power_state(target)
        return self._cache[target]


class LaggingReader(SimulatedChannel):
    """Reads each machine as it was :attr:`LAG_S` seconds ago (a per-session cache that is
    refreshed, but late: longer than the settle window). Every session to one endpoint
    shares one device, so a fresh session, with no history yet, reads the truth. Reading
    faster does not help: what it shows depends on time, not on how often it is asked."""

    LAG_S: ClassVar[float] = 2.0
    _devices: ClassVar[dict[str, SimulatedChannel]] = {}

    def __init__(self, name: str, config: SimulatedConfig) -> None:
        super().__init__(name, config)
        key = config.endpoint or name
        self.device = self._devices.setdefault(key, SimulatedChannel(name, config))
        self._history: dict[str, list[tuple[float, Reading]]] = {}

    async def reboot(self, target: str) -> Acceptance:
        return await self.device.reboot(target)

    async def shutdown(self, target: str) -> Acceptance:
        return await self.device.shutdown(target)

    async def power_on(self, target: str) -> Acceptance:
        return await self.device.power_on(target)

    async def read_power_state(self, target: str) -> Reading:
        now = time.monotonic()
        seen = self._history.setdefault(target, [])
        seen.append((now, await self.device.read_power_state(target)))
        while len(seen) > 1 and seen[1][0] <= now - self.LAG_S:
            seen.pop(0)  # the newest reading at least LAG_S old stays first
        return seen[0][1]


class Swallower(SimulatedChannel):
    """Swallows every error of a verb and reports success."""

    async def _quiet(self, fn: Callable[[str], Any], target: str) -> Acceptance:
        try:
            await fn(target)
        except PowerplaneError:
            pass
        return Acceptance()

    async def reboot(self, target: str) -> Acceptance:
        return await self._quiet(super().reboot, target)

    async def shutdown(self, target: str) -> Acceptance:
        return await self._quiet(super().shutdown, target)

    async def power_on(self, target: str) -> Acceptance:
        return await self._quiet(super().power_on, target)


class Leaker(SimulatedChannel):
    """Puts its password into the authentication error."""

    async def read_power_state(self, target: str) -> Reading:
        try:
            return await super().read_power_state(target)
        except AuthenticationFailed as exc:
            given = self.config.password.reveal() if self.config.password else ""
            raise AuthenticationFailed(f"login rejected for password {given!r}",
                                       channel=self.name, target=target) from exc


class NoOp(SimulatedChannel):
    """Does not advertise shutdown, yet accepts it and does nothing."""

    async def shutdown(self, target: str) -> Acceptance:
        return Acceptance()


class CannotPowerBackOn(SimulatedChannel):
    """Honest, but once a machine is off its power-on fails at the device: the suite's
    restore after a shutdown check cannot succeed."""

    async def power_on(self, target: str) -> Acceptance:
        raise RefusedByDevice("power-on rejected: chassis interlock open", channel=self.name,
                              target=target)


class Batching(SimulatedChannel):
    """Honest, with ``invoke_batch`` (as PowerHost.invoke_many uses); counts its batches."""

    batches: ClassVar[int] = 0

    async def invoke_batch(self, verb: Verb, targets: list[str]) -> list[Any]:
        type(self).batches += 1
        out: list[Any] = []
        for target in targets:
            try:
                out.append(await getattr(self, verb.method)(target))
            except PowerplaneError as exc:
                out.append(exc)
        return out


class Recording(SimulatedChannel):
    """Honest; records every verb sent, in order, as ``verb target``, for every session."""

    sent: ClassVar[list[str]] = []

    async def reboot(self, target: str) -> Acceptance:
        type(self).sent.append(f"reboot {target}")
        return await super().reboot(target)

    async def shutdown(self, target: str) -> Acceptance:
        type(self).sent.append(f"shutdown {target}")
        return await super().shutdown(target)

    async def power_on(self, target: str) -> Acceptance:
        type(self).sent.append(f"power-on {target}")
        return await super().power_on(target)


LIARS = {
    "honest-recording": Recording,
    "honest-batching": Batching,
    "liar-off-reader": OffReader,
    "liar-blind": BlindButSaysOff,
    "liar-stale": StaleReader,
    "liar-lagging": LaggingReader,
    "liar-swallow": Swallower,
    "liar-leak": Leaker,
    "liar-noop": NoOp,
    "stuck-off": CannotPowerBackOn,
}


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    for name, cls in LIARS.items():
        register(ChannelType(name=name, config=SimulatedConfig, factory=cls,
                             target=parse_target, description="a liar, for the tests"))

