"""The host's open channels: each created on first use, its optional parts found once, closed.

:class:`Channels` holds the live channel objects of one host, what each offers besides
:class:`~powerplane.channel.Channel` (one :class:`~powerplane.channel.ChannelTraits`
record per channel, found with ``isinstance`` when the channel is created), why a channel
could not be created, and the bounded close of them all.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from powerplane.channel import Channel, ChannelTraits
from powerplane.config import ConfiguredChannel, Deployment, channel_secret_problems
from powerplane.errors import ChannelError, ConfigError, PowerplaneError
from powerplane.workers import call as in_worker

__all__ = ["CLOSE_GRACE_S", "STUCK_CLOSE_S", "Channels"]

log = logging.getLogger("powerplane.host")

CLOSE_GRACE_S = 0.5
"""How long :meth:`Channels.close` waits for a channel's close once the host gave up on one
of its calls, or was itself cancelled (an interrupt): the rest is left to its thread."""
STUCK_CLOSE_S = 0.1
"""The same after an interrupt for a channel with a call the host gave up on (a close of a
channel whose library is stuck in a call usually waits for that call)."""


class Channels:
    """The channels of one deployment, created on first use (see :meth:`get`)."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.open: dict[str, Channel] = {}
        self.broken: dict[str, PowerplaneError] = {}
        """Channel name -> why it could not be created (the factory's own error)."""
        self.traits: dict[str, ChannelTraits] = {}

    def create_all(self) -> None:
        """Create every channel of the deployment not created (or failed) yet."""
        for name, configured in self.deployment.channels.items():
            if name not in self.open and name not in self.broken:
                self._create(name, configured)

    def get(self, name: str) -> Channel | None:
        """Channel ``name``, created on first use (None: it could not be, or no such)."""
        channel = self.open.get(name)
        if channel is None and name not in self.broken:
            configured = self.deployment.channels.get(name)
            if configured is not None:
                self._create(name, configured)
                channel = self.open.get(name)
        return channel

    def _create(self, name: str, configured: ConfiguredChannel) -> None:
        missing = channel_secret_problems(configured)  # its secrets, when it opens
        if missing:
            self.broken[name] = ConfigError(missing, source=self.deployment.source)
            return
        try:
            channel = configured.type.factory(name, configured.config)
            self.traits[name] = ChannelTraits.of(channel)
            self.open[name] = channel
        except PowerplaneError as exc:
            self.broken[name] = exc.with_traceback(None)
        except Exception as exc:  # a plugin bug must not take the host down
            self.broken[name] = ChannelError(
                f"channel could not be created: {type(exc).__name__}")
            log.warning("channel %s: factory raised %s", name, type(exc).__name__)

    def unopened(self, name: str) -> PowerplaneError:
        """Why channel ``name`` cannot be called: a config error its factory raised
        (e.g. a secret that holds no PEM) as it was raised, so it stays bad input (exit 2);
        any other failure to create it, or no such channel, a :class:`ChannelError`."""
        err = self.broken.get(name)
        if isinstance(err, ConfigError):
            return err.with_traceback(None)  # raised again: no traceback piles up on it
        return ChannelError(str(err) if err is not None else "no such channel", channel=name)

    def endpoint(self, name: str, target: Any) -> Any:
        """The key calls of channel ``name`` for ``target`` are bounded by: the channel's
        name, with the device it names (``endpoint(target)``) where it names one."""
        traits = self.traits.get(name)
        if traits is None or traits.endpoint is None:
            return name
        try:
            return (name, traits.endpoint(target))
        except Exception:
            return name

    def gated(self, name: str) -> bool:
        """Whether channel ``name``'s type passes every verb request through the gate."""
        configured = self.deployment.channels.get(name)
        return bool(configured is not None and configured.type.gated_sends)

    async def close(self, timeout_s: float, stuck: set[str]) -> None:
        """Close every channel (each plugin logs out its sessions), concurrently.

        Each close is bounded: by ``timeout_s``, or by :data:`CLOSE_GRACE_S` for a channel
        in ``stuck`` (one with a call the host gave up on) and when the host closes because
        its task was cancelled (an interrupt; :data:`STUCK_CLOSE_S` for a stuck channel then).
        """
        task = asyncio.current_task()
        cancelled = task is not None and task.cancelling() > 0
        channels = list(self.open.items())
        self.open.clear()

        async def one(name: str, channel: Channel) -> None:
            is_stuck = name in stuck
            bound = (STUCK_CLOSE_S if cancelled and is_stuck else
                     CLOSE_GRACE_S if cancelled or is_stuck else timeout_s)
            bound = min(bound, timeout_s)
            try:
                async with asyncio.timeout(bound):
                    if inspect.iscoroutinefunction(channel.close):
                        await channel.close()
                    else:
                        result = await in_worker(channel.close)
                        if inspect.isawaitable(result):
                            await result
            except TimeoutError:
                # after an interrupt this is expected, not news
                log.log(logging.INFO if cancelled else logging.WARNING,
                        "channel %s: close did not finish within %g s; left to its worker "
                        "thread", name, bound)
            except Exception as exc:
                log.warning("channel %s: close failed: %s", name, type(exc).__name__)

        if channels:
            await asyncio.gather(*(one(name, channel) for name, channel in channels))
