"""The deployment's ``lifecycle:`` section, validated with path-named problems.

::

    lifecycle:
      store: ./powerplane.db                  # SQLite; relative to the config file
      cluster: {type: simulated}              # simulated | none
      storage: {type: none}                   # none | simulated (preset: longhorn) | longhorn
      control_plane_label: node-role.kubernetes.io/control-plane
      virtual_label: powerplane.io/virtual-node
      reason_policy: {min_length: 8}
      drain_deadline_s: 600
      evacuation_timeout_s: 1800
      ready_timeout_s: 900
      readback_window_s: 300
      readback_cadence_s: 2
      busy_timeout_s: 5                       # wait for another process's store lock
      settle_window_s: null                   # default: limits.timeout_s + 5 s
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from powerplane.errors import ConfigError, ConfigProblem

__all__ = [
    "LifecycleConfig",
    "LonghornStorageConfig",
    "NoneClusterConfig",
    "NoneStorageConfig",
    "PdbConfig",
    "ReasonPolicy",
    "SimulatedClusterConfig",
    "SimulatedStorageConfig",
    "lifecycle_config",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PdbConfig(_Strict):
    """A simulated PodDisruptionBudget."""

    pods: list[str]
    """The pods it covers."""
    allowed_disruptions: int = Field(0, ge=0)
    """Evictions it allows before refusing (429)."""


class SimulatedClusterConfig(_Strict):
    """An in-memory cluster: nodes are the deployment's nodes; readiness follows power."""

    type: Literal["simulated"]
    pods: dict[str, list[str]] = Field(default_factory=dict)
    """Pods per node."""
    pdbs: dict[str, PdbConfig] = Field(default_factory=dict)
    """PodDisruptionBudgets by name."""
    eviction_ticks: int = Field(1, ge=0)
    """Drain rounds an evicted pod takes to leave (0: at once)."""
    labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Extra node labels, beside the deployment's ``nodes.<n>.labels``."""
    not_ready: list[str] = Field(default_factory=list)
    """Nodes that start not ready whatever their power state."""
    state_file: str | None = None
    """A JSON file keeping cordons, pods and PDBs across processes."""
    boot_id: bool = True
    """Model each node's boot id (``status.nodeInfo.bootID``): it follows the simulated
    machine's boot count. False: the cluster reports none."""


class NoneClusterConfig(_Strict):
    """Bare machines: cordon and drain are recorded as not applicable."""

    type: Literal["none"]


class NoneStorageConfig(_Strict):
    """No storage system: nothing to evacuate."""

    type: Literal["none"]


class SimulatedStorageConfig(_Strict):
    """An in-memory storage system that validates writes like Longhorn's webhook."""

    type: Literal["simulated"]
    preset: Literal["longhorn"] = "longhorn"
    """Which evacuation hook gives the writes."""
    replicas: dict[str, int] = Field(default_factory=dict)
    """Replicas living on each node (a node absent here has no storage object)."""
    evict_per_read: int = Field(1, ge=0)
    """Replicas that leave per status read while eviction is requested (0: stuck)."""


class LonghornStorageConfig(_Strict):
    """Longhorn on a real cluster (needs the Kubernetes cluster port, not built yet)."""

    type: Literal["longhorn"]


class ReasonPolicy(_Strict):
    """What every reason must meet."""

    min_length: int = Field(8, ge=1)
    """Fewest characters after trimming."""
    pattern: str | None = None
    """A regular expression the reason must match (for example a ticket reference)."""
    forbidden: list[str] = Field(default_factory=lambda: ["test", "n/a", "na", "none", "-"])
    """Reasons refused outright (compared case-insensitively)."""


ClusterConfig = Annotated[
    SimulatedClusterConfig | NoneClusterConfig, Field(discriminator="type")
]
StorageConfig = Annotated[
    NoneStorageConfig | SimulatedStorageConfig | LonghornStorageConfig,
    Field(discriminator="type"),
]


class LifecycleConfig(_Strict):
    """The ``lifecycle:`` section."""

    store: str = "./powerplane.db"
    """The SQLite file (relative paths are relative to the config file)."""
    cluster: ClusterConfig = Field(default_factory=lambda: SimulatedClusterConfig(type="simulated"))
    """The cluster port."""
    storage: StorageConfig = Field(default_factory=lambda: NoneStorageConfig(type="none"))
    """The storage port."""
    control_plane_label: str = "node-role.kubernetes.io/control-plane"
    """The label that marks a control-plane member."""
    virtual_label: str = "powerplane.io/virtual-node"
    """The label that marks a virtual node (every action refused)."""
    no_control_plane: bool = False
    """Declare that this deployment has no control plane (else unlabelled means refused)."""
    reason_policy: ReasonPolicy = Field(default_factory=ReasonPolicy)
    drain_deadline_s: float = Field(600, gt=0)
    """How long a drain may wait for pods before the maintenance fails naming them."""
    evacuation_timeout_s: float = Field(1800, gt=0)
    """How long storage evacuation may take before the maintenance pauses."""
    ready_timeout_s: float = Field(900, gt=0)
    """How long a rebooted or powered-on node may take to become ready."""
    readback_window_s: float = Field(300, gt=0)
    """How long a shutdown is read back for ``PowerOffConfirmed``."""
    readback_cadence_s: float = Field(2, gt=0)
    """First interval between power-off readbacks (backs off)."""
    tick_s: float = Field(1.0, gt=0)
    """Interval between reconcile passes of ``maintenance run`` while something waits."""
    concurrency: int = Field(16, ge=1)
    """Maintenances reconciled at once."""
    busy_timeout_s: float = Field(5, gt=0, le=3600)
    """How long a store operation waits for another process's lock before it fails."""
    settle_window_s: float | None = Field(None, gt=0, le=86_400)
    """How long evidence of non-application must hold (boot marker unchanged with the node
    ready, or the machine reading its old state) before a dispatch without outcome is
    sent again. Default (None): the host's ``limits.timeout_s`` plus 5 s, so a request
    that may have left has had its whole call time to act."""

    def store_path(self, source: str) -> Path:
        """The store file, relative to the config file's directory."""
        path = Path(self.store)
        if not path.is_absolute() and source and not source.startswith("<"):
            path = Path(source).resolve().parent / path
        return path


def lifecycle_config(raw: Mapping[str, Any], source: str = "<memory>") -> LifecycleConfig:
    """Validate the raw ``lifecycle:`` mapping; raises ``ConfigError`` naming each path."""
    try:
        return LifecycleConfig.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = [p for p in err["loc"] if not (isinstance(p, str) and p in _TAGS)]
            path = ".".join(["lifecycle", *(str(p) for p in loc)])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required key is missing"
            elif err["type"] == "union_tag_invalid":
                msg = f"unknown type; expected one of: {', '.join(_TAG_CHOICES.get(path, []))}"
            problems.append(ConfigProblem(path, msg))
        raise ConfigError(problems, source=source) from None


_TAGS = {"simulated", "none", "longhorn"}
_TAG_CHOICES = {
    "lifecycle.cluster": ["simulated", "none"],
    "lifecycle.storage": ["none", "simulated", "longhorn"],
}
