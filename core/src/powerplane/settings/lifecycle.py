"""The deployment's ``lifecycle:`` section, validated with path-named problems.

::

    lifecycle:
      store: ./powerplane.db                  # SQLite ({type: sqlite, path: ...}); relative
                                              #  to the config file
      cluster: {type: simulated}              # a registered cluster type: simulated | none
      storage: {type: none}                   # a registered storage type: none | simulated
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

``cluster``, ``storage`` and ``store`` name *port types* registered through hooks
(``register_cluster_types``, ``register_storage_types``, ``register_store_types``); each is
validated against its type's config model. Core registers ``simulated`` and ``none``
clusters, ``none`` and ``simulated`` storage and the ``sqlite`` store; a type no installed
distribution registers is a config error naming ``lifecycle.<port>.type`` (``kubernetes``
and ``longhorn`` come from ``powerplane-kubernetes``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

from powerplane._bounds import format_path
from powerplane.errors import ConfigError, ConfigProblem
from powerplane.fields import StrictBool, StrictFloat, StrictInt, unknown_key
from powerplane.plugins import PROVIDERS
from powerplane.plugins import registry as default_registry
from powerplane.secrets import SECRET_KINDS

if TYPE_CHECKING:
    from powerplane.plugins import Registry

__all__ = [
    "PORTS",
    "LifecycleConfig",
    "NoneClusterConfig",
    "NoneStorageConfig",
    "PdbConfig",
    "ReasonPolicy",
    "SimulatedClusterConfig",
    "SimulatedStorageConfig",
    "SqliteStoreConfig",
    "ValidatedSection",
    "lifecycle_config",
    "unknown_port_type",
    "validated_section",
]

PORTS = ("cluster", "storage", "store")
"""The ``lifecycle:`` keys whose value is a registered port type's config."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class PdbConfig(_Strict):
    """A simulated PodDisruptionBudget."""

    pods: list[str]
    """The pods it covers."""
    allowed_disruptions: StrictInt = Field(0, ge=0)
    """Evictions it allows before refusing (429)."""


class SimulatedClusterConfig(_Strict):
    """An in-memory cluster: nodes are the deployment's nodes; readiness follows power."""

    type: Literal["simulated"]
    pods: dict[str, list[str]] = Field(default_factory=dict)
    """Pods per node."""
    pdbs: dict[str, PdbConfig] = Field(default_factory=dict)
    """PodDisruptionBudgets by name."""
    eviction_ticks: StrictInt = Field(1, ge=0)
    """Drain rounds an evicted pod takes to leave (0: at once)."""
    labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Extra node labels, beside the deployment's ``nodes.<n>.labels``."""
    not_ready: list[str] = Field(default_factory=list)
    """Nodes that start not ready whatever their power state."""
    state_file: str | None = None
    """A JSON file keeping cordons, pods and PDBs across processes."""
    boot_id: StrictBool = True
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
    replicas: dict[str, StrictInt] = Field(default_factory=dict)
    """Replicas living on each node (a node absent here has no storage object)."""
    evict_per_read: StrictInt = Field(1, ge=0)
    """Replicas that leave per status read while eviction is requested (0: stuck)."""


class SqliteStoreConfig(_Strict):
    """The embedded SQLite store; ``lifecycle.store: PATH`` is short for ``{type: sqlite,
    path: PATH}``."""

    type: Literal["sqlite"]
    path: str = "./powerplane.db"
    """The SQLite file (relative paths are relative to the config file)."""


class ReasonPolicy(_Strict):
    """What every reason must meet."""

    min_length: StrictInt = Field(8, ge=1)
    """Fewest characters after trimming."""
    pattern: str | None = None
    """A regular expression the reason must match (for example a ticket reference)."""
    forbidden: list[str] = Field(default_factory=lambda: ["test", "n/a", "na", "none", "-"])
    """Reasons refused outright (compared case-insensitively)."""


class LifecycleConfig(_Strict):
    """The ``lifecycle:`` section."""

    store: SerializeAsAny[BaseModel] = Field(
        default_factory=lambda: SqliteStoreConfig(type="sqlite"))
    """The store: a registered store type's config (a plain path is the SQLite file)."""
    cluster: SerializeAsAny[BaseModel] = Field(
        default_factory=lambda: SimulatedClusterConfig(type="simulated"))
    """The cluster port: a registered cluster type's config."""
    storage: SerializeAsAny[BaseModel] = Field(
        default_factory=lambda: NoneStorageConfig(type="none"))
    """The storage port: a registered storage type's config."""
    control_plane_label: str = "node-role.kubernetes.io/control-plane"
    """The label that marks a control-plane member."""
    virtual_label: str = "powerplane.io/virtual-node"
    """The label that marks a virtual node (every action refused)."""
    no_control_plane: StrictBool = False
    """Declare that this deployment has no control plane (else unlabelled means refused)."""
    reason_policy: ReasonPolicy = Field(default_factory=ReasonPolicy)
    drain_deadline_s: StrictFloat = Field(600, gt=0, allow_inf_nan=False)
    """How long a drain may wait for pods before the maintenance fails naming them."""
    evacuation_timeout_s: StrictFloat = Field(1800, gt=0, allow_inf_nan=False)
    """How long storage evacuation may take before the maintenance pauses."""
    ready_timeout_s: StrictFloat = Field(900, gt=0, allow_inf_nan=False)
    """How long a rebooted or powered-on node may take to become ready."""
    readback_window_s: StrictFloat = Field(300, gt=0, allow_inf_nan=False)
    """How long a shutdown is read back for ``PowerOffConfirmed``."""
    readback_cadence_s: StrictFloat = Field(2, gt=0, allow_inf_nan=False)
    """First interval between power-off readbacks (backs off)."""
    tick_s: StrictFloat = Field(1.0, gt=0, allow_inf_nan=False)
    """Interval between reconcile passes of ``maintenance run`` while something waits."""
    concurrency: StrictInt = Field(16, ge=1)
    """Maintenances reconciled at once."""
    busy_timeout_s: StrictFloat = Field(5, gt=0, le=3600, allow_inf_nan=False)
    """How long a store operation waits for another process's lock before it fails."""
    settle_window_s: StrictFloat | None = Field(None, gt=0, le=86_400, allow_inf_nan=False)
    """How long evidence of non-application must hold (boot marker unchanged with the node
    ready, or the machine reading its old state) before a dispatch without outcome is
    sent again. Default (None): the host's ``limits.timeout_s`` plus 5 s, so a request
    that may have left has had its whole call time to act."""

    @field_validator(*PORTS, mode="before")
    @classmethod
    def _validated_port(cls, value: Any) -> Any:
        """A port's config arrives validated (:func:`lifecycle_config` looks its type up in
        the registry); a plain path is the SQLite store."""
        if isinstance(value, str):
            return SqliteStoreConfig(type="sqlite", path=value)
        if not isinstance(value, BaseModel):
            raise ValueError("expected a port type's validated config; read the section "
                             "with lifecycle_config")
        return value

    def store_path(self, source: str) -> Path:
        """The SQLite store file, relative to the config file's directory.

        Raises ``ConfigError`` naming ``lifecycle.store`` when the store is not SQLite.
        """
        if not isinstance(self.store, SqliteStoreConfig):
            kind = getattr(self.store, "type", type(self.store).__name__)
            raise ConfigError([ConfigProblem(
                "lifecycle.store", f"the store is of type {kind!r}, not a SQLite file")])
        path = Path(self.store.path)
        if not path.is_absolute() and source and not source.startswith("<"):
            path = Path(source).resolve().parent / path
        return path


_WHAT = {"cluster": "cluster type", "storage": "storage type", "store": "store type"}


def unknown_port_type(
    registry: Registry, port: str, name: str, line: int | None = None
) -> ConfigError:
    """The config error for a ``lifecycle.<port>.type`` no loaded plugin registers.

    Lists the registered types, says which distribution provides a known one that is not
    installed (``install powerplane-kubernetes``), and names plugins that failed to load.
    """
    known = sorted(registry.port_types(port))
    msg = (f"unknown {_WHAT[port]} {name!r}; registered types: "
           f"{', '.join(known) or 'none'}")
    provider = PROVIDERS.get(port, {}).get(name)
    if provider:
        msg += f"; {name!r} is provided by {provider}: install {provider}"
    else:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {close[0]!r}?"
    failed = [f.name for f in registry.failures]
    if failed:
        msg += f"; plugins that failed to load: {', '.join(failed)}"
    msg += registry.restriction_hint(name)
    return ConfigError([ConfigProblem(f"lifecycle.{port}.type", msg, line)])


def _nearest_line(lines: Mapping[Any, int], path: tuple[str | int, ...]) -> int | None:
    probe = path
    while probe:
        found = lines.get(probe)
        if found is not None:
            return found
        probe = probe[:-1]
    return None


def _problems(
    exc: ValidationError,
    prefix: tuple[str | int, ...],
    lines: Mapping[Any, int],
    model: type[BaseModel],
) -> list[ConfigProblem]:
    out = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = tuple(p if isinstance(p, int) else str(p) for p in err["loc"]
                    if not (isinstance(p, str) and "[" in p))  # a union member's tag
        path = (*prefix, *loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            holder = model if len(loc) == 1 else None
            msg = unknown_key(str(loc[-1]), list(holder.model_fields)) if holder else \
                "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        out.append(ConfigProblem(format_path(path), msg, _nearest_line(lines, path)))
    return out


def _port_config(
    registry: Registry, port: str, raw: Any, lines: Mapping[Any, int]
) -> tuple[BaseModel | None, list[ConfigProblem]]:
    """``lifecycle.<port>`` validated against its registered type's config model."""
    base: tuple[str | int, ...] = ("lifecycle", port)
    if port == "store" and isinstance(raw, str):
        raw = {"type": "sqlite", "path": raw}
    if not isinstance(raw, Mapping):
        want = "a path or a mapping with a type" if port == "store" else "a mapping with a type"
        return None, [ConfigProblem(f"lifecycle.{port}", f"expected {want}",
                                    _nearest_line(lines, base))]
    name = raw.get("type")
    known = sorted(registry.port_types(port))
    if not isinstance(name, str):
        return None, [ConfigProblem(
            f"lifecycle.{port}.type",
            f"required key is missing: the {_WHAT[port]} (one of: {', '.join(known) or 'none'})",
            _nearest_line(lines, base))]
    ptype = registry.port_types(port).get(name)
    if ptype is None:
        err = unknown_port_type(registry, port, name, _nearest_line(lines, (*base, "type")))
        return None, list(err.problems)
    try:
        # a port's secret references are checked against the same registry
        return ptype.config.model_validate(dict(raw), context={SECRET_KINDS: registry}), []
    except ValidationError as exc:
        return None, _problems(exc, base, lines, ptype.config)




class ValidatedSection(dict[str, Any]):
    """The raw ``lifecycle:`` mapping of a deployment :func:`~powerplane.config.parse_config`
    validated (``Deployment.lifecycle``), carrying what it validated to: every command
    checks the section when the file loads, with each problem's line, and a later
    :func:`lifecycle_config` of it (the guard's, ``maintenance``'s) does not again."""

    config: LifecycleConfig | None = None
    registry: Registry | None = None


def validated_section(
    raw: Mapping[str, Any],
    source: str,
    registry: Registry,
    lines: Mapping[Any, int],
) -> tuple[ValidatedSection, list[ConfigProblem]]:
    """The ``lifecycle:`` section as :func:`~powerplane.config.parse_config` keeps it, and
    its problems (each naming its path and line): the config load of every command."""
    section = ValidatedSection(raw)
    try:
        section.config = lifecycle_config(raw, source, registry, lines)
    except ConfigError as exc:
        return section, list(exc.problems)
    section.registry = registry
    return section, []


def lifecycle_config(
    raw: Mapping[str, Any],
    source: str = "<memory>",
    registry: Registry | None = None,
    lines: Mapping[Any, int] | None = None,
) -> LifecycleConfig:
    """Validate the raw ``lifecycle:`` mapping; raises ``ConfigError`` naming each path.

    ``cluster``, ``storage`` and ``store`` are validated against the config model of the
    port type their ``type`` names, looked up in ``registry`` (default: the process-wide
    one); ``lines`` maps config paths (``("lifecycle", "cluster", "pods")``) to lines.
    A section :func:`~powerplane.config.parse_config` validated (``Deployment.lifecycle``)
    gives what it validated to, for its own registry or the default one.
    """
    if isinstance(raw, ValidatedSection) and raw.config is not None and (
            registry is None or registry is raw.registry):
        return raw.config
    lines = lines if lines is not None else {}
    body = dict(raw)
    given = {port: body.pop(port) for port in PORTS if port in body}
    problems: list[ConfigProblem] = []
    config: LifecycleConfig | None = None
    try:
        config = LifecycleConfig.model_validate(body)
    except ValidationError as exc:
        problems += _problems(exc, ("lifecycle",), lines, LifecycleConfig)
    ports: dict[str, BaseModel] = {}
    if given:
        reg = registry if registry is not None else default_registry()
        for port, value in given.items():
            cfg, found = _port_config(reg, port, value, lines)
            problems += found
            if cfg is not None:
                ports[port] = cfg
    if problems or config is None:
        raise ConfigError(problems, source=source)
    return config.model_copy(update=ports) if ports else config
