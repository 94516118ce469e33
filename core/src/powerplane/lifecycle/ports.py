"""The ports a maintenance reaches the world through, built from the deployment.

Power is the ``PowerHost`` (the offer is re-checked at every dispatch); the cluster
and storage ports come from ``lifecycle.cluster`` and ``lifecycle.storage``.
"""

from __future__ import annotations

from dataclasses import dataclass

from powerplane.errors import ConfigError, ConfigProblem, LifecycleError, PowerplaneError
from powerplane.host import PowerHost
from powerplane.lifecycle.cluster import ClusterPort, NoCluster, SimulatedCluster
from powerplane.lifecycle.settings import (
    LifecycleConfig,
    NoneClusterConfig,
    SimulatedClusterConfig,
    SimulatedStorageConfig,
)
from powerplane.lifecycle.storage import NoStorage, SimulatedStorage, StoragePort

__all__ = ["PermanentPortError", "PortError", "Ports", "TemporaryPortError", "build_ports",
           "machine_boots", "machine_state"]


class PortError(LifecycleError):
    """A cluster or storage port failed."""


class TemporaryPortError(PortError):
    """A port failed in a way that may pass (a timeout, a conflict): tried again next pass."""


class PermanentPortError(PortError):
    """A port failed in a way that will not pass (forbidden, not found, invalid): the
    maintenance fails with this message instead of waiting forever."""


@dataclass
class Ports:
    """Power, cluster and storage, as one maintenance sees them."""

    host: PowerHost
    cluster: ClusterPort
    storage: StoragePort


async def machine_state(host: PowerHost, node: str) -> str:
    """A node's machine power state as the host reads it back (``none``: no channel).

    Through the ordinary readback, as any port reads it: ``on``, ``off`` or ``unknown``
    (a blind channel cannot see off; a machine in transition reads unknown).
    """
    if not host.nodes[node].channels:
        return "none"
    try:
        return (await host.read_power_state(node)).state.value
    except PowerplaneError:
        return "unknown"


def machine_boots(host: PowerHost, node: str) -> int | None:
    """How often a node's simulated machine has booted (None: no simulated machine).

    The simulated cluster stands for a kubelet, which knows its own node's boot id without
    asking a power channel: it reads the boot count of the simulated machine that carries
    the node (a :class:`~powerplane.simulated.SimulatedChannel`, by type), never through a
    channel request.
    """
    from powerplane.simulated import SimulatedChannel

    for ref in host.nodes[node].channels:
        try:
            ch = host.channel(ref.channel)
        except KeyError:
            continue
        if isinstance(ch, SimulatedChannel):
            try:
                return ch.boots_of(ref.target)
            except KeyError:
                continue
    return None


def build_ports(host: PowerHost, config: LifecycleConfig) -> Ports:
    """The ports the config names, wired to ``host``."""
    labels = {name: dict(spec.labels) for name, spec in host.nodes.items()}

    async def power_of(node: str) -> str:
        return await machine_state(host, node)

    async def boot_of(node: str) -> str | None:
        boots = machine_boots(host, node)
        return None if boots is None else str(boots)

    cluster: ClusterPort
    if isinstance(config.cluster, SimulatedClusterConfig):
        cluster = SimulatedCluster(config.cluster, labels, power_of,
                                   boot_of if config.cluster.boot_id else None)
    else:
        assert isinstance(config.cluster, NoneClusterConfig)
        cluster = NoCluster(labels, power_of)
    storage: StoragePort
    if isinstance(config.storage, SimulatedStorageConfig):
        storage = SimulatedStorage(config.storage)
    elif config.storage.type == "longhorn":
        raise ConfigError(
            [ConfigProblem("lifecycle.storage.type",
                           "longhorn needs the Kubernetes cluster port, which is not built "
                           "yet; use {type: simulated, preset: longhorn} or none")]
        )
    else:
        storage = NoStorage()
    return Ports(host, cluster, storage)
