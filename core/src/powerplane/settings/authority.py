"""The deployment's ``policy:`` and ``audit:`` sections, validated with the rest of the file.

::

    policy: {type: local, file: roles.yaml}    # who may take which action (absent: anyone)
    audit: {path: /var/log/powerplane/audit.jsonl}   # where direct calls are audited
                                               # (absent: the lifecycle store, else
                                               # $XDG_STATE_HOME/powerplane/audit.jsonl)
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from powerplane._bounds import format_path, line_of
from powerplane.errors import ConfigError, ConfigProblem
from powerplane.kinds import BASE_DIR, OWNER, PolicyType
from powerplane.secrets import SecretRef

if TYPE_CHECKING:
    from powerplane.plugins import Registry

__all__ = ["AuditSettings", "PolicySpec", "validated_policy"]


class AuditSettings(BaseModel):
    """``audit:``: where the audit records of direct calls go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = None
    """An append-only JSON-lines file (relative: beside the deployment file). Absent: the
    lifecycle store's audit when there is a ``lifecycle:`` section, else
    ``$XDG_STATE_HOME/powerplane/audit.jsonl``."""
    key: SecretRef | None = None
    """An Ed25519 private key (PEM, no passphrase: ``openssl genpkey -algorithm ed25519``)
    that seals the trail with a signed checkpoint at each append
    (:mod:`powerplane.authority.seal`); a ``{file: PATH}`` key must be a file no one else
    could have written (as the deployment file). Absent: the trail is chained, not sealed."""


@dataclass(frozen=True)
class PolicySpec:
    """A validated ``policy:`` section: its type and its validated config."""

    type: PolicyType[Any]
    config: BaseModel




def validated_policy(
    raw: Any, source: str, registry: Registry, lines: Mapping[Any, int],
) -> tuple[PolicySpec | None, list[ConfigProblem]]:
    """The ``policy:`` section validated by its registered type (its roles file read now)."""
    base = ("policy",)
    if not isinstance(raw, dict):
        return None, [ConfigProblem("policy", "expected a mapping with a type:",
                                    line_of(lines, base))]
    tname = raw.get("type")
    if not isinstance(tname, str):
        return None, [ConfigProblem("policy.type", "required key is missing: the policy "
                                    "type (local, or one a plugin registers)",
                                    line_of(lines, base))]
    ptype = registry.policy_types.get(tname)
    if ptype is None:
        names = sorted(registry.policy_types)
        close = difflib.get_close_matches(tname, names, n=1, cutoff=0.6)
        mean = f"; did you mean {close[0]!r}?" if close else ""
        return None, [ConfigProblem(
            "policy.type", f"unknown policy type {tname!r}; registered types: "
            f"{', '.join(names) or 'none'}{registry.missing_hint('policy', tname)}{mean}",
            line_of(lines, (*base, "type")))]
    folder = Path(source).parent if source and not source.startswith("<") else Path.cwd()
    context: dict[str, Any] = {BASE_DIR: folder}
    if source and not source.startswith("<"):
        try:
            context[OWNER] = os.stat(source).st_uid
        except OSError:
            pass
    try:
        config = ptype.config.model_validate(raw, context=context)
    except ConfigError as exc:  # a file the section names (a roles file): its own problems
        where = exc.source or "policy"
        return None, [ConfigProblem(f"{where}: {p.path}" if p.path else where,
                                    p.message, p.line) for p in exc.problems]
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = (*base, *err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = f"unknown key {err['loc'][-1]!r}"
            problems.append(ConfigProblem(format_path(loc), msg, line_of(lines, loc)))
        return None, problems
    return PolicySpec(ptype, config), []
