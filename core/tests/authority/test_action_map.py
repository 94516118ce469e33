"""Every entry point of the CLI and the embedding API maps to exactly one action (or says why
it is none), in one table (``powerplane.authority.actions.ENTRY_POINTS``); and each CLI
entry that is an action is refused (exit 3, the action named) where the policy denies
exactly that action."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import click
import pytest
from authority_support import write_deployment
from click.testing import CliRunner

from powerplane import PowerHost
from powerplane.authority.actions import ENTRY_POINTS, Action
from powerplane.authority.identity import local_identity
from powerplane.capabilities import Verb
from powerplane.cli import cli
from powerplane.lifecycle import Lifecycle
from powerplane.lifecycle.model import Intent


def cli_entry_points() -> list[str]:
    ctx = click.Context(cli)
    found: list[str] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            path = f"{prefix} {name}".strip()
            if path == "serve":
                # powerplane-servers: its routes and the command are in its own table,
                # powerplane_servers.actions.ENTRY_POINTS, checked by servers/tests
                continue
            if isinstance(command, click.Group):
                if command.invoke_without_command:  # a group that acts on its own too
                    found.append(f"cli: {path}")
                walk(command, path)
            elif path == "invoke":
                found.extend(f"cli: invoke {v.value}" for v in Verb)
            elif path == "maintenance request":
                found.extend(f"cli: maintenance request --intent {i.value}" for i in Intent)
            else:
                found.append(f"cli: {path}")

    walk(cli, "")
    return found


def api_entry_points() -> list[str]:
    found = []
    for cls in (PowerHost, Lifecycle):
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or isinstance(member, property):
                continue
            if callable(member):
                found.append(f"api: {cls.__name__}.{name}")
    return found


def test_every_cli_and_api_entry_point_maps_to_exactly_one_action() -> None:
    from powerplane.cli.fence import ACTIONS

    every = cli_entry_points() + api_entry_points() + [f"fence: {a}" for a in ACTIONS]
    unmapped = [e for e in every if e not in ENTRY_POINTS]
    assert unmapped == []
    stale = [e for e in ENTRY_POINTS if e not in every]
    assert stale == []
    for entry, value in ENTRY_POINTS.items():
        assert isinstance(value, Action) or (isinstance(value, str) and value), entry


def test_the_table_names_every_action_at_least_once() -> None:
    named = {v for v in ENTRY_POINTS.values() if isinstance(v, Action)}
    assert named == set(Action)


ARGS: dict[str, list[str]] = {
    "cli: offers": ["offers", "n1"],
    "cli: state": ["state", "n1"],
    **{f"cli: invoke {v.value}": ["invoke", "n1", v.value, "--reason", "kernel update",
                                  "--yes", "--confirm-node", "n1"] for v in Verb},
    **{f"cli: maintenance request --intent {i.value}": [
        "maintenance", "request", "n1", "--intent", i.value, "--reason", "replace the PSU",
        "--confirm-node", "n1", "--ack-preflight"] for i in Intent},
    "cli: maintenance return": ["maintenance", "return", "n1", "--reason", "replace the PSU"],
    "cli: maintenance abandon": ["maintenance", "abandon", "n1", "--reason", "replace the PSU"],
    "cli: maintenance resolve": ["maintenance", "resolve", "n1", "--applied", "--reason",
                                 "replace the PSU", "--confirm-node", "n1"],
}


@pytest.mark.parametrize("entry", sorted(ARGS))
def test_each_acting_cli_entry_is_refused_where_its_action_is_denied(
    tmp_path: Path, entry: str,
) -> None:
    action = ENTRY_POINTS[entry]
    assert isinstance(action, Action)
    me = local_identity().user
    roles = {"roles": {"all-but": {"tier": "admin", "deny": [action.value]}},
             "bindings": [{"role": "all-but", "users": [me]}]}
    config = write_deployment(tmp_path, roles, lifecycle=True)
    result = CliRunner().invoke(cli, ["--config", str(config), *ARGS[entry]])
    assert result.exit_code == 3, result.output
    assert f"{action.value} on n1" in result.output
    assert "role all-but denies it (deny wins)" in result.output


def test_maintenance_list_and_status_show_only_what_the_caller_may_read(tmp_path: Path) -> None:
    me = local_identity().user
    allowed = {"roles": {"admin": {"tier": "admin"}}, "bindings": [{"role": "admin",
                                                                    "users": [me]}]}
    config = write_deployment(tmp_path, allowed, lifecycle=True)
    run = CliRunner().invoke
    made = run(cli, ["--config", str(config), "maintenance", "request", "n1", "--intent",
                     "cordon", "--reason", "replace the PSU", "-o", "json"])
    assert made.exit_code == 0, made.output
    name: Any = json.loads(made.stdout)["name"]
    (tmp_path / "roles.yaml").write_text(json.dumps(
        {"roles": {"admin": {"tier": "admin", "deny": ["servers:read"]}},
         "bindings": [{"role": "admin", "users": [me]}]}))
    listed = run(cli, ["--config", str(config), "maintenance", "list", "-o", "json"])
    assert listed.exit_code == 0
    assert json.loads(listed.stdout) == {"maintenances": []}
    assert "1 maintenance(s) not shown" in listed.stderr
    status = run(cli, ["--config", str(config), "maintenance", "status", name])
    assert status.exit_code == 3
    assert "servers:read on n1" in status.output
