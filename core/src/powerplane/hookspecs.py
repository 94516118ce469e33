"""The plugin hooks of powerplane.

A plugin is a module exposed under the entry-point group ``powerplane`` that
implements one or more hooks with :data:`hookimpl`; each hook is given ``register`` and
calls it once per thing it provides::

    from powerplane import ChannelType, SecretKind, hookimpl
    from powerplane.lifecycle import ClusterType

    @hookimpl
    def register_channel_types(register):
        register(ChannelType(name="mybmc", config=MyConfig, factory=MyChannel))

    @hookimpl
    def register_cluster_types(register):        # lifecycle.cluster: {type: mycluster}
        register(ClusterType(name="mycluster", config=MyClusterConfig, factory=make_cluster))

    @hookimpl
    def register_secret_kinds(register):         # {vault: PATH} in any secret field
        register(SecretKind(name="vault", resolve=read_from_vault))

The hooks:

* ``register_channel_types``: ``ChannelType`` (a power path: ``channels.<n>.type``);
* ``register_cluster_types``: ``ClusterType`` (``lifecycle.cluster.type``), factory
  ``factory(config, PortContext) -> ClusterPort``;
* ``register_storage_types``: ``StorageType`` (``lifecycle.storage.type``), factory
  ``factory(config, PortContext) -> StoragePort``;
* ``register_store_types``: ``StoreType`` (``lifecycle.store.type``), factory
  ``factory(config, StoreContext) -> MaintenanceStore``;
* ``register_secret_kinds``: ``SecretKind`` (``{KIND: VALUE}`` in a secret field),
  ``resolve(value) -> str`` called at use, never at load;
* ``register_policy_types``: ``PolicyType`` (``policy.type``), factory
  ``factory(config, PolicyContext) -> Policy`` (who may take which action);
* ``register_deployment_checks``: ``DeploymentCheck`` (a check of the whole deployment
  that loading cannot make), ``async check(deployment) -> list[ConfigProblem]``, awaited by
  ``powerplane check`` and ``PowerHost.start``, never at load; collected on first use by
  this hook alone (not declared in ``REGISTERS``);
* ``register_demo_peers``: ``powerplane.testing.Peer`` (optional, for ``powerplane demo``).

The hooks name the descriptors of the seam layer only (:mod:`powerplane.kinds`: the generic
``PortType`` that ``ClusterType``, ``StorageType`` and ``StoreType`` narrow, ``PolicyType``,
``DeploymentCheck``; :mod:`powerplane.channel`, :mod:`powerplane.secrets`,
:mod:`powerplane.peers`), never the layers that build and run what they describe.

A port type's ``config`` is a pydantic model declaring ``type: Literal["<name>"]``. A name
already registered (by core or an earlier plugin) in the same hook is a load failure of the
later plugin; every other plugin still loads. Core's own ``simulated``/``none`` clusters,
``none``/``simulated`` storage, ``sqlite`` store and ``env``/``file`` secret kinds register
through these same hooks (:mod:`powerplane.builtins`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

import pluggy

if TYPE_CHECKING:
    from typing import Any

    from powerplane.channel import ChannelType
    from powerplane.kinds import DeploymentCheck, PolicyType, PortType
    from powerplane.peers import Peer
    from powerplane.secrets import SecretKind

__all__ = [
    "Registers",
    "hookimpl",
    "hookspec",
    "register_channel_types",
    "register_cluster_types",
    "register_demo_peers",
    "register_deployment_checks",
    "register_policy_types",
    "register_secret_kinds",
    "register_storage_types",
    "register_store_types",
]

PROJECT = "powerplane"

hookspec = pluggy.HookspecMarker(PROJECT)
"""Marks a hook specification of powerplane."""
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's implementation of a powerplane hook."""


class Registers(TypedDict, total=False):
    """What a plugin module's hooks register, by kind: the optional module attribute
    ``REGISTERS`` of the plugin contract::

        REGISTERS: Registers = {"channel": ("mybmc",)}

    A module that declares it has its hooks called only when one of these names is first
    looked up (a command that never names ``mybmc`` never imports the plugin's config model
    or channel). The declaration must be complete: a name the hooks register that is not
    declared, or a declared name they do not register, is a load failure of the plugin.
    A module without ``REGISTERS`` has its hooks called when plugins load.
    """

    channel: Sequence[str]
    """Channel type names (``register_channel_types``)."""
    cluster: Sequence[str]
    """Cluster port type names (``register_cluster_types``)."""
    storage: Sequence[str]
    """Storage port type names (``register_storage_types``)."""
    store: Sequence[str]
    """Store type names (``register_store_types``)."""
    secret: Sequence[str]
    """Secret kind names (``register_secret_kinds``)."""
    policy: Sequence[str]
    """Policy type names (``register_policy_types``)."""


@hookspec
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the channel types this plugin provides.

    Call ``register(ChannelType(...))`` once per channel type. Called once per
    plugin when plugins are first used, never at import. A name registered twice is
    a load error of the second plugin; every other plugin still loads.
    """


@hookspec
def register_cluster_types(register: Callable[[PortType[Any, Any]], None]) -> None:
    """Register the lifecycle cluster port types this plugin provides.

    Call ``register(ClusterType(name, config, factory, description=...))`` once per type;
    ``lifecycle.cluster: {type: name, ...}`` is validated against ``config`` (a pydantic
    model with ``type: Literal[name]``) and built by ``factory(config, PortContext)``, which
    returns a ``ClusterPort``. A name registered twice is a load error of the second plugin.
    """


@hookspec
def register_storage_types(register: Callable[[PortType[Any, Any]], None]) -> None:
    """Register the lifecycle storage port types this plugin provides.

    Call ``register(StorageType(name, config, factory, description=...))`` once per type;
    ``lifecycle.storage: {type: name, ...}`` is validated against ``config`` and built by
    ``factory(config, PortContext)``, which returns a ``StoragePort``. A name registered
    twice is a load error of the second plugin.
    """


@hookspec
def register_store_types(register: Callable[[PortType[Any, Any]], None]) -> None:
    """Register the lifecycle store types this plugin provides.

    Call ``register(StoreType(name, config, factory, description=...))`` once per type;
    ``lifecycle.store: {type: name, ...}`` is validated against ``config`` and opened by
    ``factory(config, StoreContext)``, which returns a ``MaintenanceStore`` (optimistic
    writes by resource version, one active maintenance per node, an append-only audit).
    A name registered twice is a load error of the second plugin.
    """


@hookspec
def register_secret_kinds(register: Callable[[SecretKind], None]) -> None:
    """Register the secret reference kinds this plugin provides.

    Call ``register(SecretKind(name, resolve, check=None))`` once per kind: a secret field
    may then hold ``{name: VALUE}``. ``resolve(VALUE) -> str`` runs at use, never at load,
    and raises ``SecretError`` naming the reference, never a value; ``check(VALUE)``,
    optional, runs at load on the reference's shape alone (no secret read, no network) and
    raises ``ValueError``; ``present(VALUE)``, optional, runs when the channel holding the
    reference opens and raises ``ValueError`` when the secret is not there to be read. A
    kind name registered twice is a load error of the second plugin.
    """


@hookspec
def register_policy_types(register: Callable[[PolicyType[Any]], None]) -> None:
    """Register the policy types this plugin provides (who may take which action).

    Call ``register(PolicyType(name, config, factory, description=...))`` once per type;
    ``policy: {type: name, ...}`` is validated against ``config`` (a pydantic model with
    ``type: Literal[name]``) when the deployment loads and built by ``factory(config,
    PolicyContext)``, which returns a ``powerplane.authority.Policy``. A name registered
    twice is a load error of the second plugin.
    """


@hookspec
def register_deployment_checks(register: Callable[[DeploymentCheck], None]) -> None:
    """Register the checks of a whole deployment this plugin provides.

    Call ``register(DeploymentCheck(name, check, description=...))`` once per check.
    ``async check(deployment) -> list[ConfigProblem]`` is awaited by ``powerplane check``
    and by ``PowerHost.start`` (before any channel is created), never by ``load_config``;
    each problem names its dotted config path and is a ``ConfigError`` (exit 2). A check
    with nothing to ask for a deployment returns ``[]`` without any request; one that
    cannot ask now raises a ``PowerplaneError`` that is not a ``ConfigError`` (``powerplane
    check`` exits 1 with it, a host's start warns and goes on). This hook is called alone,
    on first use, whatever ``REGISTERS`` declares: it must import nothing heavy. A name
    registered twice is a load error of the second plugin.
    """


@hookspec
def register_demo_peers(register: Callable[[Peer], None]) -> None:
    """Register the real protocol peers this plugin can start on loopback for ``powerplane demo``.

    Optional. Call ``register(powerplane.testing.Peer(...))`` once per peer (an emulator, a mock
    server, a simulator); the demo starts each in a temporary directory, configures
    a channel of this plugin against it, and stops it by its own handle afterwards.
    Importing the peer's machinery must happen inside ``Peer.start``.
    """
