"""The ``local`` policy type: a roles file of roles and bindings (deny wins).

::

    policy: {type: local, file: roles.yaml}     # in the deployment file (relative: beside it)

    # roles.yaml
    roles:
      admin: {tier: admin}                      # every action
      viewer: {tier: read}                      # servers:read
      maintenance-engineer:
        tier: read
        allow: [servers:cordon, servers:uncordon]
      night-shift:
        allow: [servers:reboot]
        deny: [servers:shutdown]
        sites: [plant-a]                        # scope: only nodes of these sites
        labels: {rack: a}                       # scope: only nodes with these labels
    bindings:
      - {role: admin, users: [alice]}
      - {role: maintenance-engineer, groups: [plant-eng]}

A role grants every action whose default tier (:data:`~powerplane.authority.actions.DEFAULT_TIER`)
is at most its ``tier`` (``none`` when not given), plus its ``allow:`` list, minus nothing:
``deny:`` is separate and wins over every allow of every role. An identity holds the
roles bound to its user or to any of its groups; a scoped role counts only for the nodes
in its scope. No role that allows the action: denied. The file is read with the
deployment's bounds (size, nesting, hostile YAML refused) when the deployment loads: a
file that cannot be read, an unknown action ("did you mean"), a binding to an unknown role
or a role bound to nobody's benefit (no users, no groups) is a config problem (exit 2)
naming the file, the path and the line; never "allow".
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from powerplane._bounds import line_of
from powerplane._yaml import format_path, load_yaml
from powerplane.authority.actions import DEFAULT_TIER, Action, Tier, parse_action
from powerplane.authority.identity import Identity
from powerplane.authority.policy import Decision, PolicyContext
from powerplane.errors import ConfigError, ConfigProblem
from powerplane.files import read_text
from powerplane.kinds import BASE_DIR, OWNER, PolicyType

if TYPE_CHECKING:
    from powerplane.nodes import NodeSpec

__all__ = ["LOCAL", "LocalPolicy", "LocalPolicyConfig", "Role", "RolesFile", "load_roles"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _action(value: Any) -> Any:
    return parse_action(value) if isinstance(value, str) else value


ActionName = Annotated[Action, BeforeValidator(_action)]
"""An action name in a roles file (an unknown one: "did you mean")."""


class Role(_Strict):
    """A role: a tier, and actions allowed or denied beyond it, optionally scoped."""

    tier: Tier = Tier.NONE
    """What it grants without naming actions: ``none``, ``read`` or ``admin``."""
    allow: list[ActionName] = Field(default_factory=list)
    """Actions allowed beyond the tier (a delegation: one deliberate line each)."""
    deny: list[ActionName] = Field(default_factory=list)
    """Actions denied, whatever any role allows (deny wins)."""
    sites: list[str] | None = None
    """Scope: only nodes of these sites (absent: every node)."""
    labels: dict[str, str] | None = None
    """Scope: only nodes carrying every one of these labels (absent: every node)."""
    description: str = ""
    """What the role is for, in words."""


class Binding(_Strict):
    """Users and groups that hold a role."""

    role: str
    """The role's name under ``roles:``."""
    users: list[str] = Field(default_factory=list)
    """User names (as the platform authenticates them: OS user, API server user, token)."""
    groups: list[str] = Field(default_factory=list)
    """Group names."""


class RolesFile(_Strict):
    """A roles file: roles by name, and who holds them."""

    roles: dict[str, Role] = Field(default_factory=dict)
    bindings: list[Binding] = Field(default_factory=list)


def _binding_problems(data: dict[str, Any], lines: Mapping[Any, int]) -> list[ConfigProblem]:
    """Each binding to a role the file does not define, or to no user and no group (read
    from the raw file, so they are found beside every other problem in one pass)."""
    roles, bindings = data.get("roles"), data.get("bindings")
    if not isinstance(roles, dict) or not isinstance(bindings, list):
        return []
    names = [str(n) for n in roles]
    out = []
    for i, b in enumerate(bindings):
        if not isinstance(b, dict) or not isinstance(b.get("role"), str):
            continue
        if b["role"] not in roles:
            close = difflib.get_close_matches(b["role"], names, n=1, cutoff=0.6)
            mean = f"; did you mean {close[0]!r}?" if close else ""
            path: tuple[Any, ...] = ("bindings", i, "role")
            out.append(ConfigProblem(format_path(path), f"unknown role {b['role']!r}; roles: "
                                     f"{', '.join(names) or 'none'}{mean}", line_of(lines, path)))
        if not b.get("users") and not b.get("groups"):
            path = ("bindings", i)
            out.append(ConfigProblem(format_path(path), f"binds role {b['role']!r} to no "
                                     "user and no group", line_of(lines, path)))
    return out


def _problems(exc: ValidationError, lines: Mapping[Any, int]) -> list[ConfigProblem]:
    out = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
        out.append(ConfigProblem(format_path(loc), message, line_of(lines, loc)))
    return out




def load_roles(file: Path, owners: set[int] | None = None) -> RolesFile:
    """Read and validate a roles file; :class:`ConfigError` with every problem and line.

    It grants power: refused where someone else could have written it (a trust problem of
    :func:`powerplane.files.trust_problems`), and where ``owners`` is given (root and the
    deployment file's owner) when it is owned by anyone else: a roles file of root's
    deployment that another user owns is that user's grant to themselves."""
    source = str(file)
    text, size = read_text(file, source, f"roles file {source} does not exist",
                           grants="the roles file", owners=owners)
    data, lines = load_yaml(text, source, size=size)
    if not isinstance(data, dict):
        raise ConfigError("a roles file is a mapping with roles: and bindings:", source=source)
    problems = _binding_problems(data, lines)
    try:
        found = RolesFile.model_validate(data)
    except ValidationError as exc:
        problems = [*_problems(exc, lines), *problems]
    if problems:
        raise ConfigError(problems, source=source)
    return found


class LocalPolicyConfig(_Strict):
    """``policy: {type: local, file: PATH}``: a roles file (relative to the deployment's folder)."""

    type: Literal["local"]
    file: str
    """The roles file: YAML, read with the deployment file's bounds."""

    _roles: RolesFile | None = PrivateAttr(default=None)
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _load(self, info: ValidationInfo) -> LocalPolicyConfig:
        context = info.context if isinstance(info.context, dict) else {}
        base = context.get(BASE_DIR)
        path = Path(self.file)
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        owner = context.get(OWNER)
        # a ConfigError passes through pydantic as it is
        self._roles = load_roles(path, owners=None if owner is None else {0, int(owner)})
        self._path = path.absolute()
        return self

    @property
    def roles(self) -> RolesFile:
        assert self._roles is not None
        return self._roles

    @property
    def path(self) -> Path:
        assert self._path is not None
        return self._path


@dataclass(frozen=True, slots=True)
class _Compiled:
    name: str
    tier: Tier
    grants: frozenset[Action]
    deny: frozenset[Action]
    sites: frozenset[str] | None
    labels: tuple[tuple[str, str], ...] | None

    def covers(self, spec: NodeSpec | None) -> bool:
        if self.sites is not None and (spec is None or spec.site not in self.sites):
            return False
        if self.labels is not None:
            if spec is None:
                return False
            got = spec.labels
            return all(got.get(k) == v for k, v in self.labels)
        return True


def _compile(name: str, role: Role) -> _Compiled:
    grants = {a for a, t in DEFAULT_TIER.items() if t.rank <= role.tier.rank}
    grants.update(role.allow)
    return _Compiled(
        name, role.tier, frozenset(grants), frozenset(role.deny),
        frozenset(role.sites) if role.sites is not None else None,
        tuple(sorted(role.labels.items())) if role.labels is not None else None,
    )


def decide_roles(
    roles: Sequence[_Compiled], identity: Identity, action: Action, spec: NodeSpec | None,
    source: str,
) -> Decision:
    """The decision of the roles ``identity`` holds for ``action`` on a node of ``spec``."""
    if not roles:
        return Decision(False, action, identity, f"no role in {source} is bound to this user "
                                                 "or its groups")
    held = [r for r in roles if r.covers(spec)]
    for r in held:
        if action in r.deny:
            return Decision(False, action, identity, f"role {r.name} denies it (deny wins)")
    for r in held:
        if action in r.grants:
            how = (f"tier {r.tier.value}" if DEFAULT_TIER[action].rank <= r.tier.rank
                   else "its allow list")
            return Decision(True, action, identity, f"role {r.name} allows it ({how})")
    out = []
    for r in roles:
        names = ", ".join(a.value for a in Action if a in r.grants) or "nothing"
        scope = "" if r.covers(spec) else ", not this node (out of its scope)"
        out.append(f"role {r.name} allows {names}{scope}")
    return Decision(False, action, identity, "no role allows it; " + "; ".join(out))


class LocalPolicy:
    """Decides from a roles file (see the module docstring)."""

    def __init__(self, roles: RolesFile, source: str) -> None:
        self.source = source
        self.description = f"roles file {source}"
        self._roles = {name: _compile(name, r) for name, r in roles.roles.items()}
        self._bindings = roles.bindings
        self._held: dict[Identity, tuple[tuple[_Compiled, ...], bool]] = {}
        self._scope_labels = sorted({k for r in self._roles.values() if r.labels
                                     for k, _ in r.labels})
        self._cache: dict[tuple[Identity, Action], dict[Any, Decision]] = {}

    def held(self, identity: Identity) -> tuple[tuple[_Compiled, ...], bool]:
        """The roles bound to ``identity``'s user or groups, in binding order, and whether
        any of them is scoped (else every node is decided alike)."""
        found = self._held.get(identity)
        if found is None:
            groups = set(identity.groups)
            names = [b.role for b in self._bindings
                     if identity.user in b.users or groups.intersection(b.groups)]
            roles = tuple(self._roles[n] for n in dict.fromkeys(names))
            scoped = any(r.sites is not None or r.labels is not None for r in roles)
            found = self._held[identity] = (roles, scoped)
        return found

    async def decide(
        self, identity: Identity, action: Action,
        nodes: Sequence[tuple[str, NodeSpec | None]],
    ) -> list[Decision]:
        """Per node; what depends only on who asks (the roles held, whether any is scoped)
        is worked out once per call, and nodes alike in scope share one decision: a
        lookup per node."""
        roles, scoped = self.held(identity)
        decided = self._cache.get((identity, action))
        if decided is None:
            decided = self._cache[(identity, action)] = {}
        if not scoped:
            found = decided.get(_ANY)
            if found is None:
                found = decided[_ANY] = decide_roles(roles, identity, action, None,
                                                     self.source)
            return [found] * len(nodes)
        labels = self._scope_labels
        out: list[Decision] = []
        add = out.append
        if not labels:  # scoped by site alone: the site is the key (no tuple per node)
            for _, spec in nodes:
                key: Any = _NONE if spec is None else spec.site
                found = decided.get(key)
                if found is None:
                    found = decided[key] = decide_roles(roles, identity, action, spec,
                                                        self.source)
                add(found)
            return out
        for _, spec in nodes:
            key = _NONE if spec is None else (spec.site, *map(spec.labels.get, labels))
            found = decided.get(key)
            if found is None:
                found = decided[key] = decide_roles(roles, identity, action, spec,
                                                    self.source)
            add(found)
        return out

    async def decide_actions(
        self, identity: Identity, actions: Sequence[Action],
        nodes: Sequence[tuple[str, NodeSpec | None]],
    ) -> dict[Action, list[Decision]]:
        """:meth:`decide` for several actions over the same nodes: each node's scope key
        worked out once for all of them (``offers`` asks five per node)."""
        roles, scoped = self.held(identity)
        tables = []
        for action in actions:
            decided = self._cache.get((identity, action))
            if decided is None:
                decided = self._cache[(identity, action)] = {}
            tables.append((action, decided))
        if not scoped:
            return {action: [self._of(decided, _ANY, roles, identity, action, None)]
                    * len(nodes) for action, decided in tables}
        labels = self._scope_labels
        out: dict[Action, list[Decision]] = {action: [] for action in actions}
        lists = [(out[action], decided, action) for action, decided in tables]
        for _, spec in nodes:
            key: Any = (_NONE if spec is None else spec.site if not labels
                        else (spec.site, *map(spec.labels.get, labels)))
            for into, decided, action in lists:
                found = decided.get(key)
                if found is None:
                    found = self._of(decided, key, roles, identity, action, spec)
                into.append(found)
        return out

    def _of(self, decided: dict[Any, Decision], key: Any, roles: tuple[_Compiled, ...],
            identity: Identity, action: Action, spec: NodeSpec | None) -> Decision:
        found = decided.get(key)
        if found is None:
            found = decided[key] = decide_roles(roles, identity, action, spec, self.source)
        return found

    def decide_one(self, identity: Identity, action: Action, spec: NodeSpec | None) -> Decision:
        """One node's decision (as :meth:`decide`)."""
        roles, scoped = self.held(identity)
        if not scoped:
            spec = None
        return decide_roles(roles, identity, action, spec, self.source)


_ANY = ("any node",)
"""The decision key of an identity with no scoped role: every node alike."""
_NONE = ("no node spec",)
"""The decision key of a node the deployment does not define (a scoped role covers none)."""


def _local(config: LocalPolicyConfig, context: PolicyContext) -> LocalPolicy:
    return LocalPolicy(config.roles, str(config.path))


LOCAL: PolicyType[LocalPolicyConfig] = PolicyType(
    "local", LocalPolicyConfig, _local,
    description="a roles file: roles (tier, allow, deny, scope) and bindings; deny wins",
)
"""The built-in ``local`` policy type."""
