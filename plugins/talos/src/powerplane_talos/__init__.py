"""powerplane-talos: the Talos machine API as a powerplane channel.

Talos is the in-band channel: it can reboot and shut down gracefully (Talos stops
its services, drains the kubelet and unmounts), it can never power on, and once a
machine is off its silence proves nothing. Two transports carry the calls: gRPC
over mutual TLS with grpclib (:mod:`powerplane_talos.grpc_transport`), and the
``talosctl`` binary as a subprocess (:mod:`powerplane_talos.talosctl_transport`).
The package also ships a Talos mock (``python -m powerplane_talos.mock``) and a
stand-in ``talosctl`` test tool for tests and demos.

Names load lazily, so plugin discovery (which imports :mod:`powerplane_talos.plugin`)
never imports grpclib or protobuf.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerplane_talos.channel import TalosChannel
    from powerplane_talos.config import RebootMode, TalosConfig, Transport

__all__ = ["RebootMode", "TalosChannel", "TalosConfig", "Transport"]
__version__ = "0.1.0"

_WHERE = {
    "TalosChannel": "channel",
    "RebootMode": "config",
    "TalosConfig": "config",
    "Transport": "config",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'powerplane_talos' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"powerplane_talos.{module}"), name)
    globals()[name] = value
    return value
