"""What a plugin registers through ``register_demo_peers``: a :class:`Peer` it can start on
loopback, and the :class:`StartedPeer` starting it returns.

In the seam layer, beside the channel vocabulary, so the hooks and the registry name them
without naming the test helpers; their public home is :mod:`powerplane.testing`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Peer", "Role", "StartedPeer"]

Role = Literal["bmc", "inband", "pdu", "cloud"]
"""What a peer plays: a BMC, an in-band OS API, a PDU, a cloud."""


@dataclass
class StartedPeer:
    """A started peer: the channel config that reaches it, its targets, how to stop it."""

    config: dict[str, Any]
    """The channel's config, ``type`` included; secrets as references to files it wrote."""
    targets: list[Any]
    """At least two targets (systems, node addresses, outlet sets, instance ids)."""
    stop: Callable[[], None]
    """Stops every process the peer started, by its own handle."""
    description: str
    """One line for people: what runs where."""
    power_on_by_hand: Callable[[Any], None] | None = None
    """For channels that cannot power on: a person at the rack presses the button."""
    conformance: dict[str, Any] = field(default_factory=dict)
    """Extra keys for the conformance section (declared defects as ``xfail``, ``negative``)."""
    pids: list[int] = field(default_factory=list)
    """The processes it runs; when empty the demo records the processes it saw appear
    while the peer started (``--keep`` prints them and a command that stops them)."""


@dataclass(frozen=True)
class Peer:
    """A real protocol peer a plugin can start on loopback (for the demo and for tests)."""

    name: str
    """Short name used by ``--only`` (``redfish``, ``talos``, ``pdu``, ``ec2``)."""
    role: Role
    """What it plays in the walkthrough: a BMC, an in-band OS API, a PDU, a cloud."""
    start: Callable[[Path], StartedPeer]
    """Start the peer in this directory (blocking, may take seconds); raise on failure."""
