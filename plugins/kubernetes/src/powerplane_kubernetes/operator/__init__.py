"""The powerplane operator: the maintenance lifecycle run on the cluster API.

``powerplane operator run`` drives every ``NodeMaintenance`` through the same
:class:`powerplane.lifecycle.reconciler.Reconciler` the ``maintenance run`` command uses,
one coordination Lease per site deciding which replica acts for that site's nodes;
``powerplane operator manifests`` prints what installs it. Submodules: ``manifests``
(the objects), ``leases`` (the per-site Lease), ``metrics`` and ``health`` (the HTTP
endpoints), ``run`` (the loop), ``cli`` (the commands).
"""

from __future__ import annotations

__all__: list[str] = []
