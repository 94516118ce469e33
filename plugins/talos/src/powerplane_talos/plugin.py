"""The plugin module the ``powerplane`` entry point ``talos`` names: registers the type.

It imports neither the config model nor the channel: :data:`REGISTERS` names the type, so
the config model is imported (and :data:`TALOS` built) when a deployment names a ``talos``
channel, and the channel (grpclib, protobuf) when the first one is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import Address, ChannelType
    from powerplane.testing import Peer
    from powerplane_talos.channel import TalosChannel
    from powerplane_talos.config import TalosConfig

    ENDPOINT: Address
    TALOS: ChannelType[TalosConfig, str]

__all__ = ["ENDPOINT", "REGISTERS", "TALOS", "address_of", "make_channel",
           "register_channel_types", "register_demo_peers"]

REGISTERS: Registers = {"channel": ("talos",)}
"""What the hooks register, read by the registry without calling them."""


def make_channel(name: str, config: TalosConfig) -> TalosChannel:
    """The ``talos`` channel named ``name`` (imports grpclib and protobuf on first use)."""
    from powerplane_talos.channel import TalosChannel

    return TalosChannel(name, config)


def _endpoint() -> Address:
    """An inline ``endpoint`` is the Talos API's ``host:port``."""
    from powerplane import Address

    return Address("endpoint", format="host:port")


def address_of(config: TalosConfig) -> Address | None:
    """The inline ``endpoint``; ``None`` when the endpoints are in a talosconfig file."""
    return __getattr__("ENDPOINT") if config.endpoint is not None else None


def _build() -> ChannelType[TalosConfig, str]:
    from powerplane import ChannelType
    from powerplane_talos.config import TalosConfig, parse_target

    return ChannelType(
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


__getattr__, __dir__ = lazy_exports(__name__, {"ENDPOINT": _endpoint, "TALOS": _build})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType[Any, Any]], None]) -> None:
    """Register the ``talos`` channel type."""
    register(__getattr__("TALOS"))


@hookimpl
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Offer the Talos mock to ``powerplane demo``."""
    from powerplane_talos.peer import PEER

    register(PEER)
