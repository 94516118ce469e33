"""Test-only channel types that talk to lineproto_server.py over TCP: a real network peer
for the suite's closed-port, silent-server and wrong-credential checks.

``lineproto`` declares nothing (the suite is told by ``negative:`` hints);
``lineproto-declared`` declares its address, its secret (by its ``SecretRef`` type) and
``timeouts: Timeouts``, as every in-tree plugin does, so the suite needs no hints."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from powerplane import (
    Acceptance,
    Address,
    AuthenticationFailed,
    CapabilitySet,
    ChannelTimeout,
    ChannelType,
    ProtocolError,
    Reading,
    RefusedByDevice,
    SecretRef,
    Timeouts,
    Unreachable,
    Verb,
    hookimpl,
    require,
)


class LineConfig(BaseModel):
    """Config of a ``lineproto`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str
    """``host:port`` of the device."""
    password: SecretRef
    """The device password."""
    timeout_s: float = Field(5.0, gt=0)
    """Bound on connecting and on each answer."""


class DeclaredLineConfig(BaseModel):
    """Config of a ``lineproto-declared`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str
    """``host:port`` of the device."""
    password: SecretRef
    """The device password."""
    timeouts: Timeouts = Timeouts(connect_s=5, read_s=5)
    """Bounds on connecting and on each answer."""

    @property
    def timeout_s(self) -> float:
        return max(self.timeouts.connect_s, self.timeouts.read_s)


class LineChannel:
    def __init__(self, name: str, config: LineConfig | DeclaredLineConfig) -> None:
        self.name = name
        self.config = config
        self._caps = CapabilitySet.of(hard=[Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON],
                                      detail="line protocol device")

    def endpoint(self, target: str) -> str:
        return self.config.address

    async def _ask(self, target: str, command: str) -> str:
        host, _, port = self.config.address.rpartition(":")
        limit = self.config.timeout_s
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port)), limit)
        except TimeoutError as exc:
            raise ChannelTimeout(f"no connection within {limit:g} s", channel=self.name,
                                 target=target) from exc
        except OSError as exc:
            raise Unreachable(f"cannot connect to {self.config.address}: {exc.strerror}",
                              channel=self.name, target=target) from exc
        try:
            writer.write(f"AUTH {self.config.password.reveal()}\n{command} {target}\n".encode())
            answers = []
            for _ in range(2):
                line = await asyncio.wait_for(reader.readline(), limit)
                answers.append(line.decode().strip())
                if answers[0] != "OK":
                    break
        except TimeoutError as exc:
            raise ChannelTimeout(f"no answer within {limit:g} s", channel=self.name,
                                 target=target) from exc
        except OSError as exc:
            raise Unreachable(f"connection lost: {exc.strerror}", channel=self.name,
                              target=target) from exc
        finally:
            writer.close()
        if answers[0] == "DENIED":
            raise AuthenticationFailed("credentials rejected", channel=self.name, target=target)
        if len(answers) < 2 or answers[0] != "OK":
            raise ProtocolError(f"unexpected answer {answers!r}", channel=self.name,
                                target=target)
        if answers[1] == "ERR nosuch":
            raise RefusedByDevice(f"no such machine {target!r}", channel=self.name,
                                  target=target)
        return answers[1]

    async def capabilities(self, target: str) -> CapabilitySet:
        await self._ask(target, "STATE")
        return self._caps

    async def reboot(self, target: str) -> Acceptance:
        require(self._caps, Verb.REBOOT, self.name)
        await self._ask(target, "CYCLE")
        return Acceptance()

    async def shutdown(self, target: str) -> Acceptance:
        require(self._caps, Verb.SHUTDOWN, self.name)
        await self._ask(target, "OFF")
        return Acceptance()

    async def power_on(self, target: str) -> Acceptance:
        require(self._caps, Verb.POWER_ON, self.name)
        await self._ask(target, "ON")
        return Acceptance()

    async def read_power_state(self, target: str) -> Reading:
        answer = await self._ask(target, "STATE")
        return Reading.on() if answer == "on" else Reading.off()

    async def close(self) -> None:
        return None


DECLARED_ADDRESS = Address("address", format="host:port")
"""Where ``lineproto-declared`` keeps the device address."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    register(ChannelType(name="lineproto", config=LineConfig, factory=LineChannel,
                         description="a line-protocol device, for the tests"))
    register(ChannelType(name="lineproto-declared", config=DeclaredLineConfig,
                         factory=LineChannel, address=DECLARED_ADDRESS,
                         description="a line-protocol device that declares its address, "
                                     "secret and timeouts, for the tests"))
