"""Kubernetes mode: the seam to the gateway that acts as the caller on the API server.

When the deployment's lifecycle store is one a gateway serves (``{type: kubernetes}``), the
surface is a *gateway client*: the executor (the operator) admits and carries out what it
records, and every act is made on the API server *as the caller*, never as the server.
The gateway comes from the plugin that provides the store, found through the entry-point
group :data:`GROUP` (``powerplane-kubernetes`` registers ``kubernetes``); this package
imports no plugin by name. A gateway:

- reviews a bearer token (:meth:`Gateway.review`: the API server's ``TokenReview``), so the
  identity is the one the API server will see for that token;
- gives a store acting as the caller (:meth:`Gateway.store_for`): the caller's own token
  (passthrough) or the server's credentials impersonating the caller;
- keeps what it needs while the surface runs (:meth:`Gateway.start`, :meth:`Gateway.stop`:
  e.g. a watch that answers the pages' phases instead of a list per page).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol

from powerplane import Identity
from powerplane.lifecycle import MaintenanceStore

__all__ = ["GROUP", "Gateway", "find_gateway"]

GROUP = "powerplane.servers.gateways"
"""The entry-point group of the gateways (a name per store type)."""


class Gateway(Protocol):
    """What the surface needs from a gateway (see the module docstring)."""

    credentials: str
    """``passthrough`` or ``impersonate``."""
    description: str

    async def review(self, token: str) -> tuple[Identity | None, str]:
        """The API server's identity of ``token``, or None and why not."""
        ...

    def identity_seen(self, identity: Identity) -> Identity:
        """The identity the API server will see for this caller's acts (what the policy
        is asked about and the audit records)."""
        ...

    def store_for(self, identity: Identity, token: str | None) -> MaintenanceStore | None:
        """A store whose writes the API server attributes to ``identity``; None when it
        cannot act as the caller (passthrough with no token)."""
        ...

    async def start(self) -> None:
        """Begin what it keeps while the surface runs (in the surface's event loop)."""
        ...

    async def stop(self) -> None:
        """End what :meth:`start` began."""
        ...

    def close(self) -> None: ...


def find_gateway(store: object, options: Mapping[str, Any]) -> Gateway | None:
    """The gateway of the first plugin that serves ``store`` (None: a local store)."""
    for point in entry_points(group=GROUP):
        found = point.load()(store, options)
        if found is not None:
            gateway: Gateway = found
            return gateway
    return None
