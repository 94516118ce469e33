"""A boolean config key is true or false, nothing else, in every distribution's models.

The walk enumerates every config model a deployment file can reach: core's
(``recovery``, ``limits``), the ``lifecycle:`` section and every registered cluster,
storage and store type's model, every registered channel type's model (core's
``simulated`` and every installed plugin's), and the conformance suite's ``conformance:``
section, recursing into nested models, mappings and lists. Every boolean field found is
given every lax spelling (``yes``, ``on``, ``'t'``, ``'true'``, ``1`` ...) through the
loader a file goes through, and each must be a problem at that field's path saying
``expected true or false``. A field pydantic would read laxly makes the walk fail.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from powerplane.config import BOOL_EXPECTED, VERIFY_EXPECTED, Limits, Recovery, parse_config
from powerplane.errors import ConfigError
from powerplane.plugins import registry
from powerplane.settings.lifecycle import PORTS, LifecycleConfig, lifecycle_config

LAX: tuple[Any, ...] = (
    "yes", "Yes", "YES", "y", "Y", "no", "n", "on", "On", "ON", "off", "Off", "t", "f",
    "true", "True", "TRUE", "false", "False", "1", "0", "", 1, 0, 1.0, 0.0, 2, -1,
)
"""Every spelling pydantic's lax ``bool`` reads as a boolean (and a few it refuses), as
YAML delivers them: ``yes`` unquoted and ``'true'`` quoted both arrive as strings."""

NOT_STRINGS = tuple(v for v in LAX if not isinstance(v, str))

Seg = str | int  # a mapping key or a list index on the way to a field


@dataclass(frozen=True)
class BoolField:
    """One field of the kind walked for (a boolean, unless told), reached from a root
    section by ``path`` (its key last)."""

    root: str  # "channel:<type>", "<port>:<type>", "lifecycle", "recovery", "conformance"
    path: tuple[Seg, ...]
    model: type[BaseModel]
    admits_str: bool  # ``bool | str`` (``verify``: true, false or a CA bundle path)

    @property
    def dotted(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in _members(a)]
    return [tp]


def _walk_type(tp: Any, root: str, path: tuple[Seg, ...], holder: type[BaseModel],
               seen: frozenset[type[BaseModel]], want: type) -> Iterator[BoolField]:
    members = _members(tp)
    if want in members:
        yield BoolField(root, path, holder, str in members)
    for member in members:
        origin = typing.get_origin(member)
        args = typing.get_args(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            yield from walk_model(member, root, path, seen, want)
        elif origin in (dict, typing.Mapping) and len(args) == 2:
            yield from _walk_type(args[1], root, (*path, "k"), holder, seen, want)
        elif origin in (list, tuple, set, frozenset) and args:
            yield from _walk_type(args[0], root, (*path, 0), holder, seen, want)


def walk_model(model: type[BaseModel], root: str, path: tuple[Seg, ...] = (),
               seen: frozenset[type[BaseModel]] = frozenset(),
               want: type = bool) -> Iterator[BoolField]:
    """Every field of type ``want`` (a boolean unless told) of ``model`` and of the models
    it holds, at any depth."""
    if model in seen:
        return
    for name, field in model.model_fields.items():
        yield from _walk_type(field.annotation, root, (*path, field.alias or name), model,
                              seen | {model}, want)


def roots() -> dict[str, type[BaseModel]]:
    """Every config model a file can reach, by root: from the plugin registry, the
    lifecycle section and its ports, core's sections and the conformance section."""
    from powerplane_conformance.settings import ConformanceSettings

    reg = registry()
    out: dict[str, type[BaseModel]] = {}
    for name, ctype in reg.channel_types.items():
        out[f"channel:{name}"] = ctype.config
    for port in PORTS:
        for name, ptype in reg.port_types(port).items():
            out[f"{port}:{name}"] = ptype.config
    out["lifecycle"] = LifecycleConfig
    out["recovery"] = Recovery
    out["limits"] = Limits
    out["conformance"] = ConformanceSettings
    return out


def every_field(want: type = bool) -> list[BoolField]:
    """Every field of type ``want`` of every model of :func:`roots`."""
    return [f for root, model in roots().items() for f in walk_model(model, root, want=want)]


def _nest(path: tuple[Seg, ...], value: Any) -> Any:
    """The raw data that puts ``value`` at ``path`` (a list index becomes a one-item list)."""
    for part in reversed(path):
        value = [value] if isinstance(part, int) else {part: value}
    return value


def problems_for(field: BoolField, value: Any) -> tuple[str, list[tuple[str, str]]]:
    """``(expected problem path, every (path, message) problem)`` for ``value`` at the
    field, through the loader its section goes through."""
    from powerplane_conformance.settings import load_target

    kind, _, name = field.root.partition(":")
    raw = _nest(field.path, value)
    try:
        if kind == "channel":
            where = ("channels", "c", *field.path)
            parse_config({"channels": {"c": {"type": name, **raw}}})
        elif kind in PORTS:
            where = ("lifecycle", kind, *field.path)
            lifecycle_config({kind: {"type": name, **raw}})
        elif kind == "lifecycle":
            where = ("lifecycle", *field.path)
            lifecycle_config(raw)
        elif kind == "conformance":
            where = ("conformance", *field.path)
            load_target({"conformance": raw})
        else:
            where = (kind, *field.path)
            parse_config({kind: raw})
    except ConfigError as exc:
        found = [(p.path, p.message) for p in exc.problems]
    else:
        found = []
    dotted = ""
    for part in where:
        dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else part)
    return dotted, found


FIELDS = every_field(bool)


def test_the_walk_reaches_every_distributions_boolean_fields() -> None:
    """The walk is not vacuous: it finds the booleans of core, lifecycle, every in-tree
    plugin and the conformance suite (a model it cannot reach would shrink this set)."""
    found = {(f.root, f.dotted) for f in FIELDS}
    assert {
        ("recovery", "attendedRack"),
        ("recovery", "sites.k.attended"),
        ("lifecycle", "no_control_plane"),
        ("cluster:simulated", "boot_id"),
        ("channel:simulated", "graceful"),
        ("channel:simulated", "boot_marker"),
        ("channel:redfish", "verify"),
        ("channel:talos", "shutdown_force"),
        ("channel:pdu", "verify"),
        ("channel:pdu", "feeds.k.verify"),
        ("channel:ec2", "verify"),
        ("channel:openstack", "verify"),
        ("channel:ipmi", "allow_insecure"),
        ("conformance", "allow_destructive"),
        ("conformance", "allow_terminate"),
        ("conformance", "attended"),
    } <= found


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f"{f.root}:{f.dotted}")
def test_every_boolean_field_refuses_every_lax_spelling(field: BoolField) -> None:
    """Each lax spelling is a problem at the field's path that says the two allowed
    values. (A ``bool | str`` field, ``verify``, takes a string as its other meaning, a CA
    bundle path: there each lax spelling, quoted ones too, is its one problem saying the
    three things allowed.)"""
    expected = VERIFY_EXPECTED if field.admits_str else BOOL_EXPECTED
    for value in LAX:
        path, found = problems_for(field, value)
        assert (path, expected) in found, (value, found)
        assert [p for p, _ in found].count(path) == 1, (value, found)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f"{f.root}:{f.dotted}")
def test_every_boolean_field_takes_true_and_false(field: BoolField) -> None:
    for value in (True, False):
        path, found = problems_for(field, value)
        assert all(p != path for p, _ in found), (value, found)


def test_a_plugin_using_pydantics_own_bool_gets_the_same_words() -> None:
    """A model typed with pydantic's ``StrictBool`` (or its lax ``bool`` refusing ``[]``)
    is reported in core's words too: the formatter maps pydantic's boolean error types."""
    from pydantic import ConfigDict, StrictBool

    from powerplane import ChannelType, hookimpl
    from powerplane.plugins import Registry

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        flag: StrictBool = False
        lax: bool = False

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Any) -> None:
            register(ChannelType(name="flagged", config=Strict, factory=lambda n, c: None))

    reg = Registry()
    reg.add_module("flagged", Plugin())
    with pytest.raises(ConfigError) as err:
        parse_config({"channels": {"c": {"type": "flagged", "flag": "yes", "lax": []}}},
                     registry=reg)
    assert {(p.path, p.message) for p in err.value.problems} == {
        ("channels.c.flag", BOOL_EXPECTED), ("channels.c.lax", BOOL_EXPECTED)}


# -- the repros, through the CLI: exit 2 at the key's path and line -------------------

def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "powerplane.yaml"
    path.write_text(text)
    return str(path)


def _run(config: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_main(), ["--config", config, *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def cli_main() -> Any:
    from powerplane.cli import cli

    return cli


DEPLOYMENT = """\
channels:
  lab:
    type: simulated
    machines: {m1: on}
nodes:
  n1:
    site: plant-a
    channels: [{channel: lab, target: m1}]
"""


@pytest.mark.parametrize("spelling", ["yes", "y", "on", "'t'", "'true'", "1"])
def test_attended_rack_yes_is_exit_2_and_offers_no_shutdown(
    tmp_path: Path, spelling: str
) -> None:
    config = _write(tmp_path, DEPLOYMENT + f"recovery: {{attendedRack: {spelling}}}\n")
    code, out, err = _run(config, "offers", "n1")
    assert code == 2
    assert "recovery.attendedRack (line 9): expected true or false" in err
    assert "shutdown" not in out and "attended" not in out


def test_attended_rack_true_offers_shutdown_as_declared(tmp_path: Path) -> None:
    """The control: ``true`` itself still declares the rack attended."""
    config = _write(tmp_path, DEPLOYMENT + "recovery: {attendedRack: true}\n")
    code, out, _ = _run(config, "offers", "n1")
    assert code == 0
    assert "shutdown" in out


def test_a_site_attended_on_is_exit_2_at_its_line(tmp_path: Path) -> None:
    config = _write(tmp_path, DEPLOYMENT + 'recovery:\n  sites:\n    plant-a:\n'
                                           '      attended: "on"\n')
    code, out, err = _run(config, "offers", "n1")
    assert code == 2
    assert "recovery.sites.plant-a.attended (line 12): expected true or false" in err
    assert "shutdown" not in out


def test_no_control_plane_1_does_not_switch_the_quorum_guard_off(tmp_path: Path) -> None:
    from powerplane.config import read_config

    config = _write(tmp_path, DEPLOYMENT + "lifecycle:\n  no_control_plane: 1\n")
    data, lines, source = read_config(config)
    with pytest.raises(ConfigError) as err:
        lifecycle_config(data["lifecycle"], source, lines=lines)
    assert [(p.path, p.message, p.line) for p in err.value.problems] == [
        ("lifecycle.no_control_plane", BOOL_EXPECTED, 10)]
    code, _, stderr = _run(config, "maintenance", "status", "n1")
    assert code == 2
    assert "lifecycle.no_control_plane" in stderr and BOOL_EXPECTED in stderr


def test_machines_on_stays_a_power_state(tmp_path: Path) -> None:
    """``machines: {m1: on}`` is the simulated machine's power state, not a boolean."""
    from powerplane.config import load_config

    config = _write(tmp_path, DEPLOYMENT.replace("{m1: on}", "{m1: on, m2: off}"))
    deployment = load_config(config)
    assert deployment.channels["lab"].config.machines == {"m1": "on", "m2": "off"}
    code, out, _ = _run(config, "state", "n1")
    assert code == 0 and "on" in out


def test_a_plugin_boolean_and_a_conformance_boolean_are_exit_2_at_their_lines(
    tmp_path: Path
) -> None:
    """Representatives of the plugins and of the conformance section, through
    ``powerplane conformance --target``: each lax boolean named with its line."""
    target = _write(tmp_path, DEPLOYMENT.replace("nodes:\n", """\
  talos:
    type: talos
    endpoint: 127.0.0.1
    shutdown_force: on
nodes:
""") + "conformance:\n  nodes: [n1]\n  allow_destructive: yes\n")
    code, _, err = _run(target, "conformance", "--target", target)
    assert code == 2
    assert "channels.talos.shutdown_force (line 8): expected true or false" in err
    assert "conformance.allow_destructive (line 15): expected true or false" in err
