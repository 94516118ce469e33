"""Reading power state back: per node, through its channels, believed only where it can be.

:class:`Reader` reads a node through its channels in preference order (or every channel,
to show disagreement), never believing an ``off`` from a channel that declares it cannot
see power off; reads many nodes at once; finds a boot marker; waits for the state a verb
leads to; and starts a :class:`~powerplane.readback.PowerOffWatch` after a shutdown. Each
read is one :meth:`~powerplane.host.calls.Calls.call`. :class:`NodeReading` and
:class:`ChannelReading` are what it returns.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import PowerState, Reading
from powerplane.config import Deployment
from powerplane.errors import ConfigError, PowerplaneError
from powerplane.host.calls import target_key
from powerplane.host.discovery import Discovery, spec_of
from powerplane.readback import PowerOffWatch
from powerplane.readback import Reader as ReadNode

__all__ = ["ChannelReading", "NodeReading", "Reader", "expected"]

log = logging.getLogger("powerplane.host")


def expected(verb: Verb) -> PowerState:
    """The state ``verb`` leads to."""
    return PowerState.OFF if verb in (Verb.SHUTDOWN, Verb.TERMINATE) else PowerState.ON


@dataclass(frozen=True)
class ChannelReading:
    """One channel's readback of a node: a state, or the error that prevented one."""

    channel: str
    state: PowerState
    detail: str = ""
    error: str | None = None
    """The error class when the channel failed (no reading was taken)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "channel": self.channel, "state": self.state.value, "detail": self.detail,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class NodeReading:
    """A node's power state as read back through its channels.

    ``state`` is the first believable ``on``/``off`` in the node's preference order;
    ``readings`` holds what every channel read (or the first that answered, when the
    host was asked for one reading only).
    """

    node: str
    state: PowerState
    channel: str | None
    detail: str = ""
    readings: tuple[ChannelReading, ...] = field(default=())

    @property
    def observed(self) -> bool:
        """Whether any channel produced a reading (a blind channel's declared unknown counts)."""
        return any(r.error is None for r in self.readings)

    @property
    def disagreement(self) -> bool:
        """Whether believable channels read different states (one on, another off)."""
        seen = {r.state for r in self.readings
                if r.error is None and r.state is not PowerState.UNKNOWN}
        return len(seen) > 1

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``powerplane state -o json``."""
        return {
            "node": self.node,
            "state": self.state.value,
            "channel": self.channel,
            "detail": self.detail,
            "readings": [r.as_dict() for r in self.readings],
            "disagreement": self.disagreement,
        }


class Reader:
    """The readbacks of one host (see the module docstring)."""

    def __init__(self, deployment: Deployment, discovery: Discovery) -> None:
        self.deployment = deployment
        self.discovery = discovery
        self.calls = discovery.calls

    async def read(
        self, node: str, every_channel: bool, *, config_errors: bool
    ) -> NodeReading:
        """``PowerHost.read_power_state``; ``config_errors`` False: a channel's config error
        is its unknown reading (error ``ConfigError``), as any other failure."""
        spec = spec_of(self.deployment, node)
        discovery = self.discovery

        async def one(channel: str, target: Any) -> ChannelReading:
            try:
                reading = await self.calls.call(channel, "read_power_state", target)
            except ConfigError as exc:
                if config_errors:
                    raise
                return ChannelReading(channel, PowerState.UNKNOWN, str(exc), type(exc).__name__)
            except PowerplaneError as exc:
                return ChannelReading(channel, PowerState.UNKNOWN, str(exc), type(exc).__name__)
            if not isinstance(reading, Reading):
                return ChannelReading(channel, PowerState.UNKNOWN,
                                      f"returned {type(reading).__name__}, not a Reading",
                                      "ProtocolError")
            key = (channel, target_key(target))
            if reading.state is PowerState.OFF and key not in discovery.caps:
                # whether an off is believed depends on what the channel declares
                await discovery.discover_pairs({key: target}, again=False)
            caps = discovery.capabilities(channel, target)
            if (
                reading.state is PowerState.OFF
                and isinstance(caps, CapabilitySet)
                and not caps.sees_power_off
            ):
                return ChannelReading(channel, PowerState.UNKNOWN,
                                      "reported off but declares it cannot see power off")
            return ChannelReading(channel, reading.state, reading.detail)

        readings: list[ChannelReading] = []
        if every_channel:
            # every channel answers before a config error is raised (no read left running)
            answers = await asyncio.gather(*(one(r.channel, r.target) for r in spec.channels),
                                           return_exceptions=True)
            for answer in answers:
                if isinstance(answer, BaseException):
                    raise answer
                readings.append(answer)
        else:
            for ref in spec.channels:
                readings.append(await one(ref.channel, ref.target))
                if readings[-1].state is not PowerState.UNKNOWN:
                    break
        for r in readings:
            if r.state is not PowerState.UNKNOWN:
                detail = r.detail
                if every_channel and len({x.state for x in readings
                                          if x.state is not PowerState.UNKNOWN}) > 1:
                    others = ", ".join(f"{x.channel} reads {x.state.value}" for x in readings
                                       if x.state not in (PowerState.UNKNOWN, r.state))
                    detail = "; ".join(p for p in (detail, f"channels disagree: {others}") if p)
                return NodeReading(node, r.state, r.channel, detail, tuple(readings))
        notes = [f"{r.channel}: {r.detail or 'unknown'}" for r in readings]
        if not spec.channels:
            notes.append("the node has no channel configured")
        first = spec.channels[0].channel if spec.channels else None
        return NodeReading(node, PowerState.UNKNOWN, first, "; ".join(notes), tuple(readings))

    async def read_many(
        self, nodes: Sequence[str], every_channel: bool,
        progress: Callable[[str, NodeReading], None] | None,
    ) -> dict[str, NodeReading]:
        """``PowerHost.read_many``."""
        out: dict[str, NodeReading] = {}
        failed: dict[str, ConfigError] = {}

        async def one(node: str) -> None:
            try:
                out[node] = await self.read(node, every_channel, config_errors=True)
            except ConfigError as exc:
                failed[node] = exc
                return
            if progress is not None:
                progress(node, out[node])

        order = list(dict.fromkeys(nodes))
        await asyncio.gather(*(one(n) for n in order))
        for node in order:
            if node in failed:
                raise failed[node]
        return {n: out[n] for n in order}

    async def boot_marker(self, node: str) -> tuple[str, str] | None:
        """``PowerHost.boot_marker``."""
        channels = self.calls.channels
        for ref in spec_of(self.deployment, node).channels:
            if channels.get(ref.channel) is None or not channels.traits[ref.channel].boot_marker:
                continue
            try:
                value = await self.calls.call(ref.channel, "boot_marker", ref.target)
            except PowerplaneError as exc:
                log.info("boot marker of %s via %s: %s", node, ref.channel, exc)
                continue
            if isinstance(value, str) and value:
                return ref.channel, value
        return None

    async def await_state(self, node: str, verb: Verb, wait: float) -> PowerState:
        """Read back until the expected state or the deadline; the last read is at the deadline."""
        want = expected(verb)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        delay = 0.2
        while True:
            # the verb was sent: a config error of another channel is that channel's
            # unknown reading here, never this call's error
            state = (await self.read(node, False, config_errors=False)).state
            remaining = deadline - loop.time()
            if state is want or remaining <= 0:
                return state
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)

    def confirm_power_off(
        self, node: str, read: ReadNode, accepted_at: dt.datetime, window: float,
        cadence: float,
    ) -> PowerOffWatch:
        """``PowerHost.confirm_power_off`` (``read``: the host's ``read_power_state``)."""
        can_see = False
        for ref in spec_of(self.deployment, node).channels:
            caps = self.discovery.capabilities(ref.channel, ref.target)
            if not isinstance(caps, CapabilitySet) or caps.sees_power_off:
                can_see = True
        return PowerOffWatch(read, accepted_at, window, cadence, can_see_off=can_see)
