"""Core's ``register_deployment_checks`` hook: a plugin's check of the whole deployment,
run by ``powerplane check`` (``check_config``) and ``PowerHost.start``, never by loading.

A problem is a ``ConfigError`` (exit 2) naming its path (and line, under ``check``) and
refuses a host's start before any channel is created; a check that cannot ask fails
``check`` with its own error (exit 1) and is a warning at a host's start; a check's bug is
never taken as "checked"; names are unique, a hook that raises is a failure of its plugin.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from powerplane import (
    ChannelType,
    ConfigError,
    ConfigProblem,
    Deployment,
    DeploymentCheck,
    PowerHost,
    PowerplaneError,
    Unreachable,
    hookimpl,
    load_config,
)
from powerplane.config import check_config
from powerplane.plugins import Registry, load_plugins
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig


class _Config(SimulatedConfig):
    forbidden: bool = False


class Guarded:
    """A tiny plugin: a channel type counting its creations, and a check refusing every
    channel of that type whose ``forbidden`` key is set."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.created: list[str] = []
        self.asked: list[str] = []
        self.raises = raises

    def _factory(self, name: str, config: _Config) -> SimulatedChannel:
        self.created.append(name)
        return SimulatedChannel(name, config)

    async def _check(self, deployment: Deployment) -> list[ConfigProblem]:
        self.asked.append(deployment.source)
        if self.raises is not None:
            raise self.raises
        return [ConfigProblem(f"channels.{name}.forbidden", f"channel {name} is forbidden here")
                for name, c in deployment.channels.items()
                if isinstance(c.config, _Config) and c.config.forbidden]

    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType(name="guarded", config=_Config, factory=self._factory))

    @hookimpl
    def register_deployment_checks(self, register: Callable[[DeploymentCheck], None]) -> None:
        register(DeploymentCheck(name="test.forbidden", check=self._check,
                                 description="no forbidden channel"))


class SameName:
    @hookimpl
    def register_deployment_checks(self, register: Callable[[DeploymentCheck], None]) -> None:
        register(DeploymentCheck(name="test.forbidden", check=_nothing))


class NotACheck:
    @hookimpl
    def register_deployment_checks(self, register: Callable[[Any], None]) -> None:
        register("test.not-a-check")


async def _nothing(deployment: Deployment) -> list[ConfigProblem]:
    return []


def _registry(*plugins: tuple[str, object]) -> Registry:
    os.environ["POWERPLANE_LOAD_PLUGINS"] = "simulated"
    try:
        reg = load_plugins()
    finally:
        del os.environ["POWERPLANE_LOAD_PLUGINS"]
    for name, plugin in plugins:
        reg.add_module(name, plugin, distribution="test-plugin")
    return reg


def _file(tmp_path: Path, *, forbidden: bool) -> Path:
    path = tmp_path / "pp.yaml"
    path.write_text(yaml.safe_dump({
        "channels": {"g": {"type": "guarded", "machines": {"m0": "off"},
                           "forbidden": forbidden}},
        "nodes": {"n0": {"channels": [{"channel": "g", "target": "m0"}]}},
    }, sort_keys=False))
    return path


def test_the_registry_collects_each_check_by_name() -> None:
    plugin = Guarded()
    reg = _registry(("guarded", plugin))
    assert list(reg.deployment_checks) == ["test.forbidden"]
    assert reg.check_owners == {"test.forbidden": "guarded"}
    assert reg.deployment_checks["test.forbidden"].description == "no forbidden channel"
    reg.remove("guarded")
    assert reg.deployment_checks == {}


def test_a_name_taken_first_keeps_its_check_and_a_bad_registration_fails_its_plugin() -> None:
    reg = _registry(("guarded", Guarded()), ("same", SameName()), ("bad", NotACheck()))
    assert reg.check_owners == {"test.forbidden": "guarded"}
    errors = {f.name: f.error for f in reg.failures}
    assert errors["same"] == ("deployment check 'test.forbidden' is already registered by "
                              "plugin 'guarded'")
    assert errors["bad"] == "TypeError: register_deployment_checks takes a DeploymentCheck, not str"


def test_loading_runs_no_check(tmp_path: Path) -> None:
    plugin = Guarded()
    reg = _registry(("guarded", plugin))
    load_config(_file(tmp_path, forbidden=True), registry=reg)
    assert plugin.asked == []


def test_check_config_is_exit_2_naming_the_path_and_line(tmp_path: Path) -> None:
    plugin = Guarded()
    reg = _registry(("guarded", plugin))
    path = _file(tmp_path, forbidden=True)
    with pytest.raises(ConfigError) as raised:
        check_config(path, registry=reg)
    assert raised.value.exit_code == 2
    (problem,) = raised.value.problems
    assert (problem.path, problem.message) == ("channels.g.forbidden",
                                               "channel g is forbidden here")
    assert problem.line == 6
    assert plugin.asked == [str(path)]
    assert check_config(_file(tmp_path, forbidden=False), registry=reg).channels


async def test_a_host_refuses_to_start_before_any_channel_is_created(tmp_path: Path) -> None:
    plugin = Guarded()
    reg = _registry(("guarded", plugin))
    path = _file(tmp_path, forbidden=True)
    for nodes in (None, ["n0"]):
        host = PowerHost.from_config(path, registry=reg, nodes=nodes)
        with pytest.raises(ConfigError, match=r"channels\.g\.forbidden: channel g is forbidden"):
            async with host:
                pytest.fail("started")
    assert plugin.created == []
    async with PowerHost.from_config(_file(tmp_path, forbidden=False), registry=reg) as host:
        assert (await host.read_power_state("n0")).state.value == "off"
    assert plugin.created == ["g"]


def test_a_check_that_cannot_ask_fails_check_and_warns_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    plugin = Guarded(raises=Unreachable("listing things: connection refused", channel="api"))
    reg = _registry(("guarded", plugin))
    path = _file(tmp_path, forbidden=True)
    with pytest.raises(Unreachable) as raised:
        check_config(path, registry=reg)
    assert raised.value.exit_code == 1 and not isinstance(raised.value, ConfigError)

    async def start() -> None:
        async with PowerHost.from_config(path, registry=reg) as host:
            assert host.channel("g") is not None

    with caplog.at_level(logging.WARNING, logger="powerplane.host"):
        asyncio.run(start())
    (record,) = [r for r in caplog.records if r.name == "powerplane.host"]
    assert "the deployment checks could not run" in record.getMessage()
    assert "listing things: connection refused" in record.getMessage()
    assert f"{path} not checked" in record.getMessage()


def test_a_check_that_breaks_is_never_checked(tmp_path: Path) -> None:
    reg = _registry(("guarded", Guarded(raises=RuntimeError("bug"))))
    with pytest.raises(PowerplaneError) as raised:
        check_config(_file(tmp_path, forbidden=False), registry=reg)
    assert str(raised.value) == "deployment check 'test.forbidden' failed: RuntimeError: bug"
    assert raised.value.exit_code == 1
