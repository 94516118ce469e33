"""The plugin module the ``powerplane`` entry point ``talos`` names: registers the type.

It imports only the config model; the channel (grpclib, protobuf) is imported when
the first ``talos`` channel is created, so plugin discovery stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from powerplane import ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_talos.config import TalosConfig, parse_target

__all__ = ["TALOS", "register_channel_types", "register_demo_peers"]


def _factory(name: str, config: Any) -> Any:
    from powerplane_talos.channel import TalosChannel

    return TalosChannel(name, config)


TALOS = ChannelType(
    name="talos",
    config=TalosConfig,
    factory=_factory,
    target=parse_target,
    # both transports pass powerplane.about_to_send() right before Reboot/Shutdown leaves
    gated_sends=True,
    description="Talos machine API (gRPC over mutual TLS, or talosctl): reboot and "
    "graceful shutdown, never power-on",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``talos`` channel type."""
    register(TALOS)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the Talos mock to ``powerplane demo``."""
    from powerplane_talos.demo import PEER

    register(PEER)
