"""Lifecycle port types and secret kinds come from plugins, through hooks, like channel types.

A test plugin (registered with ``Registry.add_module``, as an entry point would be) adds a
cluster, a storage and a store type and a secret kind; ``lifecycle.<port>.type`` selects
them, their configs are validated with path-named problems, duplicates are plugin failures,
an unknown type is exit 2, and a secret resolves at use only and is never shown.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from lifecycle_support import ceremony, make_config
from pydantic import BaseModel, ConfigDict, Field

from powerplane import ConfigError, PowerHost, SecretError, SecretKind, SecretRef, hookimpl
from powerplane.config import parse_config
from powerplane.lifecycle import (
    ClusterPort,
    ClusterType,
    DrainProgress,
    Lifecycle,
    MaintenanceStore,
    PortContext,
    StorageType,
    StoreContext,
    StoreType,
    lifecycle_config,
)
from powerplane.lifecycle.ports import build_ports, open_store
from powerplane.lifecycle.storage import NoStorage, StoragePort
from powerplane.lifecycle.store import Store
from powerplane.plugins import Registry, load_plugins, registry
from powerplane.secrets import SECRET_KINDS
from powerplane.settings.lifecycle import SimulatedClusterConfig, SqliteStoreConfig

POWERPLANE = [sys.executable, "-m", "powerplane.cli"]
SECRET = "s3cr3t-VALUE-never-shown"


class AcmeClusterConfig(BaseModel):
    """An example cluster type's keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["acme"]
    depth: int = Field(1, ge=1)
    """How deep."""


class AcmeCluster:
    """A cluster port that remembers the context it was built with."""

    applicable = True

    def __init__(self, config: AcmeClusterConfig, context: PortContext) -> None:
        self.config = config
        self.context = context
        self.cordoned: set[str] = set()

    async def labels(self) -> Mapping[str, Mapping[str, str]]:
        return self.context.labels

    async def is_ready(self, node: str) -> bool | None:
        return await self.context.power_of(node) == "on"

    async def boot_id(self, node: str) -> str | None:
        return None

    async def cordon(self, node: str) -> None:
        self.cordoned.add(node)

    async def uncordon(self, node: str) -> None:
        self.cordoned.discard(node)

    async def is_cordoned(self, node: str) -> bool:
        return node in self.cordoned

    async def pods_on(self, node: str) -> list[str]:
        return []

    async def pdbs_for(self, pods: list[str]) -> list[str]:
        return []

    async def drain(self, node: str) -> DrainProgress:
        return DrainProgress()


class AcmeStorageConfig(BaseModel):
    type: Literal["acme-storage"]


class AcmeStoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["acme-store"]
    file: str


OPENED: list[StoreContext] = []


def _acme_store(config: AcmeStoreConfig, context: StoreContext) -> MaintenanceStore:
    OPENED.append(context)
    assert context.config_dir is not None
    return Store(context.config_dir / config.file, context.lifecycle.busy_timeout_s)


def _acme_storage(config: AcmeStorageConfig, context: PortContext) -> StoragePort:
    return NoStorage()


def _acme_cluster(config: AcmeClusterConfig, context: PortContext) -> ClusterPort:
    return AcmeCluster(config, context)


class AcmePlugin:
    """One of each: what a distribution like powerplane-kubernetes registers."""

    @hookimpl
    def register_cluster_types(self, register: Callable[[ClusterType[Any]], None]) -> None:
        register(ClusterType("acme", AcmeClusterConfig, _acme_cluster, description="test"))

    @hookimpl
    def register_storage_types(self, register: Callable[[StorageType[Any]], None]) -> None:
        register(StorageType("acme-storage", AcmeStorageConfig, _acme_storage))

    @hookimpl
    def register_store_types(self, register: Callable[[StoreType[Any]], None]) -> None:
        register(StoreType("acme-store", AcmeStoreConfig, _acme_store))


def _core_only() -> Registry:
    """Core's built-ins alone (powerplane-kubernetes may be installed beside this checkout)."""
    reg = Registry()
    reg.add_builtins()
    return reg


@pytest.fixture
def reg() -> Registry:
    loaded = load_plugins()
    loaded.add_module("acme", AcmePlugin(), "acme-dist", "1.0")
    assert not [f for f in loaded.failures if f.name == "acme"], loaded.failures
    return loaded


def test_core_registers_its_ports_and_kinds_through_the_hooks() -> None:
    loaded = load_plugins()
    (core,) = loaded.builtins
    assert core.distribution == "powerplane"
    assert (core.cluster_types, core.storage_types, core.store_types, core.secret_kinds) == (
        ("simulated", "none"), ("none", "simulated"), ("sqlite",), ("env", "file"))
    assert loaded.port_owners[("cluster", "simulated")] == "powerplane"
    assert all(p.name != "powerplane" for p in loaded.plugins)  # `powerplane plugins` unchanged


def test_a_plugin_cluster_type_is_selected_and_built_with_its_context(
    reg: Registry, tmp_path: Path
) -> None:
    raw = make_config(tmp_path, cluster={"type": "acme", "depth": 3},
                      storage={"type": "acme-storage"})
    source = str(tmp_path / "powerplane.yaml")
    cfg = lifecycle_config(raw["lifecycle"], source, registry=reg)
    assert cfg.cluster == AcmeClusterConfig(type="acme", depth=3)

    async def check() -> None:
        # the whole file is validated at load: its lifecycle types are the test registry's
        async with PowerHost(parse_config(raw, source=source, registry=reg)) as host:
            ports = build_ports(host, cfg, registry=reg)
            assert isinstance(ports.cluster, AcmeCluster)
            assert isinstance(ports.storage, NoStorage)
            ctx = ports.cluster.context
            assert ctx.host is host and ctx.lifecycle is cfg
            assert ctx.config_dir == tmp_path.resolve()
            assert "node-role.kubernetes.io/control-plane" in ctx.labels["cp1"]
            assert await ctx.power_of("w1") == "on"  # the ordinary readback

    import asyncio

    asyncio.run(check())


def test_a_plugin_port_config_is_validated_with_path_named_problems(reg: Registry) -> None:
    lines = {("lifecycle", "cluster"): 7, ("lifecycle", "cluster", "depth"): 8}
    with pytest.raises(ConfigError) as err:
        lifecycle_config({"cluster": {"type": "acme", "depth": 0, "dpth": 2},
                          "store": {"type": "acme-store"}}, registry=reg, lines=lines)
    problems = {p.path: p for p in err.value.problems}
    assert set(problems) == {"lifecycle.cluster.depth", "lifecycle.cluster.dpth",
                             "lifecycle.store.file"}
    assert problems["lifecycle.cluster.depth"].line == 8
    assert problems["lifecycle.cluster.dpth"].line == 7
    assert "did you mean 'depth'" in problems["lifecycle.cluster.dpth"].message
    assert problems["lifecycle.store.file"].message == "required key is missing"


def test_core_ports_keep_their_keys_and_the_plain_store_path_is_sqlite() -> None:
    cfg = lifecycle_config({"store": "db/x.db", "cluster": {"type": "simulated", "pods":
                                                           {"w1": ["a"]}}})
    assert cfg.store == SqliteStoreConfig(type="sqlite", path="db/x.db")
    assert isinstance(cfg.cluster, SimulatedClusterConfig) and cfg.cluster.pods == {"w1": ["a"]}
    assert lifecycle_config({"store": {"type": "sqlite", "path": "db/x.db"}}).store == cfg.store
    with pytest.raises(ConfigError) as err:
        lifecycle_config({"cluster": {"type": "simulated", "eviction_ticks": -1}, "store": 3,
                          "storage": {"preset": "longhorn"}}, registry=_core_only())
    assert {p.path: p.message for p in err.value.problems} == {
        "lifecycle.cluster.eviction_ticks": "Input should be greater than or equal to 0",
        "lifecycle.store": "expected a path or a mapping with a type",
        "lifecycle.storage.type": "required key is missing: the storage type "
                                  "(one of: none, simulated)",
    }


@pytest.mark.parametrize(("port", "name"), [("cluster", "kubernetes"),
                                            ("storage", "longhorn"), ("store", "kubernetes")])
def test_a_known_type_not_installed_names_its_distribution(port: str, name: str) -> None:
    with pytest.raises(ConfigError) as err:
        lifecycle_config({port: {"type": name}}, registry=_core_only())
    (problem,) = err.value.problems
    assert problem.path == f"lifecycle.{port}.type"
    assert f"unknown {port} type {name!r}; registered types: " in problem.message
    assert "install powerplane-kubernetes" in problem.message


async def test_the_store_is_opened_through_its_registered_type(
    reg: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = make_config(tmp_path, lifecycle={"store": {"type": "acme-store", "file": "m.db"}})
    source = str(tmp_path / "powerplane.yaml")
    monkeypatch.setattr("powerplane.plugins._registry", reg)  # the process-wide registry
    OPENED.clear()
    async with PowerHost(parse_config(raw, source=source)) as host:
        lc = Lifecycle.for_host(host)
        try:
            m = await lc.request("w1", "cordon", ceremony("w1"))
        finally:
            lc.close()
    assert [c.create for c in OPENED] == [True]
    again = Store(tmp_path / "m.db")
    try:
        assert again.get(m.name).spec.node == "w1"
        assert [r.node for r in again.audit()] == ["w1"]
    finally:
        again.close()
    dry = open_store(lifecycle_config(raw["lifecycle"], source, registry=reg), source,
                     create=False, registry=reg)
    dry.close()
    assert OPENED[-1].create is False


class _Dup:
    """A plugin implementing one hook (by name) that registers ``item()`` (twice)."""

    def __init__(self, hook: str, item: Callable[[], Any], twice: bool = False) -> None:
        def impl(register: Callable[[Any], None]) -> None:
            register(item())
            if twice:
                register(item())

        setattr(self, hook, hookimpl(impl))


def _secret() -> SecretKind:
    return SecretKind("env", lambda v: v)


def _never(config: Any, context: Any) -> Any:
    raise AssertionError("a factory of a plugin that failed to load is never called")


@pytest.mark.parametrize(("hook", "item", "message"), [
    ("register_cluster_types",
     lambda: ClusterType("simulated", SimulatedClusterConfig, _never),
     "cluster type 'simulated' is already registered by plugin 'powerplane'"),
    ("register_storage_types", lambda: StorageType("none", _NoneStorage, _never),
     "storage type 'none' is already registered by plugin 'powerplane'"),
    ("register_store_types", lambda: StoreType("sqlite", SqliteStoreConfig, _never),
     "store type 'sqlite' is already registered by plugin 'powerplane'"),
    ("register_secret_kinds", _secret,
     "secret kind 'env' is already registered by plugin 'powerplane'"),
    ("register_cluster_types", lambda: StorageType("acme-storage", AcmeStorageConfig,
                                                   _acme_storage),
     "TypeError: register_cluster_types takes a ClusterType, not StorageType"),
])
def test_a_name_taken_or_a_wrong_object_is_a_failure_of_the_later_plugin(
    hook: str, item: Callable[[], Any], message: str
) -> None:
    loaded = load_plugins()
    before = (dict(loaded.cluster_types), dict(loaded.storage_types),
              dict(loaded.store_types), dict(loaded.secret_kinds))
    loaded.add_module("dup", _Dup(hook, item))
    assert {f.name: f.error for f in loaded.failures}["dup"] == message
    assert (loaded.cluster_types, loaded.storage_types, loaded.store_types,
            loaded.secret_kinds) == before
    assert loaded.manager.get_plugin("dup") is None


def test_a_plugin_registering_one_name_twice_fails_and_the_others_load() -> None:
    loaded = load_plugins()
    loaded.add_module("twice", _Dup("register_cluster_types", lambda: ClusterType(
        "acme", AcmeClusterConfig, _acme_cluster), twice=True))
    loaded.add_module("acme", AcmePlugin())
    errors = {f.name: f.error for f in loaded.failures}
    assert errors["twice"] == "registers cluster type 'acme' more than once"
    assert loaded.port_owners[("cluster", "acme")] == "acme"
    loaded.remove("acme")
    assert "acme" not in loaded.cluster_types and "acme-store" not in loaded.store_types


class _NoneStorage(BaseModel):
    type: Literal["none"]


def test_a_port_type_must_declare_its_type_literal() -> None:
    class Untyped(BaseModel):
        depth: int = 1

    with pytest.raises(TypeError, match="must declare type: Literal"):
        ClusterType("acme", Untyped, _acme_cluster)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must declare type: Literal"):
        ClusterType("other", AcmeClusterConfig, _acme_cluster)


def _cli_config(tmp_path: Path, **lifecycle: Any) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(make_config(tmp_path, lifecycle=lifecycle)), encoding="utf-8")
    return path


@pytest.mark.parametrize(("key", "value"), [("storage", {"type": "longhorn"}),
                                            ("cluster", {"type": "kubernetes"}),
                                            ("store", {"type": "kubernetes"})])
def test_an_unregistered_type_is_exit_2_through_the_cli(
    tmp_path: Path, key: str, value: dict[str, str]
) -> None:
    config = _cli_config(tmp_path, **{key: value})
    # only core's simulated channel (powerplane-kubernetes may be installed beside this checkout)
    env = {**os.environ, "POWERPLANE_LOAD_PLUGINS": "simulated"}
    res = subprocess.run([*POWERPLANE, "maintenance", "list", "--config", str(config)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert f"lifecycle.{key}.type" in out
    assert "install powerplane-kubernetes" in out and "registered types:" in out
    assert "Traceback" not in out
    assert not (tmp_path / "lifecycle.db").exists()


# --- secret kinds ------------------------------------------------------------------------------

class VaultPlugin:
    """A secret kind whose resolver counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def resolve(self, value: str) -> str:
        self.calls.append(value)
        if value.startswith("broken"):
            raise RuntimeError(f"backend said: {SECRET}")  # a message that quotes a secret
        return SECRET

    def check(self, value: str) -> None:
        if value.count("/") != 1:
            raise ValueError("expected MOUNT/PATH")

    @hookimpl
    def register_secret_kinds(self, register: Callable[[SecretKind], None]) -> None:
        register(SecretKind("vault", self.resolve, self.check, "MOUNT/PATH"))


@pytest.fixture
def vault() -> Iterator[VaultPlugin]:
    plugin = VaultPlugin()
    reg = registry()
    reg.add_module("vault", plugin)
    assert "vault" in reg.secret_kinds
    yield plugin
    reg.remove("vault")
    assert "vault" not in reg.secret_kinds


def _channel(password: Any) -> dict[str, Any]:
    return {"channels": {"lab": {"type": "simulated", "machines": {"m": "on"},
                                 "password": password}}}


def test_a_registered_secret_kind_resolves_at_use_and_stays_out_of_every_form(
    vault: VaultPlugin,
) -> None:
    dep = parse_config(_channel({"vault": "kv/ipmi"}))
    ref = dep.channels["lab"].config.password  # type: ignore[attr-defined]
    assert isinstance(ref, SecretRef)
    assert vault.calls == []  # loading resolved nothing
    for shown in (repr(ref), str(ref), str(ref.model_dump()), ref.model_dump_json(),
                  repr(dep.channels["lab"].config)):
        assert SECRET not in shown
    assert str(ref) == "{vault: kv/ipmi}"
    assert ref.reveal() == SECRET and vault.calls == ["kv/ipmi"]
    with pytest.raises(SecretError) as err:  # its resolver's message quotes the secret
        SecretRef.model_validate({"vault": "broken/x"},
                                 context={SECRET_KINDS: registry()}).reveal()
    assert SECRET not in str(err.value) and err.value.__cause__ is None
    assert str(err.value).endswith("secret {vault: broken/x}: RuntimeError while resolving")


def test_a_secret_kind_checks_its_reference_at_load_naming_the_path(
    vault: VaultPlugin,
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_channel({"vault": "no-slash"}))
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("channels.lab.password", "expected MOUNT/PATH")]
    assert vault.calls == []


def test_an_unknown_secret_kind_is_a_config_error_naming_the_path() -> None:
    import powerplane.sim.channel

    # only core's kinds, as where powerplane-kubernetes is not installed: a registry of
    # core's built-ins and its simulated channel, passed in
    only_core = Registry()
    only_core.add_builtins()
    only_core.add_module("simulated", powerplane.sim.channel)
    with pytest.raises(ConfigError) as err:
        parse_config(_channel({"k8s": "ns/name/key"}), registry=only_core)
    (problem,) = err.value.problems
    assert problem.path == "channels.lab.password"
    assert problem.message == (
        "unknown secret reference kind 'k8s'; known kinds: env, file; 'k8s' is provided by "
        "powerplane-kubernetes: install powerplane-kubernetes")
    with pytest.raises(ConfigError) as two:
        parse_config(_channel({"env": "A", "file": "/b"}), registry=only_core)
    assert two.value.problems[0].message == (
        "expected exactly one secret reference kind (env, file given)")


def test_env_and_file_stay_in_core_when_no_plugin_loads(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    code = (
        "import os, sys\n"
        "from powerplane.secrets import SecretRef\n"
        "from powerplane.plugins import registry\n"
        f"ref = SecretRef.model_validate({{'file': {str(secret)!r}}})\n"
        "print(ref.reveal() == os.environ['EXPECT'], sorted(registry().secret_kinds))\n"
    )
    env = {"POWERPLANE_LOAD_PLUGINS": "", "EXPECT": SECRET, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout
    assert out.split() == ["True", "['env',", "'file']"]
