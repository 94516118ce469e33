"""``register_policy_types``: a plugin's policy type is chosen by ``policy: {type: ...}``,
validated at load, built by its factory, and asked on every path; a name taken is a load
failure of the later plugin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from powerplane import PowerHost, hookimpl, parse_config
from powerplane.authority.actions import Action
from powerplane.authority.identity import Identity
from powerplane.authority.policy import Decision, PolicyContext
from powerplane.capabilities import Verb
from powerplane.errors import ConfigError, PolicyDenied
from powerplane.kinds import PolicyType
from powerplane.testing import plugin_registry


class OnlyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["only"]
    user: str


class Only:
    """Allows one user everything and nobody anything else."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.description = f"only {user}"
        self.asked: list[tuple[str, Action, int]] = []

    async def decide(self, identity: Identity, action: Action,
                     nodes: Sequence[tuple[str, Any]]) -> list[Decision]:
        self.asked.append((identity.user, action, len(nodes)))
        ok = identity.user == self.user
        return [Decision(ok, action, identity, f"only {self.user} may")] * len(nodes)


MADE: list[Only] = []


def make_only(config: OnlyConfig, context: PolicyContext) -> Only:
    MADE.append(Only(config.user))
    return MADE[-1]


class OnlyPlugin:
    @hookimpl
    def register_policy_types(self, register: Callable[[PolicyType[Any]], None]) -> None:
        register(PolicyType("only", OnlyConfig, make_only, description="one user may"))


class TakesLocal:
    @hookimpl
    def register_policy_types(self, register: Callable[[PolicyType[Any]], None]) -> None:
        register(PolicyType("local", OnlyConfig, make_only))


def deployment(policy: dict[str, Any], registry: Any, tmp_path: Path) -> Any:
    return parse_config({
        "channels": {"lab": {"type": "simulated", "machines": {"m1": "on"}}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m1"}]}},
        "policy": policy, "audit": {"path": str(tmp_path / "audit.jsonl")},
    }, registry=registry, source=str(tmp_path / "powerplane.yaml"))


async def test_a_plugin_policy_type_decides_every_direct_call(tmp_path: Path) -> None:
    reg = plugin_registry(only=["simulated"], add={"only": OnlyPlugin()})
    dep = deployment({"type": "only", "user": "olga"}, reg, tmp_path)
    async with PowerHost(dep) as host:
        with pytest.raises(PolicyDenied, match="only olga may"):
            await host.invoke("n1", Verb.REBOOT, reason="kernel", identity=Identity("ivan"))
        result = await host.invoke("n1", Verb.REBOOT, reason="kernel", identity=Identity("olga"))
    assert result.accepted
    assert [(u, a) for u, a, _ in MADE[-1].asked] == [("ivan", Action.REBOOT),
                                                      ("olga", Action.REBOOT)]


def test_a_plugin_policy_types_config_is_validated_at_load(tmp_path: Path) -> None:
    reg = plugin_registry(only=["simulated"], add={"only": OnlyPlugin()})
    with pytest.raises(ConfigError) as caught:
        deployment({"type": "only", "usr": "olga"}, reg, tmp_path)
    text = str(caught.value)
    assert "policy.usr" in text and "policy.user" in text


def test_a_policy_type_name_already_taken_fails_the_later_plugin() -> None:
    reg = plugin_registry(only=["simulated"], add={"takes-local": TakesLocal()})
    [failure] = [f for f in reg.failures if f.name == "takes-local"]
    assert "policy type 'local' is already registered by plugin 'powerplane'" in failure.error
    assert reg.policy_types["local"].description.startswith("a roles file")
