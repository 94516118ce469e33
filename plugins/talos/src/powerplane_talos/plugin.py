"""The plugin module the ``powerplane`` entry point ``talos`` names: registers the type."""

from __future__ import annotations

from collections.abc import Callable

from powerplane import ChannelType, hookimpl
from powerplane_talos.channel import TalosChannel, parse_target
from powerplane_talos.config import TalosConfig

__all__ = ["TALOS", "register_channel_types"]

TALOS = ChannelType(
    name="talos",
    config=TalosConfig,
    factory=TalosChannel,
    target=parse_target,
    description="Talos machine API (gRPC over mutual TLS, or talosctl): reboot and "
    "graceful shutdown, never power-on",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``talos`` channel type."""
    register(TALOS)
