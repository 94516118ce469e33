"""Targeted, lazy discovery: a call about some nodes creates and discovers only what they use.

``PowerHost(..., nodes=[...])`` (and ``start(nodes)``) creates the channels and discovers the
(channel, target) pairs of those nodes only; every other pair is created and discovered on
first use, once, and the rule still sees every channel of the node it decides for. The CLI's
``state``, ``invoke`` and ``offers NODE`` start that way: a channel type no touched node uses
is never imported (checked in a fresh interpreter), and the lifecycle guard still reads the
other control-plane members it counts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner

from powerplane import (
    CapabilitySet,
    ChannelType,
    NotOffered,
    PowerHost,
    PowerState,
    UnknownNode,
    Verb,
    hookimpl,
    parse_config,
)
from powerplane.cli import cli
from powerplane.plugins import Registry, load_plugins
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig


class Counted(SimulatedChannel):
    """A simulated channel that records its creation and every capabilities call."""

    created: ClassVar[list[str]] = []
    discovered: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, name: str, config: SimulatedConfig) -> None:
        super().__init__(name, config)
        Counted.created.append(name)

    async def capabilities(self, target: str) -> CapabilitySet:
        Counted.discovered.append((self.name, target))
        await asyncio.sleep(0.01)  # long enough for concurrent callers to overlap
        return await super().capabilities(target)


class Blind(Counted):
    """Reads off, but declares that its readback cannot see power off."""

    def __init__(self, name: str, config: SimulatedConfig) -> None:
        super().__init__(name, config)
        self._caps = dataclasses.replace(self._caps, sees_power_off=False)


@pytest.fixture
def reg() -> Iterator[Registry]:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("counted", SimulatedConfig, Counted))
            register(ChannelType("blind", SimulatedConfig, Blind))

    registry = load_plugins()
    registry.add_module("targeted-discovery-test", Plugin())
    Counted.created.clear()
    Counted.discovered.clear()
    yield registry
    Counted.created.clear()
    Counted.discovered.clear()


def config() -> dict[str, Any]:
    """n0 uses a and b (b can only power on); n1 uses a; n2 uses c; n3 uses only d (off only)."""
    def ch(verbs: list[str], **machines: str) -> dict[str, Any]:
        return {"type": "counted", "verbs": verbs, "machines": machines}

    return {
        "channels": {
            "a": ch(["shutdown"], m0="on", m1="off"),
            "b": ch(["power-on"], m0="on"),
            "c": ch(["reboot", "shutdown", "power-on"], m2="on"),
            "d": ch(["shutdown"], m3="on"),
        },
        "nodes": {
            "n0": {"channels": [{"channel": "a", "target": "m0"},
                                {"channel": "b", "target": "m0"}]},
            "n1": {"channels": [{"channel": "a", "target": "m1"}]},
            "n2": {"channels": [{"channel": "c", "target": "m2"}]},
            "n3": {"channels": [{"channel": "d", "target": "m3"}]},
        },
    }


async def test_a_host_started_for_one_node_creates_and_discovers_only_its_channels(
    reg: Registry,
) -> None:
    async with PowerHost(parse_config(config(), registry=reg), nodes=["n0"]) as host:
        assert sorted(Counted.created) == ["a", "b"]
        assert sorted(Counted.discovered) == [("a", "m0"), ("b", "m0")]
        # the rule saw both channels of n0: its shutdown is offered because b powers it on
        assert host.offer_for("n0")[Verb.SHUTDOWN].offered
        assert host.capabilities("c", "m2") == "not discovered"
        # first use of another node: its channel is created and discovered then, once
        plan = (await host.plan(["n2"], Verb.REBOOT, "kernel"))["n2"]
        assert not isinstance(plan, Exception) and plan.channel == "c"
        await host.plan(["n2"], Verb.REBOOT, "kernel")
        assert sorted(Counted.created) == ["a", "b", "c"]
        assert Counted.discovered.count(("c", "m2")) == 1
        assert "d" not in Counted.created


async def test_an_empty_start_discovers_nothing_and_refresh_of_nodes_asks_again(
    reg: Registry,
) -> None:
    async with PowerHost(parse_config(config(), registry=reg), nodes=()) as host:
        assert Counted.created == [] and Counted.discovered == []
        await host.discover(["n1"])
        await host.discover(["n1"])  # discovered already: not asked again
        assert Counted.discovered == [("a", "m1")]
        await host.refresh(["n1"])  # refresh asks again, for those nodes only
        assert Counted.discovered == [("a", "m1"), ("a", "m1")]
        with pytest.raises(UnknownNode):
            await host.discover(["nope"])


async def test_concurrent_first_uses_discover_each_pair_once(reg: Registry) -> None:
    async with PowerHost(parse_config(config(), registry=reg), nodes=()) as host:
        await asyncio.gather(
            host.plan(["n0"], Verb.SHUTDOWN, "psu"),
            host.plan(["n0", "n1"], Verb.SHUTDOWN, "psu"),
            host.discover(["n0"]),
        )
    assert sorted(Counted.discovered) == [("a", "m0"), ("a", "m1"), ("b", "m0")]


async def test_lazy_and_full_hosts_decide_plan_and_read_alike(reg: Registry) -> None:
    dep = parse_config(config(), registry=reg)
    seen: dict[str, list[Any]] = {}
    for mode, scope in (("full", None), ("lazy", ())):
        out: list[Any] = []
        async with PowerHost(dep, nodes=scope) as host:
            for node in dep.nodes:
                for verb in (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON):
                    plan = (await host.plan([node], verb, "check"))[node]
                    out.append(plan.as_dict() if not isinstance(plan, Exception)
                               else (type(plan).__name__, str(plan), plan.exit_code))
                out.append(host.offer_for(node).as_dict())
                out.append((await host.read_power_state(node, every_channel=True)).as_dict())
        seen[mode] = out
    assert seen["lazy"] == seen["full"]
    # n3 has only a shutdown channel: withheld by the rule (nothing could power it on)
    async with PowerHost(dep, nodes=()) as host:
        refusal = (await host.plan(["n3"], Verb.SHUTDOWN, "psu"))["n3"]
        assert isinstance(refusal, NotOffered) and refusal.exit_code == 3


async def test_an_off_from_a_channel_that_cannot_see_off_is_not_believed_lazily(
    reg: Registry,
) -> None:
    cfg = {"channels": {"t": {"type": "blind", "machines": {"m": "off"}}},
           "nodes": {"n": {"channels": [{"channel": "t", "target": "m"}]}}}
    async with PowerHost(parse_config(cfg, registry=reg), nodes=()) as host:
        reading = await host.read_power_state("n")
    assert reading.state is PowerState.UNKNOWN
    assert "cannot see power off" in reading.readings[0].detail
    assert Counted.discovered == [("t", "m")]  # discovered for the off, on first use


# -- the CLI -----------------------------------------------------------------------------------
def pp(config_file: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", str(config_file), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def guarded(tmp: Path, m3: str) -> Path:
    """Three control-plane members, each on a channel of its own, and a lifecycle guard."""
    cp = {"node-role.kubernetes.io/control-plane": ""}
    states = {"m1": "on", "m2": "on", "m3": m3}
    cfg: dict[str, Any] = {
        "channels": {f"lab{i}": {"type": "simulated", "machines": {f"m{i}": states[f"m{i}"]},
                                 "state_file": str(tmp / f"lab{i}.json")}
                     for i in (1, 2, 3)},
        "nodes": {f"cp-{i}": {"labels": cp, "channels": [{"channel": f"lab{i}",
                                                          "target": f"m{i}"}]}
                  for i in (1, 2, 3)},
        "lifecycle": {"store": str(tmp / "pp.db"),
                      "cluster": {"type": "simulated", "state_file": str(tmp / "cl.json")}},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_guard_still_reads_the_other_members_it_counts(tmp_path: Path) -> None:
    # members come from labels; their readiness is read through channels the command
    # itself does not use (created on first use): all up, one may go
    (tmp_path / "up").mkdir()
    up = guarded(tmp_path / "up", "on")
    code, _, err = pp(up, "invoke", "cp-1", "reboot", "--yes", "--reason", "kernel update",
                      "--confirm-node", "cp-1", "--hazard-reason", "cp-2 and cp-3 stay up")
    assert code == 0, err
    # cp-3 is off (not ready): taking cp-1 down would leave 1 of 3 ready, below quorum 2
    (tmp_path / "down").mkdir()
    down = guarded(tmp_path / "down", "off")
    code, _, err = pp(down, "invoke", "cp-1", "reboot", "--yes", "--reason", "kernel update")
    assert code == 3, err
    assert "quorum 2" in err
    sent = tmp_path / "down" / "lab1.json"  # written on the first verb only
    assert not sent.exists() or json.loads(sent.read_text())["dispatches"] == []


HEAVY = ("sushy", "pysnmp", "boto3", "botocore")


def mixed(tmp: Path) -> Path:
    """A simulated node beside nodes on redfish, pdu and ec2 channels (never contacted)."""
    community = tmp / "community"
    community.write_text("private\n")
    cfg: dict[str, Any] = {
        "channels": {
            "sim": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "machines": {"m": "on"}},
            "bmc": {"type": "redfish", "endpoint": "https://127.0.0.1:9",
                    "username": "admin", "password": {"env": "PP_TEST_NEVER_READ"}},
            "rack": {"type": "pdu", "protocol": "snmp", "profile": "apc-rpdu",
                     "host": "127.0.0.1", "port": 9, "community": {"file": str(community)}},
            "aws": {"type": "ec2", "region": "eu-west-1"},
        },
        "nodes": {
            "s": {"channels": [{"channel": "sim", "target": "m"}]},
            "r": {"channels": [{"channel": "bmc", "target": "/redfish/v1/Systems/1"}]},
            "p": {"channels": [{"channel": "rack", "target": {"outlets": [1]}}]},
            "e": {"channels": [{"channel": "aws", "target": "i-0abc1234def567890"}]},
        },
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.perf
@pytest.mark.parametrize("args", [
    ["state", "s"],
    ["offers", "s"],
    ["invoke", "s", "reboot", "--yes", "--reason", "kernel update"],
])
def test_a_command_about_a_simulated_node_imports_no_other_channel_library(
    tmp_path: Path, args: list[str]
) -> None:
    path = mixed(tmp_path)
    code = (
        "import sys\n"
        "from powerplane.cli import cli\n"
        "try:\n"
        f"    cli.main({['--config', str(path), *args]!r}, standalone_mode=False)\n"
        "except SystemExit as exc:\n"
        "    print('EXIT', exc.code)\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERPLANE_")}
    env["PP_TEST_NEVER_READ"] = "not-a-real-password"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False, env=env)
    assert "Traceback" not in out.stderr, out.stderr
    assert "EXIT" not in out.stdout, out.stdout + out.stderr  # the command succeeded
    assert out.stdout.splitlines()[-1] == "HEAVY=", (
        "perf (one-shot startup): imports no other channel's library: " + out.stdout)
