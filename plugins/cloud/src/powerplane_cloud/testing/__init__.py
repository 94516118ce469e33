"""Test machinery the ``cloud`` distribution ships (its ``test`` extra: respx, moto).

- :class:`FakeOpenStack` (:mod:`powerplane_cloud.testing.openstack`): a stateful Keystone v3
  and Compute API for respx, with bodies from the API references;
- :class:`ThrottlingProxy` (:mod:`powerplane_cloud.testing.throttling`): an HTTP proxy in
  front of moto that answers ``RequestLimitExceeded`` to the next N calls of chosen actions.

moto's server itself, the EC2 peer, is :mod:`powerplane_cloud.peer`. Names load lazily, so
importing this package imports neither respx nor httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_cloud.testing.openstack import FakeOpenStack, Server
    from powerplane_cloud.testing.throttling import ThrottlingProxy, start_throttling_proxy

__all__ = ["FakeOpenStack", "Server", "ThrottlingProxy", "start_throttling_proxy"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "FakeOpenStack": ".openstack",
    "Server": ".openstack",
    "ThrottlingProxy": ".throttling",
    "start_throttling_proxy": ".throttling",
})
