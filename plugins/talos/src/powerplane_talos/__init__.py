"""powerplane-talos: the Talos machine API as a powerplane channel.

Talos is the in-band channel: it can reboot and shut down gracefully (Talos stops
its services, drains the kubelet and unmounts), it can never power on, and once a
machine is off its silence proves nothing. Two transports carry the calls: gRPC
over mutual TLS with grpclib (:mod:`powerplane_talos.grpc_transport`), and the
``talosctl`` binary as a subprocess (:mod:`powerplane_talos.talosctl_transport`).
The package also ships a Talos mock (``python -m powerplane_talos.mock``) and a
stand-in ``talosctl`` test tool for tests and demos.
"""

from __future__ import annotations

from powerplane_talos.channel import TalosChannel
from powerplane_talos.config import RebootMode, TalosConfig, Transport

__all__ = ["RebootMode", "TalosChannel", "TalosConfig", "Transport"]
__version__ = "0.1.0"
