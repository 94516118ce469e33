"""The plugin hooks of powerplane: one, ``register_channel_types``.

A plugin is a module exposed under the entry-point group ``powerplane`` that
implements the hook with :data:`hookimpl`::

    from powerplane import ChannelType, hookimpl

    @hookimpl
    def register_channel_types(register):
        register(ChannelType(name="mybmc", config=MyConfig, factory=MyChannel))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from powerplane.channel import ChannelType
    from powerplane.testing import Peer

__all__ = ["hookimpl", "hookspec", "register_channel_types", "register_demo_peers"]

PROJECT = "powerplane"

hookspec = pluggy.HookspecMarker(PROJECT)
"""Marks a hook specification of powerplane."""
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's implementation of a powerplane hook."""


@hookspec
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the channel types this plugin provides.

    Call ``register(ChannelType(...))`` once per channel type. Called once per
    plugin when plugins are first used, never at import. A name registered twice is
    a load error of the second plugin; every other plugin still loads.
    """


@hookspec
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Register the real protocol peers this plugin can start on loopback for ``powerplane demo``.

    Optional. Call ``register(powerplane.testing.Peer(...))`` once per peer (an emulator, a mock
    server, a simulator); the demo starts each in a temporary directory, configures
    a channel of this plugin against it, and stops it by its own handle afterwards.
    Importing the peer's machinery must happen inside ``Peer.start``.
    """
