"""docs/reference.md names every CLI command and option, config key and JSON field there is.

The walk is of the real things: the click command tree (with the commands other
distributions add through the ``powerplane.cli`` entry points), the pydantic models of the
deployment, the ``lifecycle:`` section (with every registered cluster, storage and store
type) and every registered channel type, and the JSON the
CLI prints for a simulated deployment. Whatever appears there and not in the reference fails
here, by name and by the section it belongs in.

How the reference is read:

- a command's section is headed by its name in backticks (``### `powerplane state` ``); it
  holds the command's usage line as click prints it, and every option in backticks;
- config keys are the first cells of table rows, in backticks, as dotted paths; ``<name>``
  segments (a key of a mapping) and ``[]`` (an item of a list) are placeholders and read as
  nothing; a channel type's keys are in its own section (``### Channel type `redfish` ``);
- JSON fields are the keys of the JSON blocks in the command's JSON section
  (``### `offers -o json` ``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from pydantic import BaseModel

from powerplane import SecretRef
from powerplane.cli import cli
from powerplane.config import Limits, NodeSpec, Recovery
from powerplane.lifecycle.settings import PORTS, LifecycleConfig
from powerplane.plugins import load_plugins

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
POWERPLANE = [sys.executable, "-m", "powerplane.cli"]


# --- reading the reference ------------------------------------------------------------------

def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for every heading of any level, in order."""
    out: list[tuple[str, str]] = []
    heading, body = "", []
    for line in text.splitlines():
        if re.match(r"#{1,6} ", line):
            out.append((heading, "\n".join(body)))
            heading, body = line, []
        else:
            body.append(line)
    out.append((heading, "\n".join(body)))
    return out


def section(text: str, marker: str) -> str:
    """The body of the one section whose heading holds ``marker``."""
    found = [body for heading, body in sections(text) if marker in heading]
    assert len(found) == 1, f"docs/reference.md: {len(found)} sections headed {marker!r}"
    return found[0]


def backticked(body: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", body))


def table_keys(body: str) -> set[str]:
    """First cells of table rows, in backticks, placeholders dropped."""
    keys: set[str] = set()
    for line in body.splitlines():
        m = re.match(r"\|\s*`([^`]+)`", line)
        if m:
            keys.add(normal(m.group(1)))
    return keys


def normal(path: str) -> str:
    path = re.sub(r"\.?<[^>]*>", "", path).replace("[]", "")
    return path.strip(".")


def json_keys(body: str) -> set[str]:
    keys: set[str] = set()
    for block in re.findall(r"```json\n(.*?)```", body, flags=re.S):
        keys.update(re.findall(r'"([A-Za-z_][\w-]*)"\s*:', block))
    return keys


@pytest.fixture(scope="module")
def reference() -> str:
    return REFERENCE.read_text(encoding="utf-8")


# --- the CLI ---------------------------------------------------------------------------------

def commands() -> Iterator[tuple[str, click.Command, click.Context]]:
    def walk(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command,
                                                                       click.Context]]:
        yield ctx.command_path, cmd, ctx
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, f"command {name!r} does not load"
                yield from walk(sub, click.Context(sub, info_name=name, parent=ctx))

    yield from walk(cli, click.Context(cli, info_name="powerplane"))


def test_every_command_option_and_usage_is_in_the_reference(reference: str) -> None:
    missing: list[str] = []
    seen = []
    for path, cmd, ctx in commands():
        seen.append(path)
        try:
            body = section(reference, f"`{path}`")
        except AssertionError as exc:
            missing.append(str(exc))
            continue
        usage = " ".join(cmd.get_usage(ctx).split())
        if usage not in " ".join(body.split()):
            missing.append(f"{path}: the usage line {usage!r}")
        names = backticked(body)
        for param in cmd.params:
            if isinstance(param, click.Option):
                for opt in (*param.opts, *param.secondary_opts):
                    if opt not in names and not any(n.startswith(f"{opt} ") for n in names):
                        missing.append(f"{path}: option {opt}")
    # the commands other distributions add are walked too
    assert {"powerplane conformance", "powerplane new-plugin", "powerplane demo",
            "powerplane maintenance resolve"} <= set(seen)
    assert not missing, "docs/reference.md lacks:\n" + "\n".join(missing)


# --- config keys -----------------------------------------------------------------------------

def _models(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models(arg)]


def keys_of(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted keys of a model and the models inside it (a secret reference is one key)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        out.add(key)
        for sub in _models(field.annotation):
            if sub is not SecretRef:
                out |= keys_of(sub, f"{key}.")
    return out


def lifecycle_keys() -> set[str]:
    """The ``lifecycle:`` keys, with the keys of every registered cluster, storage and store
    type under ``lifecycle.<port>.`` (their configs come from the registry, not the model)."""
    registry = load_plugins()
    out = keys_of(LifecycleConfig, "lifecycle.")
    for port in PORTS:
        for ptype in registry.port_types(port).values():
            out |= keys_of(ptype.config, f"lifecycle.{port}.")
    return out


def test_every_deployment_and_lifecycle_key_is_in_the_reference(reference: str) -> None:
    wanted = {"channels", "nodes", "recovery", "limits", "lifecycle"}
    wanted |= keys_of(NodeSpec, "nodes.")
    wanted |= keys_of(Recovery, "recovery.")
    wanted |= keys_of(Limits, "limits.")
    wanted |= lifecycle_keys()
    have = table_keys(section(reference, "Deployment keys"))
    have |= table_keys(section(reference, "Lifecycle keys"))
    missing = sorted(wanted - have)
    assert not missing, f"docs/reference.md lacks config keys: {missing}"


def test_every_key_of_every_registered_channel_type_is_in_the_reference(
    reference: str,
) -> None:
    registry = load_plugins()
    assert not registry.failures, f"plugins that did not load: {registry.failures}"
    assert {"simulated", "redfish", "talos", "pdu", "ec2", "openstack", "ipmi"} <= set(
        registry.channel_types)
    missing: list[str] = []
    for name, ctype in sorted(registry.channel_types.items()):
        try:
            have = table_keys(section(reference, f"Channel type `{name}`"))
        except AssertionError as exc:
            missing.append(str(exc))
            continue
        keys = keys_of(ctype.config)
        missing += [f"{name}: {key}" for key in sorted(keys - have)]
        missing += [f"{name}: {key} is documented and does not exist" for key in
                    sorted(have - keys)]
    assert not missing, "docs/reference.md lacks channel keys:\n" + "\n".join(missing)


def test_the_key_walk_sees_nested_models_and_placeholders() -> None:
    assert {"lifecycle.cluster.pdbs.allowed_disruptions", "lifecycle.storage.evict_per_read",
            "lifecycle.store.path", "lifecycle.store.type"} <= lifecycle_keys()
    assert "recovery.attendedRack" in keys_of(Recovery, "recovery.")
    assert normal("nodes.<name>.channels[].target") == "nodes.channels.target"
    assert table_keys("| `recovery.sites.<site>.attended` | x |") == {"recovery.sites.attended"}


# --- JSON fields -----------------------------------------------------------------------------

DEPLOYMENT = """\
channels:
  lab:
    type: simulated
    verbs: [reboot, shutdown, power-on]
    machines: {m1: on, m2: on, m3: off}
    state_file: ./lab.json
  down:
    type: simulated
    verbs: [reboot]
    machines: {m2: on}
    faults: {m2: unreachable}
nodes:
  node-1:
    site: plant-a
    channels: [{channel: lab, target: m1}]
  node-2:
    site: plant-a
    channels: [{channel: down, target: m2}, {channel: lab, target: m2}]
  node-3:
    classification: replaceable
    channels: [{channel: lab, target: m3}]
"""


def keys_in(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in keys_in(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in keys_in(v)}
    return set()


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Keys of the JSON the CLI prints, per command, for a simulated deployment."""
    where = tmp_path_factory.mktemp("reference")
    (where / "powerplane.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    env = {**os.environ, "POWERPLANE_LOAD_PLUGINS": "simulated", "NO_COLOR": "1"}
    env.pop("POWERPLANE_CONFIG", None)

    def run(*args: str) -> Any:
        res = subprocess.run([*POWERPLANE, *args, "-o", "json"], cwd=where, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode in (0, 1, 3), res.stderr
        return json.loads(res.stdout)

    why = ("--reason", "kernel update", "--yes")
    return {
        "offers": keys_in(run("offers")),
        "state": keys_in([run("state", "node-1"), run("state", "node-1", "node-2")]),
        "invoke": keys_in([
            run("invoke", "node-1", "reboot", *why),
            run("invoke", "node-3", "power-on", *why, "--wait", "5"),
            run("invoke", "node-1", "shutdown", *why, "--dry-run"),
            run("invoke", "node-1", "node-2", "reboot", *why, "--dry-run"),
            run("invoke", "node-1", "node-3", "terminate", *why),
        ]),
    }


@pytest.mark.parametrize("command", ["offers", "state", "invoke"])
def test_every_json_field_is_in_the_reference(
    reference: str, printed: dict[str, set[str]], command: str
) -> None:
    have = json_keys(section(reference, f"`{command} -o json`"))
    missing = sorted(printed[command] - have)
    assert not missing, f"docs/reference.md lacks {command} JSON fields: {missing}"


def test_the_json_walk_sees_every_document_it_asked_for(printed: dict[str, set[str]]) -> None:
    # several nodes, a channel that could not be discovered, --wait, --dry-run, an error
    assert {"nodes", "verbs", "channels", "discovered", "cause"} <= printed["offers"]
    assert {"readings", "disagreement", "error"} <= printed["state"]
    assert {"accepted", "expected", "reached", "sent", "guard", "dry_run",
            "exit_code"} <= printed["invoke"]


def test_the_vendor_guide_points_at_the_reference_not_at_a_missing_file() -> None:
    guide = (REFERENCE.parent / "vendor-guide.md").read_text(encoding="utf-8")
    assert "CONTRACT.md" not in guide
    assert "(reference.md)" in guide
