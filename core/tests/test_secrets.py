"""Secret reference kinds come from the registry a config is validated with.

``parse_config(data, registry=r)`` checks every ``SecretRef`` of a channel's config and of
a lifecycle port's config against ``r`` (in the validation context, as the target parsers
are), never against the process-wide registry; a reference validated with no registry
(built by hand, outside a config load) knows core's kinds only, and a plugin's kind then
says how to validate it (within a deployment, or with the registry in the context).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

import powerplane.plugins
import powerplane.sim.channel
from powerplane import ConfigError, SecretKind, SecretRef, hookimpl
from powerplane.config import parse_config
from powerplane.lifecycle import ClusterType, PortContext
from powerplane.lifecycle.cluster import ClusterPort, NoCluster
from powerplane.plugins import Registry
from powerplane.secrets import SECRET_KINDS

SECRET = "from-the-test-registry"


class VaultedClusterConfig(BaseModel):
    """A cluster type whose config holds a secret reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["vaulted"]
    token: SecretRef


def _vaulted(config: VaultedClusterConfig, context: PortContext) -> ClusterPort:
    return NoCluster(context.labels, context.power_of)


class OwnKind:
    """A plugin registering the ``testvault`` kind and a cluster type that uses secrets."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, value: str) -> None:
        self.checked.append(value)

    @hookimpl
    def register_secret_kinds(self, register: Callable[[SecretKind], None]) -> None:
        register(SecretKind("testvault", lambda value: SECRET, self.check, "PATH"))

    @hookimpl
    def register_cluster_types(self, register: Callable[[ClusterType[Any]], None]) -> None:
        register(ClusterType("vaulted", VaultedClusterConfig, _vaulted))


def _registry(*plugins: tuple[str, object]) -> Registry:
    """Core's built-ins and its simulated channel, plus ``plugins``: a registry of a test."""
    reg = Registry()
    reg.add_builtins()
    reg.add_module("simulated", powerplane.sim.channel)
    for name, plugin in plugins:
        reg.add_module(name, plugin)
    assert not reg.failures
    return reg


@pytest.fixture
def no_process_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The process-wide registry, made to fail the test if anything asks it."""
    asked: list[str] = []

    def registry(reload: bool = False) -> Registry:
        asked.append("registry()")
        raise AssertionError("the process-wide registry was consulted")

    monkeypatch.setattr(powerplane.plugins, "registry", registry)
    yield asked
    assert asked == []


def _config(password: Any, lifecycle: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "machines": {"m": "on"},
                             "password": password}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m"}]}},
    }
    if lifecycle is not None:
        data["lifecycle"] = lifecycle
    return data


def test_a_kind_of_the_given_registry_validates_without_the_process_registry(
    no_process_registry: list[str],
) -> None:
    plugin = OwnKind()
    reg = _registry(("own", plugin))
    dep = parse_config(_config({"testvault": "kv/bmc"}), registry=reg)
    ref = dep.channels["lab"].config.password  # type: ignore[attr-defined]
    assert isinstance(ref, SecretRef)
    assert (ref.kind, ref.ref) == ("testvault", "kv/bmc")
    assert plugin.checked == ["kv/bmc"]  # its own check ran at load
    assert ref.reveal() == SECRET  # and its resolver at use


def test_a_port_config_secret_is_checked_against_the_given_registry(
    no_process_registry: list[str],
) -> None:
    plugin = OwnKind()
    reg = _registry(("own", plugin))
    lifecycle = {"cluster": {"type": "vaulted", "token": {"testvault": "kv/cluster"}}}
    dep = parse_config(_config({"env": "BMC_PASSWORD"}, lifecycle), registry=reg)
    assert dep.lifecycle["cluster"]["type"] == "vaulted"
    assert plugin.checked == ["kv/cluster"]


def test_the_process_registry_kinds_are_not_consulted(
    no_process_registry: list[str],
) -> None:
    """A kind the given registry lacks is unknown, whatever the process-wide one has:
    the known kinds listed are the given registry's."""
    reg = _registry(("own", OwnKind()))
    with pytest.raises(ConfigError) as err:
        parse_config(_config({"elsewhere": "x"}), registry=reg)
    (problem,) = err.value.problems
    assert problem.path == "channels.lab.password"
    assert problem.message == ("unknown secret reference kind 'elsewhere'; known kinds: "
                               "env, file, testvault")
    bare = _registry()
    with pytest.raises(ConfigError) as other:
        parse_config(_config({"testvault": "kv/bmc"}), registry=bare)
    assert other.value.problems[0].message == (
        "unknown secret reference kind 'testvault'; known kinds: env, file")


def test_a_validation_context_names_the_source() -> None:
    """What parse_config passes: any model's SecretRef fields take the registry from the
    context under SECRET_KINDS."""
    reg = _registry(("own", OwnKind()))
    ref = SecretRef.model_validate({"testvault": "kv/x"}, context={SECRET_KINDS: reg})
    assert ref.reveal() == SECRET
    with pytest.raises(ValueError, match="unknown secret reference kind 'testvault'"):
        SecretRef.model_validate({"testvault": "kv/x"}, context={SECRET_KINDS: _registry()})


def test_a_reference_built_by_hand_knows_cores_kinds_only() -> None:
    """Outside a config load (no registry in the validation context) no registry is asked,
    the process-wide one neither: core's kinds are known, a plugin's kind (even one the
    process-wide registry has) is refused with how to validate it instead."""
    assert SecretRef.model_validate({"env": "HOME"}).kind == "env"
    reg = powerplane.plugins.registry()
    reg.add_module("own-process", OwnKind())
    try:
        with pytest.raises(ValueError) as err:
            SecretRef.model_validate({"testvault": "kv/y"})
        said = str(err.value)
        assert "unknown secret reference kind 'testvault'; known kinds: env, file" in said
        assert "parse_config" in said and "powerplane.secrets.SECRET_KINDS" in said
        ref = SecretRef.model_validate({"testvault": "kv/y"}, context={SECRET_KINDS: reg})
        assert ref.reveal() == SECRET
    finally:
        reg.remove("own-process")
    with pytest.raises(ValueError, match="unknown secret reference kind 'testvault'"):
        SecretRef.model_validate({"testvault": "kv/y"})


def test_a_validated_reference_keeps_its_kind_in_a_model_built_from_it() -> None:
    """A reference validated with a registry keeps the kind it was validated with: a model
    holding it, validated again without a registry (a channel building a part of its
    config from the values), resolves it through that kind."""
    ref = SecretRef.model_validate({"testvault": "kv/z"},
                                   context={SECRET_KINDS: _registry(("own", OwnKind()))})

    class Holder(BaseModel):
        token: SecretRef

    held = Holder.model_validate({"token": ref})
    assert held.token.reveal() == SECRET
