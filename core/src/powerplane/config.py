"""The deployment config: pydantic models, loading with line numbers, path-named errors.

Found by ``--config PATH``, else ``$POWERPLANE_CONFIG``, else ``./powerplane.yaml``.
Each channel's own keys are validated by the pydantic model of its channel type.
Every problem becomes a :class:`~powerplane.errors.ConfigProblem` naming the dotted
path (``channels.bench-bmc.verify``), the line where known, and what was expected.
Input values are never echoed (they may be secrets).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from powerplane._yaml import format_path, load_yaml
from powerplane.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from powerplane.channel import ChannelType
    from powerplane.plugins import Registry

__all__ = [
    "Deployment",
    "Limits",
    "NodeChannelRef",
    "NodeSpec",
    "Recovery",
    "SiteRecovery",
    "find_config",
    "load_config",
    "parse_config",
]

ENV_CONFIG = "POWERPLANE_CONFIG"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeChannelRef(_Strict):
    """One of a node's channels, in preference order."""

    channel: str
    """Name of a channel under ``channels``."""
    target: Any = None
    """The node as that channel addresses it (a system path, an address, outlets, an id)."""


class NodeSpec(_Strict):
    """A node: where it is, whether it is repairable, and the channels that reach it."""

    site: str | None = None
    """The site the node stands in (for attended declarations)."""
    classification: Literal["repairable", "replaceable"] = "repairable"
    """``replaceable`` nodes may be terminated; ``repairable`` never."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels read by the simulated and none clusters."""
    channels: list[NodeChannelRef] = Field(default_factory=list)
    """The node's channels, most preferred first."""


class SiteRecovery(_Strict):
    """A site's recovery declaration."""

    attended: bool = False
    """A person is present at this site and can power a machine back on."""


class Recovery(_Strict):
    """The recovery model: who can bring a machine back after a shutdown."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    attended_rack: bool = Field(False, alias="attendedRack")
    """A person is at the rack for every node of the deployment."""
    sites: dict[str, SiteRecovery] = Field(default_factory=dict)
    """Per-site declarations."""

    def site_attended(self, site: str | None) -> bool:
        return site is not None and site in self.sites and self.sites[site].attended


class Limits(_Strict):
    """Concurrency and time bounds."""

    per_endpoint: int = Field(4, ge=1)
    """Concurrent calls to one BMC / PDU / API endpoint."""
    total: int = Field(256, ge=1)
    """Concurrent calls in all."""
    timeout_s: float = Field(60.0, gt=0)
    """Bound on every channel call, in seconds."""


class _Document(_Strict):
    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    recovery: Recovery = Field(default_factory=Recovery)
    lifecycle: dict[str, Any] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    conformance: dict[str, Any] | None = None


@dataclass(frozen=True)
class ConfiguredChannel:
    """A channel from the file: its name, type and validated config."""

    name: str
    type: ChannelType
    config: BaseModel


@dataclass(frozen=True)
class Deployment:
    """A validated deployment: channels with their validated configs, nodes, recovery, limits."""

    channels: Mapping[str, ConfiguredChannel]
    nodes: Mapping[str, NodeSpec]
    recovery: Recovery
    limits: Limits
    lifecycle: Mapping[str, Any]
    conformance: Mapping[str, Any] | None
    source: str = "<memory>"
    raw: Mapping[str, Any] | None = None


def find_config(path: str | os.PathLike[str] | None = None) -> Path:
    """The config path: ``path``, else ``$POWERPLANE_CONFIG``, else ``./powerplane.yaml``."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env)
    return Path("powerplane.yaml")


def load_config(
    path: str | os.PathLike[str] | None = None, registry: Registry | None = None
) -> Deployment:
    """Read and validate a deployment file. Raises :class:`ConfigError` with every problem."""
    file = find_config(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {source} does not exist", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", source=source) from None
    data, lines = load_yaml(text, source)
    return parse_config(data, registry=registry, source=source, lines=lines)


def _problems(
    exc: ValidationError, prefix: tuple[str | int, ...], lines: Mapping[Any, int]
) -> list[ConfigProblem]:
    out = []
    for err in exc.errors(include_input=False, include_url=False):
        path: tuple[str | int, ...] = tuple(
            p if isinstance(p, int) else str(p)
            for p in (*prefix, *err["loc"])
            if not (isinstance(p, str) and "[" in p)
        )
        msg = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = "unknown key"
        elif kind == "missing":
            msg = "required key is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        line = None
        probe = path
        while probe and line is None:
            line = lines.get(probe)
            probe = probe[:-1]
        out.append(ConfigProblem(format_path(path), msg, line))
    return out


def parse_config(
    data: Any,
    registry: Registry | None = None,
    source: str = "<memory>",
    lines: Mapping[Any, int] | None = None,
) -> Deployment:
    """Validate already-parsed config data (a mapping) against the models and the registry."""
    from powerplane.plugins import registry as default_registry

    lines = lines or {}
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=source)
    try:
        doc = _Document.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, (), lines), source=source) from None
    reg = registry if registry is not None else default_registry()
    problems: list[ConfigProblem] = []
    channels: dict[str, ConfiguredChannel] = {}
    for name, raw in doc.channels.items():
        base = ("channels", name)
        if not isinstance(raw, dict):
            problems.append(ConfigProblem(format_path(base), "expected a mapping", lines.get(base)))
            continue
        tname = raw.get("type")
        if not isinstance(tname, str):
            problems.append(
                ConfigProblem(
                    format_path((*base, "type")),
                    "required key is missing: the channel type (a registered name)",
                    lines.get(base),
                )
            )
            continue
        ctype = reg.get(tname)
        if ctype is None:
            known = ", ".join(sorted(reg.channel_types)) or "none"
            hint = ""
            failed = [f.name for f in reg.failures]
            if failed:
                hint = f"; plugins that failed to load: {', '.join(failed)}"
            problems.append(
                ConfigProblem(
                    format_path((*base, "type")),
                    f"unknown channel type {tname!r}; registered types: {known}{hint}",
                    lines.get((*base, "type")),
                )
            )
            continue
        body = {k: v for k, v in raw.items() if k != "type"}
        try:
            cfg = ctype.config.model_validate(body)
        except ValidationError as exc:
            problems.extend(_problems(exc, base, lines))
            continue
        channels[name] = ConfiguredChannel(name, ctype, cfg)
    nodes: dict[str, NodeSpec] = {}
    for nname, node in doc.nodes.items():
        refs = []
        for i, ref in enumerate(node.channels):
            nbase: tuple[str | int, ...] = ("nodes", nname, "channels", i)
            if ref.channel not in doc.channels:
                known = ", ".join(sorted(doc.channels)) or "none configured"
                problems.append(
                    ConfigProblem(
                        format_path((*nbase, "channel")),
                        f"unknown channel {ref.channel!r}; channels: {known}",
                        lines.get((*nbase, "channel")),
                    )
                )
                continue
            configured = channels.get(ref.channel)
            if configured is None:
                continue  # its own error is already reported
            target = ref.target
            parser = configured.type.target
            if parser is not None:
                try:
                    target = parser(ref.target)
                except (ValueError, TypeError) as exc:
                    problems.append(
                        ConfigProblem(
                            format_path((*nbase, "target")),
                            str(exc),
                            lines.get((*nbase, "target"), lines.get(nbase)),
                        )
                    )
                    continue
            refs.append(NodeChannelRef(channel=ref.channel, target=target))
        seen: set[str] = set()
        for i, ref in enumerate(node.channels):
            if ref.channel in seen:
                path = ("nodes", nname, "channels", i, "channel")
                problems.append(
                    ConfigProblem(
                        format_path(path),
                        f"channel {ref.channel!r} is listed twice for this node",
                        lines.get(path),
                    )
                )
            seen.add(ref.channel)
        nodes[nname] = node.model_copy(update={"channels": refs})
    if problems:
        raise ConfigError(problems, source=source)
    return Deployment(
        channels=channels,
        nodes=nodes,
        recovery=doc.recovery,
        limits=doc.limits,
        lifecycle=doc.lifecycle,
        conformance=doc.conformance,
        source=source,
        raw=data,
    )
