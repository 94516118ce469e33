"""The one composition of a deployment: its host, its authority and its lifecycle.

Every entry point opens a deployment here, and nowhere else: the CLI, ``fence_powerplane``,
``powerplane serve``, the operator, the demo, and an application's own
``PowerHost.from_config(path)`` or ``PowerHost(deployment)``::

    async with open_deployment("powerplane.yaml") as runtime:
        await runtime.host.invoke("node-1", Verb.REBOOT, reason="kernel update")
        if runtime.lifecycle is not None:
            await runtime.lifecycle.run(until_idle=True)

What it composes, once per deployment:

- **the authority**: the deployment's ``policy:`` section (none: every action allowed to
  whoever runs it), whom a call acts for by default (``identity``, else this process's
  OS user), and where every act and denial is recorded: ``audit.path`` when the deployment
  names one; else, where it has a ``lifecycle:`` section, the lifecycle store's trail (one
  trail, the maintenances beside the direct acts); else the default audit file
  (``$XDG_STATE_HOME/powerplane/audit.jsonl``);
- **the guard**: where the deployment has a ``lifecycle:`` section, the lifecycle's guard
  (quorum, virtual nodes, nodes under maintenance, the reason policy and the hazard tier)
  is attached to the host as it is built, and every reboot, shutdown and terminate the
  host sends passes it. :class:`PowerHost` takes no guard and no authority: there is no
  argument that leaves either off, and the engine below it (:class:`powerplane.host.Host`)
  refuses to exist for such a deployment without a guard;
- **the lifecycle** (:attr:`Runtime.lifecycle`), opened on first use over the store the
  guard and the trail share (:class:`~powerplane.lifecycle.ports.SharedStore`).

A deployment without a ``lifecycle:`` section behaves as before: no guard, no store, and
nothing of the lifecycle imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from powerplane.authority.audit import AuditSink, JsonLinesAudit, default_audit_path
from powerplane.authority.identity import Identity
from powerplane.authority.policy import NO_POLICY, Policy, PolicyContext
from powerplane.authority.service import Authority
from powerplane.config import Deployment, load_config
from powerplane.host import Host, has_lifecycle

if TYPE_CHECKING:
    from powerplane.authority.seal import Signer
    from powerplane.lifecycle.direct import LifecycleGuard
    from powerplane.lifecycle.ports import SharedStore
    from powerplane.lifecycle.service import Lifecycle
    from powerplane.plugins import Registry

__all__ = ["PowerHost", "Runtime", "audit_file_of", "authority_for", "open_deployment",
           "policy_of"]


def policy_of(deployment: Deployment) -> Policy:
    """The policy the deployment's ``policy:`` section builds (none: :data:`NO_POLICY`)."""
    spec = deployment.policy
    if spec is None:
        return NO_POLICY
    policy: Policy = spec.type.factory(spec.config, PolicyContext(source=deployment.source))
    return policy


def audit_file_of(deployment: Deployment) -> Path:
    """The JSON-lines audit file of a deployment without a lifecycle store to record in:
    ``audit.path`` (relative: beside the deployment file), else
    :func:`~powerplane.authority.audit.default_audit_path`."""
    path = deployment.audit.path
    if path is None:
        return default_audit_path()
    found = Path(path)
    if not found.is_absolute() and not deployment.source.startswith("<"):
        found = Path(deployment.source).parent / found
    return found


def _stores(deployment: Deployment, registry: Registry | None) -> SharedStore:
    from powerplane.lifecycle.ports import SharedStore
    from powerplane.settings.lifecycle import lifecycle_config

    return SharedStore(lifecycle_config(deployment.lifecycle, deployment.source),
                       deployment.source, registry, signer=_signer(deployment))


def _signer(deployment: Deployment) -> Callable[[], Signer] | None:
    """The deployment's ``audit.key`` as a signer, loaded when first called (None: no
    key)."""
    key = deployment.audit.key
    if key is None:
        return None

    def load() -> Signer:
        from powerplane.authority.seal import signer_of

        return signer_of(key, deployment.source)

    return load


def _sink(deployment: Deployment, stores: SharedStore | None) -> AuditSink:
    """Where the deployment's acts are recorded (see the module docstring), sealed by the
    deployment's ``audit.key`` where it names one (loaded on the first append)."""
    signer = _signer(deployment)
    if deployment.audit.path is None and stores is not None:
        from powerplane.lifecycle.trail import StoreAudit

        return StoreAudit(stores, signer=signer)
    return JsonLinesAudit(audit_file_of(deployment), signer=signer)


def authority_for(
    deployment: Deployment, *, identity: Identity | None = None,
    registry: Registry | None = None,
) -> Authority:
    """The deployment's authority as the runtime composes it: its policy, whom a call acts
    for (``identity``, else this process's OS user), and its audit trail (see the module
    docstring). What a :class:`PowerHost` of the deployment carries; for a command that
    decides or reads the trail without a host (``auth can-i``, ``audit``)."""
    stores = _stores(deployment, registry) if has_lifecycle(deployment) else None
    return Authority(policy_of(deployment), _sink(deployment, stores), identity=identity)


class PowerHost(Host):
    """The host an application drives power with: discovers capabilities, offers verbs
    under the rule, invokes them under the policy and, where the deployment has a
    ``lifecycle:`` section, its guard; every act audited before it is sent.

    ::

        async with PowerHost.from_config("powerplane.yaml") as host:
            offer = host.offer_for("node-1")
            result = await host.invoke("node-1", Verb.SHUTDOWN, reason="PSU swap")

    ``identity``: whom a call that names none acts for (default: this process's OS user;
    an embedder that authenticated its caller passes that identity per call instead).
    ``nodes``: start for these nodes only (see :meth:`start`); None, every node.
    ``registry``: the plugins the deployment's checks and ports come from (default: the
    process-wide registry).
    """

    def __init__(
        self,
        deployment: Deployment,
        *,
        nodes: Iterable[str] | None = None,
        identity: Identity | None = None,
        registry: Registry | None = None,
    ) -> None:
        stores: SharedStore | None = None
        guard: LifecycleGuard | None = None
        if has_lifecycle(deployment):
            from powerplane.lifecycle.direct import LifecycleGuard

            stores = _stores(deployment, registry)
            guard = LifecycleGuard(deployment, stores.config, stores)
        authority = Authority(policy_of(deployment), _sink(deployment, stores),
                              identity=identity)
        super().__init__(deployment, guard=guard, authority=authority, nodes=nodes,
                         registry=registry)
        if guard is not None:
            guard.host = self  # readiness read through this host: one discovery

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        registry: Registry | None = None,
        *,
        nodes: Iterable[str] | None = None,
        identity: Identity | None = None,
    ) -> PowerHost:
        """A host for the deployment file at ``path`` (as ``find_config`` finds it)."""
        return cls(load_config(path, registry=registry), nodes=nodes, identity=identity,
                   registry=registry)


class Runtime:
    """One opened deployment: its :attr:`host`, its :attr:`authority` and, where it has a
    ``lifecycle:`` section, its :attr:`lifecycle` (see the module docstring).

    ``async with`` starts the host (for the nodes it was built for, else every node) and, on
    leaving, closes the lifecycle (when it was opened) and the host.
    """

    def __init__(self, host: PowerHost) -> None:
        self.host = host
        self._lifecycle: Lifecycle | None = None

    @property
    def deployment(self) -> Deployment:
        return self.host.deployment

    @property
    def authority(self) -> Authority:
        """The policy every act is decided by and the trail every act is recorded in."""
        return self.host.authority

    @property
    def has_lifecycle(self) -> bool:
        """Whether the deployment has a ``lifecycle:`` section."""
        return self.host.guard is not None

    @property
    def lifecycle(self) -> Lifecycle | None:
        """The deployment's lifecycle, its store opened (and created) on first use; None
        without a ``lifecycle:`` section."""
        if self._lifecycle is None and self.has_lifecycle:
            from powerplane.lifecycle.service import Lifecycle

            self._lifecycle = Lifecycle.for_host(self.host)
        return self._lifecycle

    def close_lifecycle(self) -> None:
        """Close the lifecycle (its store given back) if it was opened; the counts of
        repeated denials still folding are written first (the store may be their trail)."""
        if self._lifecycle is not None:
            self.authority.flush_denials()
            self._lifecycle.close()
            self._lifecycle = None

    async def __aenter__(self) -> Runtime:
        await self.host.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            self.close_lifecycle()
        finally:
            await self.host.close()


def open_deployment(
    config: str | os.PathLike[str] | Deployment | None = None,
    *,
    identity: Identity | None = None,
    nodes: Iterable[str] | None = None,
    registry: Registry | None = None,
) -> Runtime:
    """The deployment ``config`` (a validated :class:`~powerplane.config.Deployment`, or the
    path of its file as ``find_config`` finds it) composed as the module docstring says.

    ``nodes``: the host starts for these nodes only (``()``: none; the rest discovered on
    first use); None: every node. Nothing is started or opened until ``async with`` (the
    lifecycle on first use of :attr:`Runtime.lifecycle`).
    """
    deployment = (config if isinstance(config, Deployment)
                  else load_config(config, registry=registry))
    return Runtime(PowerHost(deployment, nodes=nodes, identity=identity, registry=registry))
