"""The ``conformance:`` section of a target file, validated with path-named errors.

A target file is a deployment config (channels, nodes, ...) with one more section::

    conformance:
      nodes: [node-2]                 # the nodes the suite may act on (default: every node)
      allow_destructive: true         # false: state-changing checks are NOT TESTED
      attended: false                 # true: a person powers on what the channel cannot
      settle_timeout_s: 30
      expected_capabilities:          # optional: discovered verbs must equal these
        bench-bmc: [reboot, shutdown, power-on]
      xfail:                          # optional: assertion id -> known defect (strict)
        POWER_ON_IDEMPOTENT: "firmware 2.1 rejects On while on"
      negative:                       # optional, per channel: overrides for the negative cases
        bench-bmc:                    # (derived from the channel type's declarations:
          timeout_s: 1                #  address, secret fields, timeouts)
          transport: tcp

The section is this distribution's, not core's: :func:`load_target` takes it out of the
file and hands the rest to core's :func:`~powerplane.config.parse_config` (a deployment
file with a ``conformance:`` section is not a deployment core accepts). Problems of both
are reported together, each with its path and line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from powerplane import (
    ConfigError,
    ConfigProblem,
    Deployment,
    StrictBool,
    StrictFloat,
    StrictInt,
    Verb,
    parse_config,
)
from powerplane.config import read_config, unknown_key
from powerplane.plugins import Registry
from powerplane_conformance.assertions import ASSERTIONS
from powerplane_conformance.hints import NegativeHints, hint_problems

__all__ = ["ConformanceSettings", "NegativeHints", "Target", "load_target", "split_target"]

SECTION = "conformance"


def _verb(value: Any) -> Any:
    return Verb.parse(value) if isinstance(value, str) else value


VerbName = Annotated[Verb, BeforeValidator(_verb)]
"""A verb, written ``power-on``, ``power_on`` or ``POWER_ON``."""
Mode = Literal["graceful", "hard"]
"""How a verb is carried out: a sequenced OS action, or a power cut."""


class ConformanceSettings(BaseModel):
    """What the suite may do to the target, and what it should expect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: list[str] | None = None
    """The nodes the suite may act on (default: every node of the file)."""
    allow_destructive: StrictBool = False
    """Run state-changing checks; when false they are NOT TESTED, with that reason."""
    allow_terminate: StrictBool = False
    """Also run terminate (destroys a cloud instance; never restored)."""
    attended: StrictBool = False
    """A person is at the machines: when a check (or the restore after it) needs a machine
    on and its channel cannot power on, the suite asks the person to power it on at the
    rack and reads back until it is on (the readback is the evidence, never the answer).
    Asked only in a destructive run, through ``run_suite(power_on_by_hand=...)`` or the
    ``powerplane conformance`` command on a terminal; with no one to ask, such a check is
    NOT TESTED with that reason."""
    settle_timeout_s: StrictFloat = Field(30.0, gt=0, le=86_400, allow_inf_nan=False)
    """How long readback may take to reach the state a verb leads to."""
    repeat: StrictInt = Field(3, ge=1, le=100)
    """How many times the repetition checks run each verb."""
    call_timeout_s: StrictFloat | None = Field(None, gt=0, le=86_400, allow_inf_nan=False)
    """Bound on one channel call (default: the file's ``limits.timeout_s``)."""
    expected_capabilities: dict[str, list[VerbName] | dict[VerbName, Mode]] = Field(
        default_factory=dict)
    """Per channel: the verbs discovery must find, exactly (catches firmware drift); a
    mapping (``{reboot: graceful, shutdown: hard}``) also checks graceful or hard."""
    xfail: dict[str, str] = Field(default_factory=dict)
    """Known defects: assertion id -> reason. Strict: an unexpected pass is a failure."""
    negative: dict[str, NegativeHints] = Field(default_factory=dict)
    """Per channel: how to build the negative cases (closed port, silent server, bad secret)."""



@dataclass(frozen=True)
class Target:
    """A validated target: the deployment and its conformance settings."""

    deployment: Deployment
    settings: ConformanceSettings

    @property
    def nodes(self) -> list[str]:
        """The nodes the suite may act on."""
        if self.settings.nodes is not None:
            return list(self.settings.nodes)
        return list(self.deployment.nodes)


def _format(loc: tuple[int | str, ...]) -> str:
    out = SECTION
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _line(lines: Mapping[Any, int], loc: tuple[int | str, ...]) -> int | None:
    """The line of the value at ``conformance.<loc>``, or of the nearest parent that has one."""
    path = (SECTION, *loc)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the mapping at ``conformance.<loc>`` accepts (for "did you mean")."""
    if not loc:
        return list(ConformanceSettings.model_fields)
    if loc[0] == "negative" and len(loc) == 2:
        return list(NegativeHints.model_fields)
    return []


def _problems(exc: ValidationError, lines: Mapping[Any, int]) -> list[ConfigProblem]:
    out = []
    for err in exc.errors(include_input=False, include_url=False):
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = unknown_key(str(err["loc"][-1]), _keys_at(tuple(err["loc"][:-1])))
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        loc = tuple(err["loc"])
        out.append(ConfigProblem(_format(loc), msg, _line(lines, loc)))
    return out


def split_target(data: Any) -> tuple[Any, Any]:
    """``(deployment data, the raw conformance section or None)``: the section taken out
    of a target document, the rest left as it is for core's ``parse_config``."""
    if not isinstance(data, Mapping):
        return data, None
    rest = {k: v for k, v in data.items() if k != SECTION}
    return rest, data.get(SECTION)


def _parse_settings(
    raw: Any, lines: Mapping[Any, int]
) -> tuple[ConformanceSettings | None, list[ConfigProblem]]:
    """The section's own shape, before anything that needs the deployment."""
    if raw is None:
        return None, [ConfigProblem(SECTION, "required section is missing: the target file "
                                             "must say which nodes the suite may act on")]
    if not isinstance(raw, Mapping):
        return None, [ConfigProblem(SECTION, "expected a mapping (nodes, allow_destructive, "
                                             "...)", _line(lines, ()))]
    try:
        return ConformanceSettings.model_validate(dict(raw)), []
    except ValidationError as exc:
        return None, _problems(exc, lines)


def _check_against(
    settings: ConformanceSettings, deployment: Deployment, lines: Mapping[Any, int]
) -> list[ConfigProblem]:
    """What the section names that the deployment does not have."""
    problems: list[ConfigProblem] = []

    def problem(loc: tuple[int | str, ...], msg: str) -> None:
        problems.append(ConfigProblem(_format(loc), msg, _line(lines, loc)))

    for i, node in enumerate(settings.nodes or []):
        if node not in deployment.nodes:
            known = ", ".join(sorted(deployment.nodes)) or "none"
            problem(("nodes", i), f"unknown node {node!r}; nodes: {known}")
        elif not deployment.nodes[node].channels:
            problem(("nodes", i), f"node {node!r} has no channel to test")
    if settings.nodes is not None and not settings.nodes:
        problem(("nodes",), "expected at least one node")
    for key in ("expected_capabilities", "negative"):
        for name in getattr(settings, key):
            if name not in deployment.channels:
                known = ", ".join(sorted(deployment.channels)) or "none"
                problem((key, name), f"unknown channel {name!r}; channels: {known}")
    for ident in settings.xfail:
        if ident not in ASSERTIONS:
            problem(("xfail", ident), f"unknown assertion id {ident!r}")
    return problems


def _check_negative_hints(
    settings: ConformanceSettings, deployment: Deployment, lines: Mapping[Any, int],
    registry: Registry | None,
) -> list[ConfigProblem]:
    """Every config a ``negative:`` hint shapes, validated against the channel type's model
    now: a hint the model rejects is the target's mistake (exit 2), never the device's."""
    return [ConfigProblem(_format(loc), msg, _line(lines, loc))
            for loc, msg in hint_problems(deployment, settings.negative, registry)]


def load_target(
    source: str | os.PathLike[str] | Mapping[str, Any], registry: Registry | None = None
) -> Target:
    """Load a target file (a path) or target data (a mapping) and validate it.

    The ``conformance:`` section is taken out and validated here; the rest is the
    deployment, validated by core. Raises :class:`~powerplane.errors.ConfigError` with one
    path-named problem per fault, of the deployment and of the section together. Once
    both are valid, every config a ``negative:`` hint shapes for the network negatives is
    validated against its channel type's model (problems at
    ``conformance.negative.<channel>.<hint>``).
    """
    lines: Mapping[Any, int]
    if isinstance(source, Mapping):
        data: Any = dict(source)
        lines, where = {}, "<target>"
    else:
        data, lines, where = read_config(Path(source))
    rest, raw = split_target(data)
    settings, problems = _parse_settings(raw, lines)
    try:
        deployment = parse_config(rest, registry=registry, source=where, lines=lines)
    except ConfigError as exc:
        raise ConfigError([*exc.problems, *problems], source=exc.source) from None
    if settings is not None:
        problems += _check_against(settings, deployment, lines)
    if settings is not None and not problems:
        problems += _check_negative_hints(settings, deployment, lines, registry)
    if problems or settings is None:
        raise ConfigError(problems, source=deployment.source)
    return Target(deployment, settings)
