"""Every host of a deployment with a ``lifecycle:`` section carries the lifecycle's guard.

README's own examples, as a new user would combine them: the lifecycle example saved as
``powerplane.yaml`` and the embedding snippet run against it, then extended with
``invoke_many`` shutting down every control-plane node. The guard refuses each of them
(the first consumes the last of the quorum margin: a hazard, refused without its typed
reason; the other two would drop the control plane below quorum), nothing is sent to them
(counted at the simulated machines), and a worker's reboot through the same host is still
accepted. The same through ``PowerHost(parse_config(...))`` and ``open_deployment``, and
no argument of either leaves the guard or the policy off.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from powerplane import (
    PowerHost,
    PowerplaneError,
    Verb,
    load_config,
    open_deployment,
    parse_config,
)
from powerplane.errors import UnknownNode
from powerplane.host import Host
from powerplane.lifecycle.ceremony import CeremonyRequired, MaintenanceRefused

README = Path(__file__).resolve().parents[2] / "README.md"

EXTENSION = '''
async def every_control_plane_node() -> None:
    async with PowerHost.from_config("powerplane.yaml") as host:
        out = await host.invoke_many(["cp-1", "cp-2", "cp-3"], Verb.SHUTDOWN,
                                     reason="rack rewiring")
        for node, outcome in out.items():
            print(node, type(outcome).__name__, getattr(outcome, "exit_code", None))
        worker = await host.invoke("node-2", Verb.REBOOT, reason="kernel update")
        print("node-2 reboot accepted:", worker.accepted)

asyncio.run(every_control_plane_node())
'''


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    return text[start:text.index("\n## ", start + 1)]


def lifecycle_example() -> str:
    """The first YAML block of README's lifecycle section (the complete example)."""
    found = re.search(r"```yaml\n(.*?)```", _section("The maintenance lifecycle"), re.DOTALL)
    assert found is not None
    return found.group(1)


def embedding_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", _section("Embedding `PowerHost`"), re.DOTALL)
    assert len(blocks) == 1
    return str(blocks[0])


def sent(workdir: Path) -> list[list[str]]:
    state = json.loads((workdir / "lab-state.json").read_text(encoding="utf-8"))
    return [list(d) for d in state.get("dispatches", [])]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "powerplane.yaml").write_text(lifecycle_example(), encoding="utf-8")
    return tmp_path


def test_readmes_snippet_on_readmes_lifecycle_example_never_shuts_the_control_plane(
    workdir: Path,
) -> None:
    (workdir / "example.py").write_text(embedding_example() + EXTENSION, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    env["POWERPLANE_LOAD_PLUGINS"] = "simulated"
    env["XDG_STATE_HOME"] = str(workdir / "state")
    res = subprocess.run([sys.executable, "example.py"], cwd=workdir, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    # README's own snippet, unchanged: a worker's shutdown and two workers' reboot
    assert lines[:4] == ["shutdown accepted: True - off observed: True", "node-1 reads off",
                         "node-1 accepted by lab", "node-2 accepted by lab"], res.stdout
    # every control-plane node refused by the guard: each alone would consume the last of
    # the quorum margin (three members, quorum two), a hazard, refused without its reason
    assert lines[4:] == ["cp-1 HazardReasonRequired 2", "cp-2 HazardReasonRequired 2",
                         "cp-3 HazardReasonRequired 2", "node-2 reboot accepted: True"], res.stdout
    # nothing went to a control-plane machine (m1-m3); the workers' verbs each once
    assert sent(workdir) == [["shutdown", "m4"], ["reboot", "m4"], ["reboot", "m5"],
                             ["reboot", "m5"]]


def _deployment(workdir: Path) -> Any:
    return load_config(workdir / "powerplane.yaml")


@pytest.mark.parametrize("how", ["PowerHost", "open_deployment"])
def test_a_host_built_from_a_parsed_deployment_carries_the_guard(
    workdir: Path, how: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(workdir / "state"))
    monkeypatch.chdir(workdir)  # the example's state files are relative to where it runs

    async def go() -> dict[str, Any]:
        deployment = _deployment(workdir)
        if how == "PowerHost":
            async with PowerHost(deployment) as host:
                out: dict[str, Any] = await host.invoke_many(
                    ["cp-1", "cp-2", "cp-3"], Verb.SHUTDOWN, reason="rack rewiring")
                out["node-2"] = await host.invoke("node-2", Verb.REBOOT,
                                                  reason="kernel update")
                return out
        async with open_deployment(deployment) as runtime:
            out = await runtime.host.invoke_many(["cp-1", "cp-2", "cp-3"], Verb.SHUTDOWN,
                                                 reason="rack rewiring")
            out["node-2"] = await runtime.host.invoke("node-2", Verb.REBOOT,
                                                      reason="kernel update")
            return out

    out = asyncio.run(go())
    for node in ("cp-1", "cp-2", "cp-3"):
        assert isinstance(out[node], (MaintenanceRefused, CeremonyRequired)), out[node]
    assert not isinstance(out["node-2"], PowerplaneError) and out["node-2"].accepted
    assert sent(workdir) == [["reboot", "m5"]]


def test_with_the_hazard_acknowledged_the_guard_still_keeps_quorum(
    workdir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The typed hazard reason lets the first member go; the next two would drop the control
    plane below quorum and are refused with the numbers, never sent."""
    monkeypatch.setenv("XDG_STATE_HOME", str(workdir / "state"))
    monkeypatch.chdir(workdir)

    async def go() -> dict[str, Any]:
        async with PowerHost(_deployment(workdir)) as host:
            return await host.invoke_many(["cp-1", "cp-2", "cp-3"], Verb.SHUTDOWN,
                                          reason="rack rewiring",
                                          hazard_reason="planned window CHG-1234")

    out = asyncio.run(go())
    assert not isinstance(out["cp-1"], PowerplaneError)
    for node in ("cp-2", "cp-3"):
        refused = out[node]
        assert isinstance(refused, MaintenanceRefused) and refused.exit_code == 3
        assert "3 control-plane members, 2 ready, quorum 2, margin 0" in str(refused)
    assert sent(workdir) == [["shutdown", "m1"]]


def test_no_argument_leaves_the_guard_or_the_policy_off(workdir: Path) -> None:
    """The public host takes neither a guard nor an authority; the engine below it refuses
    to exist for a deployment with a lifecycle: section and no guard."""
    deployment = _deployment(workdir)
    for forbidden in ({"guard": None}, {"authority": None}):
        with pytest.raises(TypeError):
            PowerHost(deployment, **forbidden)
    host = PowerHost(deployment)
    with pytest.raises(AttributeError):
        host.guard = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        host.authority = None  # type: ignore[misc]
    with pytest.raises(ValueError, match="needs the lifecycle's guard"):
        Host(deployment, guard=None, authority=host.authority)


def test_a_deployment_without_a_lifecycle_section_behaves_as_before(tmp_path: Path) -> None:
    cfg = {"channels": {"lab": {"type": "simulated", "verbs": ["reboot"],
                                "machines": {"m1": "on"}}},
           "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m1"}]}},
           "audit": {"path": str(tmp_path / "audit.jsonl")}}
    host = PowerHost(parse_config(cfg))
    assert host.guard is None
    runtime = open_deployment(parse_config(cfg))
    assert runtime.lifecycle is None and not runtime.has_lifecycle

    async def go() -> Any:
        async with host:
            with pytest.raises(UnknownNode):
                await host.invoke("nope", Verb.REBOOT, reason="kernel update")
            return await host.invoke("n1", Verb.REBOOT, reason="x")  # no reason policy

    assert asyncio.run(go()).accepted
