"""The deployment config: pydantic models, loading with line numbers, path-named errors.

Found by ``--config PATH``, else ``$POWERPLANE_CONFIG``, else ``./powerplane.yaml``.
Each channel's own keys are validated by the pydantic model of its channel type.
Every problem becomes a :class:`~powerplane.errors.ConfigProblem` naming the dotted
path (``channels.bench-bmc.verify``), the line where known, and what was expected.
Input values are never echoed (they may be secrets). The file is YAML, or JSON (named
``*.json``, or starting with ``{``): JSON is the format for generated fleets.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
)

from powerplane._bounds import MAX_PROBLEMS, format_path
from powerplane.errors import ConfigError, ConfigProblem
from powerplane.fields import (
    BOOL_EXPECTED,
    FINITE_EXPECTED,
    INT_EXPECTED,
    NUMBER_EXPECTED,
    VERIFY_EXPECTED,
    StrictBool,
    StrictFloat,
    StrictInt,
    Timeouts,
    TlsVerify,
    secret_fields,
    timeouts_field,
    unknown_key,
)
from powerplane.fields import not_finite as _not_finite
from powerplane.files import read_text
from powerplane.nodes import TARGET_PARSERS, NodeSpec
from powerplane.secrets import SECRET_KINDS
from powerplane.settings.authority import AuditSettings, PolicySpec, validated_policy

if TYPE_CHECKING:
    from powerplane.channel import ChannelType, Manners
    from powerplane.plugins import Registry

__all__ = [
    "BOOL_EXPECTED",
    "FINITE_EXPECTED",
    "INT_EXPECTED",
    "NUMBER_EXPECTED",
    "VERIFY_EXPECTED",
    "Deployment",
    "Limits",
    "Recovery",
    "SiteRecovery",
    "StrictBool",
    "StrictFloat",
    "StrictInt",
    "Timeouts",
    "TlsVerify",
    "channel_secret_problems",
    "check_config",
    "deployment_problems",
    "find_config",
    "load_config",
    "parse_config",
    "read_config",
    "secret_fields",
    "timeouts_field",
    "unknown_key",
]

ENV_CONFIG = "POWERPLANE_CONFIG"

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SiteRecovery(_Strict):
    """A site's recovery declaration."""

    attended: StrictBool = False
    """A person is present at this site and can power a machine back on."""


class Recovery(_Strict):
    """The recovery model: who can bring a machine back after a shutdown."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    attended_rack: StrictBool = Field(False, alias="attendedRack")
    """A person is at the rack for every node of the deployment."""
    sites: dict[str, SiteRecovery] = Field(default_factory=dict)
    """Per-site declarations."""

    def site_attended(self, site: str | None) -> bool:
        return site is not None and site in self.sites and self.sites[site].attended


class Limits(_Strict):
    """Concurrency and time bounds (each checked at load; NaN and infinity are refused)."""

    per_endpoint: StrictInt = Field(4, ge=1, le=10_000)
    """Concurrent calls to one BMC / PDU / API endpoint: 1 to 10,000."""
    total: StrictInt = Field(256, ge=1, le=100_000)
    """Concurrent calls in all: 1 to 100,000."""
    timeout_s: StrictFloat = Field(60.0, ge=0.01, le=86_400, allow_inf_nan=False)
    """Bound on every channel call, in seconds: a finite number from 0.01 (10 ms) to 86,400
    (one day)."""


class _Document(_Strict):
    # validated only for a top-level section beside channels and nodes (recovery, limits,
    # lifecycle): a file without one never builds its validator
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    recovery: Recovery = Field(default_factory=Recovery)
    lifecycle: dict[str, Any] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    policy: dict[str, Any] = Field(default_factory=dict)
    audit: AuditSettings = Field(default_factory=AuditSettings)


@dataclass(frozen=True)
class ConfiguredChannel:
    """A channel from the file: its name, type and validated config."""

    name: str
    type: ChannelType
    config: BaseModel
    manners: Manners | None = None
    """The channel's ``manners:`` key over its type's defaults (None: the key is absent)."""

    @property
    def effective_manners(self) -> Manners:
        """The channel's :class:`~powerplane.channel.Manners`: its ``manners:`` key over
        its type's defaults."""
        return self.manners if self.manners is not None else self.type.manners


_NO_AUDIT_SECTION = AuditSettings()


@dataclass(frozen=True)
class Deployment:
    """A validated deployment: channels with their validated configs, nodes, recovery, limits."""

    channels: Mapping[str, ConfiguredChannel]
    nodes: Mapping[str, NodeSpec]
    recovery: Recovery
    limits: Limits
    lifecycle: Mapping[str, Any]
    source: str = "<memory>"
    raw: Mapping[str, Any] | None = None
    policy: PolicySpec | None = None
    """The ``policy:`` section (its type and validated config); None: no policy."""
    audit: AuditSettings = _NO_AUDIT_SECTION
    """The ``audit:`` section: where direct calls are audited."""


async def deployment_problems(
    deployment: Deployment, registry: Registry | None = None,
    lines: Mapping[Any, int] | None = None,
) -> list[ConfigProblem]:
    """The problems every registered :class:`~powerplane.kinds.DeploymentCheck` finds in
    ``deployment`` (``registry``: default the process-wide one), in registration order,
    each with its line when ``lines`` has it. A check that raises ``ConfigError`` found its
    problems; one that raises another :class:`~powerplane.errors.PowerplaneError` could not
    ask, and that error propagates; any other exception is a plugin's bug, raised as a
    ``PowerplaneError`` naming the check (exit 1), never taken as "checked"."""
    from powerplane.errors import PowerplaneError
    from powerplane.plugins import registry as default_registry

    reg = registry if registry is not None else default_registry()
    found: list[ConfigProblem] = []
    for check in list(reg.deployment_checks.values()):
        try:
            problems = list(await check.check(deployment))
        except ConfigError as exc:
            problems = list(exc.problems)
        except PowerplaneError:
            raise
        except Exception as exc:  # a plugin's own bug: not a verdict on the deployment
            raise PowerplaneError(f"deployment check {check.name!r} failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        for problem in problems:
            line = problem.line
            if line is None and lines:
                path = tuple(int(p) if p.isdigit() else p for p in problem.path.split("."))
                line = _line(lines, path) or _line(lines, tuple(problem.path.split(".")))
            found.append(ConfigProblem(problem.path, problem.message, line))
    return found


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
    """Read and validate a deployment file. Raises :class:`ConfigError` with every problem.

    The file is read no further than :data:`powerplane._yaml.MAX_BYTES`.
    """
    data, lines, source = read_config(path)
    return parse_config(data, registry=registry, source=source, lines=lines)


def check_config(
    path: str | os.PathLike[str] | None = None, registry: Registry | None = None
) -> Deployment:
    """What ``powerplane check`` proves of a deployment file, every problem in one run.

    Everything :func:`load_config` checks; then every secret reference of every channel
    resolved now (each value dropped at once, never shown: an unset variable, a missing
    file, a Kubernetes Secret that cannot be read), and every channel whose config and
    secrets are good opened and closed again (what its type checks then, such as the
    Talos certificates behind inline references), without a call to a device. Then, the
    file good so far, every registered :class:`~powerplane.kinds.DeploymentCheck`
    (:func:`deployment_problems`: the ``metal3`` guard lists the BareMetalHosts of the
    cluster a ``metal3`` channel names). Raises :class:`ConfigError` with each problem, its
    path and line; a check that could not ask raises its own error (exit 1), never passes
    as checked.
    """
    import asyncio

    data, lines, source = read_config(path)
    deployment = _parse_config(data, registry, source, lines, also=_every_channel_proven)
    problems = asyncio.run(deployment_problems(deployment, registry, lines))
    if problems:
        raise ConfigError(problems[:MAX_PROBLEMS], source=source)
    return deployment


def channel_secret_problems(
    configured: ConfiguredChannel, lines: Mapping[Any, int] | None = None,
    *, resolve: bool = False,
) -> list[ConfigProblem]:
    """The problems of a channel's secrets as it opens (each kind's ``present`` check: an
    unset variable, a missing file), or with ``resolve`` each one read now (``powerplane
    check``), at ``channels.<name>.<field>``: a channel no command touches never fails it."""
    from powerplane.secrets import secret_problems

    found = secret_problems(configured.config, ("channels", configured.name), resolve=resolve)
    return [ConfigProblem(format_path(where), message, _line(lines or {}, where))
            for where, message in found]


def _every_channel_proven(
    channels: Mapping[str, ConfiguredChannel], lines: Mapping[Any, int]
) -> list[ConfigProblem]:
    """Every secret of every channel resolved, then each channel with good secrets opened."""
    problems: list[ConfigProblem] = []
    good: list[ConfiguredChannel] = []
    for configured in channels.values():
        found = channel_secret_problems(configured, lines, resolve=True)
        problems.extend(found)
        if not found:
            good.append(configured)
    if good:
        import asyncio

        problems.extend(asyncio.run(_open_and_close(good, lines)))
    return problems


async def _open_and_close(
    channels: list[ConfiguredChannel], lines: Mapping[Any, int]
) -> list[ConfigProblem]:
    """Each channel created by its type's factory (in a running loop, as the host does) and
    closed again: what the factory refuses becomes a problem of that channel."""
    import inspect

    out: list[ConfigProblem] = []
    for configured in channels:
        base: tuple[str | int, ...] = ("channels", configured.name)
        try:
            channel = configured.type.factory(configured.name, configured.config)
        except ConfigError as exc:
            for problem in exc.problems:
                path = tuple(problem.path.split(".")) if problem.path else base
                out.append(ConfigProblem(problem.path or format_path(base), problem.message,
                                         problem.line or _line(lines, path)))
            continue
        except Exception as exc:  # a plugin's own bug: a problem of this channel
            out.append(ConfigProblem(format_path(base), "the channel could not be opened: "
                                     f"{type(exc).__name__}", _line(lines, base)))
            continue
        try:
            closed = channel.close()
            if inspect.isawaitable(closed):
                await closed
        except Exception as exc:
            out.append(ConfigProblem(format_path(base), "the channel could not be closed: "
                                     f"{type(exc).__name__}", _line(lines, base)))
    return out


def read_config(
    path: str | os.PathLike[str] | None = None,
) -> tuple[Any, Mapping[Any, int], str]:
    """Read a config file (found as :func:`find_config` does) under the same bounds as
    :func:`load_config`, without validating it: ``(data, lines, source)``.

    For a tool whose file is a deployment plus a section of its own (the conformance
    suite's ``conformance:``): it takes its section out of ``data`` and hands the rest to
    :func:`parse_config` with ``lines`` and ``source``, so every problem still names its
    path and line. Unreadable, oversized, non-UTF-8 or hostile files raise
    :class:`ConfigError`, as in :func:`load_config`.

    A file named ``*.json`` is JSON (:func:`powerplane._json.load_json`: the same bounds,
    lines and problems, several times faster to read than YAML: the format for generated
    fleets); a file that starts with ``{`` is read as JSON when it is JSON, else as YAML.
    """
    file, text, size = _config_text(path)
    source = str(file)
    data, lines = parse_text(file, text, source, size)
    return data, lines, source


def _config_text(path: str | os.PathLike[str] | None) -> tuple[Path, str, int]:
    """The config file :func:`find_config` finds, its text and its size, read under the
    bounds (:func:`~powerplane.files.read_text`)."""
    file = find_config(path)
    source = str(file)
    if path is not None:
        origin = "given with --config"
    elif os.environ.get(ENV_CONFIG):
        origin = f"named by ${ENV_CONFIG}"
    else:
        origin = "the default: no --config was given and $POWERPLANE_CONFIG is not set"
    text, size = read_text(file, source, _missing_config(source, origin),
                           grants="the deployment file")
    return file, text, size


def parse_text(file: Path, text: str, source: str, size: int) -> tuple[Any, Mapping[Any, int]]:
    """The document and its lines of a config file's ``text`` (read by :func:`read_config`'s
    rules: JSON by name or by its first character, else YAML); the parser imported here."""
    from powerplane._json import load_json
    from powerplane._yaml import load_yaml

    if file.suffix.lower() == ".json":
        return load_json(text, source, size=size)
    if _JSON_START.match(text):
        return load_json(text, source, size=size, or_yaml=True)
    return load_yaml(text, source, size=size)


def _missing_config(source: str, origin: str) -> str:
    return (f"config file {source} does not exist ({origin}); name the deployment file with "
            f"--config FILE (before or after the command) or ${ENV_CONFIG}=FILE, or create "
            "./powerplane.yaml")


_JSON_START = re.compile(r"[ \t\r\n]*\{")
"""A file that starts with ``{`` is read as JSON (a flow mapping that is not JSON, as YAML)."""


def _model_at(model: Any, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the value at ``loc`` under ``model`` (for its keys)."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                field = next((f for f in tp.model_fields.values() if f.alias == part), None)
            if field is None:
                return None
            tp = field.annotation
        else:
            origin = typing.get_origin(tp)
            args = typing.get_args(tp)
            if origin in (dict, Mapping) and len(args) == 2:
                tp = args[1]
            elif origin in (list, tuple) and args:
                tp = args[0]
            else:
                return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    """``X | None`` -> ``X`` (the first model among a union's members)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if models else (members[0] if len(members) == 1 else tp)
    return tp


def _known_keys(model: type[BaseModel]) -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(field.alias or name)
    return keys


_BOOL_ERRORS = frozenset({"bool_type", "bool_parsing"})
"""pydantic's error types for a value that is not a boolean (its lax or strict ``bool``)."""
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
"""pydantic's error types for a number out of its bounds (NaN is out of every bound)."""
def _problems(
    exc: ValidationError,
    prefix: tuple[str | int, ...],
    lines: Mapping[Any, int],
    model: type[BaseModel] | None = None,
) -> list[ConfigProblem]:
    out = []
    for err in exc.errors(include_url=False):  # the input is looked at, never shown
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        path: tuple[str | int, ...] = tuple(
            p if isinstance(p, int) else str(p) for p in (*prefix, *loc)
        )
        msg = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            holder = _model_at(model, loc[:-1]) if model is not None else None
            msg = unknown_key(str(loc[-1]), _known_keys(holder)) if holder else "unknown key"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind in _BOOL_ERRORS:
            msg = BOOL_EXPECTED
        elif kind in _BOUND_ERRORS and _not_finite(err.get("input")):
            msg = FINITE_EXPECTED  # a model without allow_inf_nan=False: not "less than"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        out.append(ConfigProblem(format_path(path), msg, _line(lines, path)))
    return out


def _line(lines: Mapping[Any, int], path: tuple[str | int, ...]) -> int | None:
    """The line of ``path``, else of the nearest enclosing value that has one."""
    probe = path
    while probe:
        line = lines.get(probe)
        if line is not None:
            return line
        probe = probe[:-1]
    return None


def _limit_problems(
    cfg: BaseModel, timeout_s: float, base: tuple[str, ...], lines: Mapping[Any, int]
) -> list[ConfigProblem]:
    """A channel model's own check against ``limits.timeout_s``, when it has one.

    A model may implement :class:`powerplane.channel.ChecksLimits` (``check_limits(self,
    timeout_s: float) -> list[tuple[str, str]]``): each ``(field, message)`` becomes a
    problem at ``channels.<name>.<field>``.
    """
    from powerplane.channel import ChecksLimits  # loaded already: cfg's type is its ChannelType's

    if not isinstance(cfg, ChecksLimits):
        return []
    try:
        found = list(cfg.check_limits(timeout_s))
    except Exception as exc:  # a plugin's own bug: a problem of this channel, not a crash
        return [ConfigProblem(format_path(base),
                              f"check_limits failed: {type(exc).__name__}", _line(lines, base))]
    out = []
    for item in found:
        field, message = item
        path = (*base, *(str(field).split(".") if field else ()))
        out.append(ConfigProblem(format_path(path), str(message), _line(lines, path)))
    return out


def _unknown_channel(node: str, index: int, channel: str, known: set[str],
                     lines: Mapping[Any, int]) -> ConfigProblem:
    """``nodes.<node>.channels[<index>].channel`` names no channel of the file."""
    path: tuple[str | int, ...] = ("nodes", node, "channels", index, "channel")
    names = sorted(str(c) for c in known)
    close = difflib.get_close_matches(channel, names, n=1, cutoff=0.6)
    mean = f"; did you mean {close[0]!r}?" if close else ""
    known_channels = ", ".join(names) or "none configured"
    return ConfigProblem(format_path(path),
                         f"unknown channel {channel!r}; channels: {known_channels}{mean}",
                         lines.get(path))


def _raw_refs(raw_node: Any) -> list[tuple[int, str]]:
    """``(index, channel name)`` of each channel reference of a node as written (one that
    did not validate): the references that name a channel by a string."""
    refs = raw_node.get("channels") if isinstance(raw_node, dict) else None
    if not isinstance(refs, list):
        return []
    return [(i, ref["channel"]) for i, ref in enumerate(refs)
            if isinstance(ref, dict) and isinstance(ref.get("channel"), str)]


def _ref_problems(node: str, refs: list[tuple[int, str]], known: set[str],
                  lines: Mapping[Any, int]) -> list[ConfigProblem]:
    """A node's references to channels the file does not have, or lists twice."""
    out = [_unknown_channel(node, i, channel, known, lines)
           for i, channel in refs if channel not in known]
    seen: set[str] = set()
    for i, channel in refs:
        if channel in seen:
            path = ("nodes", node, "channels", i, "channel")
            out.append(ConfigProblem(format_path(path),
                                     f"channel {channel!r} is listed twice for this node",
                                     lines.get(path)))
        seen.add(channel)
    return out


class ProvenNodes(Mapping[str, NodeSpec]):
    """The nodes of a document validated whole before (:func:`_parse_config`'s
    ``nodes_proven``): each validated on first use, exactly as a load validates it, and
    kept; iterating gives the names in the file's order. A command that reads one node
    validates one."""

    def __init__(self, raw: Mapping[str, Any], context: Mapping[str, Any],
                 source: str) -> None:
        self._raw = raw
        self._context = context
        self._source = source
        self._done: dict[str, NodeSpec] = {}

    def __getitem__(self, name: str) -> NodeSpec:
        found = self._done.get(name)
        if found is None:
            raw = self._raw[name]  # KeyError: no such node
            try:
                found = NodeSpec.__pydantic_validator__.validate_python(
                    raw, context=self._context)
            except ValidationError as exc:  # not if the cache's key holds what it proved
                raise ConfigError(_problems(exc, ("nodes", name), {}, NodeSpec),
                                  source=self._source) from None
            self._done[name] = found
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def parse_config(
    data: Any,
    registry: Registry | None = None,
    source: str = "<memory>",
    lines: Mapping[Any, int] | None = None,
) -> Deployment:
    """Validate already-parsed config data (a mapping) against the models and the registry.

    Library code leaves the garbage collector as the caller has it; the CLI turns it off
    in its own process while a file loads (:func:`powerplane.cli._common.collector_off`).
    """
    return _parse_config(data, registry, source, lines)


def _parse_config(
    data: Any,
    registry: Registry | None,
    source: str,
    lines: Mapping[Any, int] | None,
    also: Callable[[Mapping[str, ConfiguredChannel], Mapping[Any, int]],
                   list[ConfigProblem]] | None = None,
    nodes_proven: bool = False,
) -> Deployment:
    """:func:`parse_config`'s work. ``registry`` (default: the process-wide one) is the
    only one asked: for channel types, port types, and every secret reference's kind (in
    the validation context, :data:`~powerplane.secrets.SECRET_KINDS`).

    ``nodes_proven``: ``data`` is a document this code validated whole before (the
    validated-config cache's, :mod:`powerplane.config_cache`): every section and channel
    is validated again as always (they may read other files, which may have changed), the
    nodes (a pure function of the document and the channel types) each on first use
    (:class:`ProvenNodes`)."""
    # imported here, not at the top, for cost only: importing the config models (as every
    # plugin's config does) loads no plugin machinery (pluggy, entry points)
    from powerplane.plugins import registry as default_registry

    lines = lines if lines is not None else {}
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=source)
    problems: list[ConfigProblem] = []
    sections = _sections(data, lines, problems)
    raw_nodes = _mapping(data, "nodes", "expected a mapping of node names to nodes", lines,
                         problems)
    node_problems_at = len(problems)  # the nodes' own problems go here, found below
    # absent: the defaults, which channels are checked against too; invalid: already reported
    limits = sections.get("limits", Limits() if "limits" not in data else None)
    raw_channels = _mapping(data, "channels",
                            "expected a mapping of channel names to channels", lines, problems)
    reg = registry if registry is not None else default_registry()
    if isinstance(sections.get("lifecycle"), dict) and "lifecycle" in data:
        # the whole file, whatever the command: the lifecycle's settings (imported only for
        # a file with the section) validated here, each problem with its line
        from powerplane.settings.lifecycle import validated_section

        sections["lifecycle"], found = validated_section(sections["lifecycle"], source, reg,
                                                          lines)
        problems.extend(found)
    policy: PolicySpec | None = None
    if "policy" in data and isinstance(sections.get("policy"), dict):
        policy, found = validated_policy(data["policy"], source, reg, lines)
        problems.extend(found)
    channels: dict[str, ConfiguredChannel] = {}
    for name, raw in raw_channels.items():
        channel = _channel(str(name), raw, reg, limits, lines, problems)
        if channel is not None:
            channels[channel.name] = channel
    nodes, node_problems = _nodes(raw_nodes, channels, {str(k) for k in raw_channels}, lines,
                                  source, nodes_proven)
    problems[node_problems_at:node_problems_at] = node_problems
    if also is not None:  # check_config: every secret read, every channel opened
        problems.extend(also(channels, lines))
    if problems:
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = [*problems[:MAX_PROBLEMS],
                        ConfigProblem("", f"{more} more problem(s) not shown; fix these first")]
        raise ConfigError(problems, source=source)
    return Deployment(
        channels=channels,
        nodes=nodes,
        recovery=sections.get("recovery", Recovery()),
        limits=sections.get("limits", Limits()),
        lifecycle=sections.get("lifecycle", {}),
        source=source,
        raw=data,
        policy=policy,
        audit=sections.get("audit", AuditSettings()),
    )


def _sections(data: dict[Any, Any], lines: Mapping[Any, int],
              problems: list[ConfigProblem]) -> dict[str, Any]:
    """Every top-level section but ``nodes`` and ``channels`` validated (each problem added
    to ``problems``, an unknown key with what was meant)."""
    sections: dict[str, Any] = {}
    known = _known_keys(_Document)
    for key, value in data.items():
        skey = str(key)
        if skey not in _Document.model_fields:
            problems.append(ConfigProblem(skey, unknown_key(skey, known), lines.get((skey,))))
        elif skey in ("nodes", "channels"):
            continue  # each node and channel on its own: one bad one hides nothing
        else:
            try:
                sections[skey] = getattr(_Document.model_validate({skey: value}), skey)
            except ValidationError as exc:
                problems.extend(_problems(exc, (), lines, _Document))
    return sections


def _mapping(data: dict[Any, Any], key: str, expected: str, lines: Mapping[Any, int],
             problems: list[ConfigProblem]) -> dict[Any, Any]:
    """``data[key]``, a mapping (absent: empty; anything else: a problem, and empty)."""
    value = data.get(key, {})
    if isinstance(value, dict):
        return value
    problems.append(ConfigProblem(key, expected, lines.get((key,))))
    return {}


def _channel(name: str, raw: Any, reg: Registry, limits: Limits | None,
             lines: Mapping[Any, int],
             problems: list[ConfigProblem]) -> ConfiguredChannel | None:
    """One channel of the file, validated by its type; None (its problems added) if not."""
    base = ("channels", name)
    if not isinstance(raw, dict):
        problems.append(ConfigProblem(format_path(base), "expected a mapping", lines.get(base)))
        return None
    tname = raw.get("type")
    if not isinstance(tname, str):
        problems.append(ConfigProblem(
            format_path((*base, "type")),
            "required key is missing: the channel type (a registered name)", lines.get(base)))
        return None
    ctype = reg.get(tname)
    if ctype is None:
        problems.append(ConfigProblem(format_path((*base, "type")),
                                      _unknown_type(tname, reg), lines.get((*base, "type"))))
        return None
    body = {k: v for k, v in raw.items() if k != "type" and k != "manners"}
    manners = None
    if "manners" in raw:
        from powerplane.channel import Manners

        manners_raw = raw["manners"]
        if not isinstance(manners_raw, dict):
            problems.append(ConfigProblem(format_path((*base, "manners")), "expected a mapping",
                                          lines.get((*base, "manners"))))
            return None
        try:
            manners = Manners.model_validate({**ctype.manners.model_dump(), **manners_raw})
        except ValidationError as exc:
            problems.extend(_problems(exc, (*base, "manners"), lines, Manners))
            return None
    try:
        # every secret reference checked against this registry
        cfg = ctype.config.model_validate(body, context={SECRET_KINDS: reg})
    except ValidationError as exc:
        problems.extend(_problems(exc, base, lines, ctype.config))
        return None
    if isinstance(limits, Limits):
        problems.extend(_limit_problems(cfg, limits.timeout_s, base, lines))
    return ConfiguredChannel(name, ctype, cfg, manners)


def _unknown_type(tname: str, reg: Registry) -> str:
    """Why ``tname`` is no channel type: the registered ones, the plugins that failed to
    load or were not loaded, the closest name."""
    names = sorted(reg.channel_types)
    known_types = ", ".join(names) or "none"
    close = difflib.get_close_matches(tname, names, n=1, cutoff=0.6)
    mean = f"; did you mean {close[0]!r}?" if close else ""
    hint = ""
    failed = [f.name for f in reg.failures]
    if failed:
        hint = f"; plugins that failed to load: {', '.join(failed)}"
    hint += reg.restriction_hint(tname)  # POWERPLANE_LOAD_PLUGINS may have hidden it
    return f"unknown channel type {tname!r}; registered types: {known_types}{hint}{mean}"


def _nodes(raw_nodes: dict[Any, Any], channels: Mapping[str, ConfiguredChannel],
           channel_names: set[str], lines: Mapping[Any, int], source: str,
           nodes_proven: bool) -> tuple[Mapping[str, NodeSpec], list[ConfigProblem]]:
    """The nodes, each validated once, its targets parsed by their channel types as it is
    built, and their problems in file order (each node's own, then its references)."""
    context = {TARGET_PARSERS: {name: c.type.target for name, c in channels.items()
                                 if c.type.target is not None}}
    if nodes_proven:
        return ProvenNodes(raw_nodes, context, source), []
    built: dict[str, NodeSpec] = {}
    node_problems: list[ConfigProblem] = []
    validate = NodeSpec.__pydantic_validator__.validate_python  # model_validate, one call less
    for nname, raw_node in raw_nodes.items():
        name = str(nname)
        try:
            node = built[name] = validate(raw_node, context=context)
        except ValidationError as exc:
            node_problems.extend(_problems(exc, ("nodes", name), lines, NodeSpec))
            # its channel references are checked all the same: one pass finds every problem
            node_problems.extend(_ref_problems(name, _raw_refs(raw_node), channel_names, lines))
            continue
        refs = node.channels
        if not refs:
            continue
        if len(refs) == 1:  # the common case: nothing to compare with
            if refs[0].channel not in channel_names:
                node_problems.append(
                    _unknown_channel(name, 0, refs[0].channel, channel_names, lines))
            continue
        node_problems.extend(_ref_problems(name, [(i, r.channel) for i, r in enumerate(refs)],
                                           channel_names, lines))
    return built, node_problems
