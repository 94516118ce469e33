"""The plugin module the ``powerplane`` entry point ``talos`` names: registers the type.

It imports only the config model; the channel (grpclib, protobuf) is imported when
the first ``talos`` channel is created, so plugin discovery stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Address, ChannelType, hookimpl
from powerplane.testing import Peer
from powerplane_talos.config import TalosConfig, parse_target

if TYPE_CHECKING:
    from powerplane_talos.channel import TalosChannel

__all__ = ["TALOS", "address_of", "make_channel", "register_channel_types",
           "register_demo_peers"]


def make_channel(name: str, config: TalosConfig) -> TalosChannel:
    """The ``talos`` channel named ``name`` (imports grpclib and protobuf on first use)."""
    from powerplane_talos.channel import TalosChannel

    return TalosChannel(name, config)


ENDPOINT = Address("endpoint", format="host:port")
"""An inline ``endpoint`` is the Talos API's ``host:port``."""


def address_of(config: TalosConfig) -> Address | None:
    """The inline ``endpoint``; ``None`` when the endpoints are in a talosconfig file."""
    return ENDPOINT if config.endpoint is not None else None


TALOS: ChannelType[TalosConfig, str] = ChannelType(
    name="talos",
    config=TalosConfig,
    factory=make_channel,
    target=parse_target,
    # both transports pass powerplane.about_to_send() right before Reboot/Shutdown leaves
    gated_sends=True,
    address=address_of,
    description="Talos machine API (gRPC over mutual TLS, or talosctl): reboot and "
    "graceful shutdown, never power-on",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``talos`` channel type."""
    register(TALOS)


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the Talos mock to ``powerplane demo``."""
    from powerplane_talos.peer import PEER

    register(PEER)
