"""powerplane-talos: the Talos machine API as a powerplane channel.

Talos is the in-band channel: it can reboot and shut down gracefully (Talos stops
its services, drains the kubelet and unmounts), it can never power on, and once a
machine is off its silence proves nothing. Two transports carry the calls: gRPC
over mutual TLS with grpclib (:mod:`powerplane_talos.grpc_transport`), and the
``talosctl`` binary as a subprocess (:mod:`powerplane_talos.talosctl_transport`).

Where to read first: :mod:`~powerplane_talos.plugin` (the hooks),
:mod:`~powerplane_talos.config`, :mod:`~powerplane_talos.channel`,
:mod:`~powerplane_talos.errors` (the mapping table), :mod:`~powerplane_talos.peer` (the
loopback peer). The package also ships a Talos mock built from Talos's own proto
(:mod:`powerplane_talos.testing`, ``python -m powerplane_talos.testing``) and a stand-in
``talosctl`` test tool for tests and demos.

Names load lazily, so plugin discovery (which imports :mod:`powerplane_talos.plugin`)
never imports grpclib or protobuf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_talos.channel import TalosChannel
    from powerplane_talos.config import RebootMode, TalosConfig, Transport

__all__ = ["RebootMode", "TalosChannel", "TalosConfig", "Transport"]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, {
    "RebootMode": ".config",
    "TalosChannel": ".channel",
    "TalosConfig": ".config",
    "Transport": ".config",
})
