"""A config error a channel raises when it opens stays a config error: bad input, exit 2.

A channel type whose factory checks its secret when the channel opens (as the Talos channel
checks its inline PEMs) raises :class:`~powerplane.ConfigError` at
``channels.<name>.<field>``. The host keeps that error as it was raised: discovery records
it, ``invoke`` and ``read_power_state`` raise it, the lifecycle refuses a request with it,
and the CLI's ``state``, ``offers`` and ``invoke`` exit 2 naming the path, without a
traceback or the secret's value. Any other failure to create a channel stays a channel
failure (exit 1). The CLI runs in a fresh interpreter that finds the channel type through
a ``powerplane`` entry point, as any installed plugin is found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import BaseModel

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelError,
    ChannelType,
    ConfigError,
    ConfigProblem,
    PowerHost,
    PowerState,
    Reading,
    SecretRef,
    Verb,
    hookimpl,
    parse_config,
)
from powerplane.plugins import Registry, load_plugins

NOT_A_PEM = "hunter2-not-a-pem"
"""What the secret holds: never in any output."""

TIMEOUT = 60
"""An explicit bound on each CLI run (never a timing threshold)."""

PLUGIN = '''\
    """A channel type that checks its secret when it opens (a test plugin)."""

    from pydantic import BaseModel

    from powerplane import (
        Acceptance, CapabilitySet, ChannelType, ConfigError, ConfigProblem, Reading,
        SecretRef, Verb, hookimpl,
    )


    class Config(BaseModel):
        key: SecretRef


    class Channel:
        def __init__(self, name: str, config: Config) -> None:
            if not config.key.reveal().startswith("-----BEGIN"):
                raise ConfigError([ConfigProblem(
                    f"channels.{name}.key", f"the secret {config.key} holds no PEM")])

        async def capabilities(self, target: str) -> CapabilitySet:
            return CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON])

        async def reboot(self, target: str) -> Acceptance:
            return Acceptance()

        shutdown = power_on = reboot

        async def read_power_state(self, target: str) -> Reading:
            return Reading.on()

        async def close(self) -> None:
            pass


    @hookimpl
    def register_channel_types(register):
        register(ChannelType("pem-at-open", Config, Channel))
'''


# -- the host ----------------------------------------------------------------------------------
class _Config(BaseModel):
    key: SecretRef | None = None
    readback: str = "on"


class PemAtOpen:
    """The in-process twin of the plugin above; ``opened`` counts the channels it made."""

    read: ClassVar[list[str]] = []

    def __init__(self, name: str, config: _Config) -> None:
        if config.key is not None and not config.key.reveal().startswith("-----BEGIN"):
            raise ConfigError([ConfigProblem(f"channels.{name}.key",
                                             f"the secret {config.key} holds no PEM")])
        self.name = name
        self.config = config

    async def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON])

    async def reboot(self, target: str) -> Acceptance:
        return Acceptance()

    shutdown = power_on = reboot

    async def read_power_state(self, target: str) -> Reading:
        PemAtOpen.read.append(self.name)
        if self.config.readback == "none":
            return Reading.unknown("this channel cannot see power state")
        return Reading.on()

    async def close(self) -> None:
        pass


class Buggy(PemAtOpen):
    def __init__(self, name: str, config: _Config) -> None:
        raise RuntimeError("a plugin bug")


@pytest.fixture
def reg(monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("pem-at-open", _Config, PemAtOpen))
            register(ChannelType("buggy", _Config, Buggy))

    monkeypatch.setenv("PP_TEST_OPEN_KEY", NOT_A_PEM)
    registry = load_plugins()
    registry.add_module("config-error-at-open-test", Plugin())
    PemAtOpen.read.clear()
    yield registry
    PemAtOpen.read.clear()


def _deployment(reg: Registry, **extra: Any) -> Any:
    cfg: dict[str, Any] = {
        "channels": {
            "t": {"type": "pem-at-open", "key": {"env": "PP_TEST_OPEN_KEY"}},
            "good": {"type": "pem-at-open"},
            "blind": {"type": "pem-at-open", "readback": "none"},
            "bug": {"type": "buggy"},
        },
        "nodes": {
            "n1": {"channels": [{"channel": "t", "target": "m1"}]},
            "n2": {"channels": [{"channel": "good", "target": "m2"}]},
            "both": {"channels": [{"channel": "good", "target": "m3"},
                                  {"channel": "t", "target": "m3"}]},
            "blind-then-bad": {"channels": [{"channel": "blind", "target": "m4"},
                                            {"channel": "t", "target": "m4"}]},
            "nb": {"channels": [{"channel": "bug", "target": "m5"}]},
        },
        **extra,
    }
    return parse_config(cfg, registry=reg)


def _is_the_open_error(err: object) -> bool:
    return (isinstance(err, ConfigError) and not isinstance(err, ChannelError)
            and err.exit_code == 2 and "channels.t.key: " in str(err)
            and "{env: PP_TEST_OPEN_KEY}" in str(err) and NOT_A_PEM not in str(err))


async def test_discovery_keeps_the_config_error_and_invoke_raises_it(reg: Registry) -> None:
    async with PowerHost(_deployment(reg), nodes=["n1"]) as host:
        assert _is_the_open_error(host.discovery_error("n1"))
        assert host.offer_for("n1")[Verb.REBOOT].cause == "channel"
        with pytest.raises(ConfigError) as info:
            await host.invoke("n1", Verb.REBOOT, reason="kernel")
        assert _is_the_open_error(info.value)
        plan = (await host.plan(["n1"], Verb.REBOOT, "kernel"))["n1"]
        assert _is_the_open_error(plan)


async def test_a_state_read_raises_the_config_error(reg: Registry) -> None:
    async with PowerHost(_deployment(reg), nodes=()) as host:
        with pytest.raises(ConfigError) as info:
            await host.read_power_state("n1")
        assert _is_the_open_error(info.value)
        # every channel answers first: the good channel of the node was read, none left running
        with pytest.raises(ConfigError):
            await host.read_power_state("both", every_channel=True)
        assert PemAtOpen.read == ["good"]
        # many nodes: every node read, then the config error raised
        seen: list[str] = []
        with pytest.raises(ConfigError) as info:
            await host.read_many(["n2", "n1"], progress=lambda node, _: seen.append(node))
        assert _is_the_open_error(info.value) and seen == ["n2"]
        # raised again and again: the one kept error carries no pile of tracebacks
        for _ in range(3):
            with pytest.raises(ConfigError) as info:
                await host.read_power_state("n1")
        depth, tb = 0, info.value.__traceback__
        while tb is not None:
            depth, tb = depth + 1, tb.tb_next
        assert depth < 20, depth


async def test_after_a_sent_verb_the_readback_does_not_raise_it(reg: Registry) -> None:
    """The verb went out on the blind channel: a config error of the node's other channel
    is that channel's unknown reading while waiting, never the call's error."""
    async with PowerHost(_deployment(reg), nodes=()) as host:
        result = await host.invoke("blind-then-bad", Verb.REBOOT, reason="kernel", wait=0.3)
    assert result.accepted and result.channel == "blind"
    assert result.readback is PowerState.UNKNOWN


async def test_any_other_failure_to_create_a_channel_is_a_channel_failure(reg: Registry) -> None:
    async with PowerHost(_deployment(reg), nodes=["nb"]) as host:
        err = host.discovery_error("nb")
        assert type(err) is ChannelError and err.exit_code == 1
        assert "channel could not be created: RuntimeError" in str(err)
        reading = await host.read_power_state("nb")
        assert reading.state is PowerState.UNKNOWN
        assert reading.readings[0].error == "ChannelError"


async def test_a_maintenance_request_is_refused_as_bad_input(
    reg: Registry, tmp_path: Path
) -> None:
    from powerplane.lifecycle import Ceremony
    from powerplane.lifecycle.service import Lifecycle

    deployment = _deployment(reg, lifecycle={"store": str(tmp_path / "pp.db"),
                                             "cluster": {"type": "none"},
                                             "no_control_plane": True})
    async with PowerHost(deployment, nodes=()) as host:
        lc = Lifecycle.for_host(host)
        try:
            ceremony = Ceremony(reason="kernel 6.8", confirm_node="n1", ack_preflight=True)
            with pytest.raises(ConfigError) as info:
                await lc.request("n1", "reboot", ceremony)
            assert _is_the_open_error(info.value)
            doc, code = await lc.dry_run("n1", "reboot", ceremony)
            assert code == 2 and doc["refusal"]["error"] == "ConfigError"
            assert lc.store.all() == []
        finally:
            lc.close()


# -- the CLI, in a fresh interpreter -----------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin, installed as a distribution with a ``powerplane`` entry point."""
    where = tmp_path_factory.mktemp("site")
    (where / "pp_pem_at_open.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    info = where / "pp_pem_at_open-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pp-pem-at-open\n"
                                   "Version: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[powerplane]\npem-at-open = pp_pem_at_open\n",
                                           encoding="utf-8")
    return where


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump({
        "channels": {"t": {"type": "pem-at-open", "key": {"env": "PP_TEST_OPEN_KEY"}},
                     "lab": {"type": "simulated", "machines": {"m2": "on"}}},
        "nodes": {"n1": {"channels": [{"channel": "t", "target": "m1"}]},
                  "n2": {"channels": [{"channel": "lab", "target": "m2"}]}},
    }), encoding="utf-8")
    return path


def _cli(site: Path, config_file: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERPLANE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["PP_TEST_OPEN_KEY"] = NOT_A_PEM
    out = subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(config_file),
                          *args], capture_output=True, text=True, timeout=TIMEOUT, env=env,
                         check=False)
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text
    assert NOT_A_PEM not in text, text
    return out.returncode, out.stdout, out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("state", "n1"),
    ("offers",),
    ("offers", "n1"),
    ("invoke", "n1", "reboot", "--reason", "kernel", "--yes"),
], ids=["state", "offers", "offers-node", "invoke"])
def test_the_cli_exits_2_naming_the_field(
    site: Path, config_file: Path, args: tuple[str, ...]
) -> None:
    code, out, err = _cli(site, config_file, *args)
    assert code == 2, out + err
    assert "channels.t.key: the secret {env: PP_TEST_OPEN_KEY} holds no PEM" in out + err


@pytest.mark.slow
def test_the_cli_offers_json_names_the_config_error(site: Path, config_file: Path) -> None:
    code, out, err = _cli(site, config_file, "offers", "-o", "json")
    assert code == 2, out + err
    rows = {row["node"]: row for row in json.loads(out)["nodes"]}
    assert rows["n1"]["channels"][0]["error"] == "ConfigError"
    assert "channels.t.key" in rows["n1"]["channels"][0]["message"]
    assert rows["n2"]["verbs"]["reboot"]["offered"] is True


@pytest.mark.slow
def test_a_node_on_another_channel_is_read_as_ever(site: Path, config_file: Path) -> None:
    code, out, err = _cli(site, config_file, "state", "n2")
    assert code == 0, out + err
    assert out.strip() == "n2: on via lab"


@pytest.mark.slow
def test_the_offers_table_calls_it_a_config_error(site: Path, config_file: Path) -> None:
    code, out, err = _cli(site, config_file, "offers")
    assert code == 2, out + err
    assert "(config error)" in out, out
    assert "(channel failure)" not in out, out


def test_the_offers_table_calls_an_unreachable_channel_a_channel_failure(tmp_path: Path) -> None:
    config = tmp_path / "powerplane.yaml"
    config.write_text("channels:\n  lab:\n    type: simulated\n    machines: {m1: 'on'}\n"
                      "    faults: {'*': unreachable}\nnodes:\n"
                      "  n1:\n    channels: [{channel: lab, target: m1}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERPLANE_")}
    out = subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(config),
                          "offers"], capture_output=True, text=True, timeout=TIMEOUT, env=env,
                         check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "(channel failure)" in out.stdout, out.stdout
    assert "(config error)" not in out.stdout, out.stdout
