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

import enum
import json
import os
import re
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types as at
import click
import pytest
import yaml
from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo

from powerplane import SecretRef
from powerplane.cli import cli
from powerplane.config import Limits, Recovery
from powerplane.nodes import NodeSpec
from powerplane.plugins import load_plugins
from powerplane.settings.lifecycle import PORTS, LifecycleConfig

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
"""The reference's index; its pages are :data:`PAGES`, in the index's order."""
PAGES = REFERENCE.parent / "reference"


def reference_text() -> str:
    """The index and every page it links, in its order: the reference as one text."""
    index = REFERENCE.read_text(encoding="utf-8")
    names = re.findall(r"\]\(reference/([\w-]+\.md)\)", index)
    return "\n".join([index, *((PAGES / n).read_text(encoding="utf-8") for n in names)])
POWERPLANE = [sys.executable, "-m", "powerplane.cli"]


# --- reading the reference ------------------------------------------------------------------

def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for every heading of any level, in order."""
    out: list[tuple[str, str]] = []
    heading, body = "", list[str]()
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
    return reference_text()


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


# --- values: what the reference states against what the models and commands do ----------------
#
# A config key's row reads ``| `key` | TYPE[, DEFAULT] | meaning |``, as the reference's
# "Conventions" paragraph describes it:
#
# - TYPE: ``int``, ``seconds`` (a finite number above 0) or ``number`` (a finite number),
#   optionally bounded (``A-B`` with an en dash, ``≥ A``, ``≤ B``; for seconds ``≤ B`` keeps
#   "above 0"); or the allowed values, ``\`a\` (default) \| \`b\```; or words (``bool``,
#   ``string``, ``mapping``, ``path``, ...). A value the model's type lists and the meaning
#   refuses in words (``\`0\` is refused``) is not an allowed value.
# - DEFAULT: ``required``; ``none``/``absent`` (no value); one value in backticks (YAML, or
#   the text as written); another key in backticks or words (derived at use: the model's
#   default is none). A mapping's default names some of its keys (``{type: simulated}``); a
#   path stands for a mapping with that ``path`` (``lifecycle.store``). The default of a key
#   inside a mapping is the enclosing default's value where it has one, else the key's own.

DASH = "\N{EN DASH}"
PLACEHOLDER = re.compile(r"<[^>]*>|\[\]")
NUMERIC = re.compile(r"(int|integer|seconds|number)\b\s*(.*)$")
ALTERNATIVES = re.compile(r"`[^`]*`(\s*\(default\))?(\s*\|\s*`[^`]*`(\s*\(default\))?)*")
NOT_MODEL_FIELDS = {"channels", "channels.<name>.type", "lifecycle"}
UNSET: Any = object()


def cells(line: str) -> list[str]:
    """The cells of a table row (``\\|`` is a pipe inside a cell)."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [p.strip().replace("\\|", "|") for p in parts]


def key_rows(body: str) -> list[tuple[str, str, str]]:
    """(key, type cell, meaning) of every three-column key row."""
    out = []
    for line in body.splitlines():
        if re.match(r"\|\s*`", line):
            row = cells(line)
            if len(row) >= 3:
                out.append((row[0].strip("`"), row[1], row[2]))
    return out


def split_outside_backticks(text: str, sep: str = ", ") -> list[str]:
    parts, depth, cur, i = [], False, "", 0
    while i < len(text):
        if text[i] == "`":
            depth = not depth
        if not depth and text.startswith(sep, i):
            parts.append(cur)
            cur, i = "", i + len(sep)
            continue
        cur += text[i]
        i += 1
    return [*parts, cur]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def stated_bounds(kind: str, rest: str) -> dict[str, float]:
    """The bounds a numeric TYPE states, as pydantic's ge/gt/le/lt."""
    rest = rest.strip()
    out: dict[str, float] = {}
    if m := re.fullmatch(rf"([\d.,]+)\s*[{DASH}-]\s*([\d.,]+)", rest):
        out = {"ge": _number(m.group(1)), "le": _number(m.group(2))}
    elif m := re.fullmatch(r"≥\s*([\d.,]+)", rest):
        out = {"ge": _number(m.group(1))}
    elif m := re.fullmatch(r">\s*([\d.,]+)", rest):
        out = {"gt": _number(m.group(1))}
    elif m := re.fullmatch(r"≤\s*([\d.,]+)", rest):
        out = {"le": _number(m.group(1))}
    else:
        assert not rest, f"unreadable bounds {rest!r}"
    if kind == "seconds" and "ge" not in out and "gt" not in out:
        out["gt"] = 0.0
    return out


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(tp) for m in _members(arg)]
    return [tp]


def model_bounds(field: FieldInfo) -> tuple[dict[str, float], bool]:
    """(ge/gt/le/lt, whether NaN and infinity are refused) of a field."""
    metas = list(field.metadata)

    def scan(tp: Any) -> None:
        if typing.get_origin(tp) is typing.Annotated:
            for meta in typing.get_args(tp)[1:]:
                metas.extend(meta.metadata if isinstance(meta, FieldInfo) else [meta])
            scan(typing.get_args(tp)[0])
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            for arg in typing.get_args(tp):
                scan(arg)

    scan(field.annotation)
    bounds: dict[str, float] = {}
    finite = False
    for meta in metas:
        if isinstance(meta, at.Interval):
            items = {k: getattr(meta, k) for k in ("ge", "gt", "le", "lt")}
        elif isinstance(meta, (at.Ge, at.Gt, at.Le, at.Lt)):
            name = type(meta).__name__.lower()
            items = {name: getattr(meta, name)}
        else:
            items = {}
            finite = finite or getattr(meta, "allow_inf_nan", None) is False
        bounds.update({k: float(v) for k, v in items.items() if v is not None})
    lower = "ge" in bounds or "gt" in bounds
    upper = "le" in bounds or "lt" in bounds
    return bounds, finite or (lower and upper)  # NaN fails a comparison, infinity the upper


def model_allowed(field: FieldInfo) -> set[str]:
    out: set[str] = set()
    for member in _members(field.annotation):
        if typing.get_origin(member) is typing.Literal:
            out |= {str(getattr(v, "value", v)) for v in typing.get_args(member)}
        elif isinstance(member, type) and issubclass(member, enum.Enum):
            out |= {str(v.value) for v in member}
    return out


def plain(value: Any) -> Any:
    """A default as YAML would write it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Resolved:
    """A documented key's field, with the default it has where the reference writes it."""

    model: type[BaseModel]
    field: FieldInfo
    default: Any  # UNSET: required


def own_default(field: FieldInfo) -> Any:
    if field.is_required():
        return UNSET
    return plain(field.get_default(call_default_factory=True))


def resolve(roots: list[type[BaseModel]], key: str,
            port_types: dict[str, list[type[BaseModel]]] | None = None) -> list[Resolved]:
    """Every field a documented key names, walking models, mappings (``<name>``) and lists
    (``[]``); ``port_types`` gives the models of ``lifecycle``'s port fields."""
    segments = [s for s in re.split(r"\.|(?=\[\])", key) if s]
    found: list[Resolved] = []
    here: list[tuple[type[BaseModel], Any]] = [(m, UNSET) for m in roots]
    for i, seg in enumerate(segments):
        if PLACEHOLDER.fullmatch(seg):
            here = [(m, UNSET) for m, _ in here]  # an item: its own defaults apply
            continue
        found = []
        for model, inherited in here:
            for name, field in model.model_fields.items():
                if (field.alias or name) == seg:
                    default = own_default(field)
                    if isinstance(inherited, dict) and seg in inherited:
                        default = inherited[seg]
                    found.append(Resolved(model, field, default))
        if i + 1 < len(segments):
            nxt: list[tuple[type[BaseModel], Any]] = []
            for res in found:
                subs = _models(res.field.annotation)
                name = next(n for n, f in res.model.model_fields.items() if f is res.field)
                if port_types is not None and res.model is LifecycleConfig and name in PORTS:
                    subs = port_types[name]
                nxt += [(sub, res.default) for sub in subs]
            here = nxt
    return found


def documented_paths(reference: str) -> set[str]:
    paths = set()
    for _, body in sections(reference):
        paths |= {key for key, _, _ in key_rows(body)}
    return paths


def stated_default(text: str | None, known_keys: set[str]) -> tuple[str, Any]:
    """("required" | "none" | "value" | "derived" | "unstated", value)."""
    if text is None:
        return "unstated", None
    text = text.strip()
    if text == "required":
        return "required", None
    if text in ("none", "absent"):
        return "none", None
    if m := re.fullmatch(r"`([^`]*)`|(-?[\d.]+)", text):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        return "value", raw
    return "derived", None


def same_default(raw: str, actual: Any) -> bool:
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        parsed = raw
    if isinstance(parsed, bool) or isinstance(actual, bool):
        return parsed is actual  # 1 is not true
    if parsed == actual or raw == str(actual):
        return True
    if isinstance(parsed, dict) and isinstance(actual, dict):
        return parsed.items() <= actual.items()
    return isinstance(parsed, str) and isinstance(actual, dict) and actual.get("path") == parsed


def check_row(key: str, type_cell: str, meaning: str, candidates: list[Resolved],
              known_keys: set[str]) -> list[str]:
    """What a key's row states that its field does not do."""
    parts = split_outside_backticks(type_cell)
    kind_text, default_text = parts[0].strip(), (", ".join(parts[1:]) or None)
    problems: list[str] = []
    alternatives = ALTERNATIVES.fullmatch(kind_text)
    marked = re.findall(r"`([^`]*)`\s*\(default\)", kind_text)
    if marked:
        assert default_text is None, f"{key}: two defaults stated"
        kind, default = "value", marked[0]
    else:
        kind, default = stated_default(default_text, known_keys)
    actual = [c.default for c in candidates]
    if kind == "required" and UNSET not in actual:
        problems.append(f"{key}: documented as required; default {actual}")
    elif kind == "none" and None not in actual:
        problems.append(f"{key}: documented as none; default {actual}")
    elif kind == "derived" and None not in actual:
        problems.append(f"{key}: documented as derived at use ({default_text}); default {actual}")
    elif kind == "value" and not any(a is not UNSET and same_default(default, a)
                                     for a in actual):
        if not (default in known_keys and None in actual):  # else another key's value
            problems.append(f"{key}: documented default {default!r}; the model's {actual}")
    elif kind == "unstated" and not kind_text.startswith("mapping") and UNSET not in actual:
        problems.append(f"{key}: no default stated; the model's {actual}")

    # allowed values
    allowed = set().union(*(model_allowed(c.field) for c in candidates))
    if alternatives:
        stated = set(re.findall(r"`([^`]*)`", kind_text))
        refused = set(re.findall(r"`([^`]*)` is refused", meaning))
        if stated != allowed - refused:
            problems.append(f"{key}: documented values {sorted(stated)}; the model's "
                            f"{sorted(allowed - refused)}")
    elif allowed:
        problems.append(f"{key}: the model allows only {sorted(allowed)}; not stated")

    # booleans
    is_bool = any(bool in _members(c.field.annotation) for c in candidates)
    if kind_text.startswith("bool") != is_bool:
        problems.append(f"{key}: documented type {kind_text!r}; the model's "
                        f"{'a bool' if is_bool else 'not a bool'}")

    # bounds
    numeric = NUMERIC.fullmatch(kind_text)
    facts = [model_bounds(c.field) for c in candidates]
    if numeric:
        want = stated_bounds(numeric.group(1), numeric.group(2))
        if not any(bounds == want for bounds, _ in facts):
            problems.append(f"{key}: documented bounds {want}; the model's "
                            f"{[b for b, _ in facts]}")
        if numeric.group(1) in ("seconds", "number") and not any(f for _, f in facts):
            problems.append(f"{key}: documented finite; the model accepts NaN or infinity")
    elif any(bounds for bounds, _ in facts):
        problems.append(f"{key}: the model bounds it {[b for b, _ in facts]}; not stated")
    return problems


def config_sections(reference: str) -> Iterator[tuple[str, list[type[BaseModel]],
                                                     dict[str, list[type[BaseModel]]] | None]]:
    """(section marker, root models, port types) of every table of config keys."""
    registry = load_plugins()
    deployment = create_model("DeploymentKeys", nodes=(dict[str, NodeSpec], {}),
                              recovery=(Recovery, Recovery()), limits=(Limits, Limits()))
    lifecycle = create_model("LifecycleKeys", lifecycle=(LifecycleConfig, LifecycleConfig()))
    from powerplane_conformance.settings import ConformanceSettings

    conformance = create_model("ConformanceKeys",
                               conformance=(ConformanceSettings, ConformanceSettings()))
    ports = {port: [t.config for t in registry.port_types(port).values()] for port in PORTS}
    yield "Deployment keys", [deployment], None
    yield "Lifecycle keys", [lifecycle], ports
    yield "Conformance target keys", [conformance], None
    for name, ctype in sorted(registry.channel_types.items()):
        yield f"Channel type `{name}`", [ctype.config], None


def value_problems(reference: str) -> list[str]:
    known = documented_paths(reference)
    registry = load_plugins()
    problems: list[str] = []
    for marker, roots, ports in config_sections(reference):
        for key, type_cell, meaning in key_rows(section(reference, marker)):
            if key in NOT_MODEL_FIELDS:
                continue
            port = re.fullmatch(r"lifecycle\.(cluster|storage|store)\.type", key)
            if port:  # the types core registers, named in the cell
                names = set(re.findall(r"`([^`]*)`", type_cell))
                unknown = names - set(registry.port_types(port.group(1)))
                problems += [f"{key}: {n!r} is not a registered type" for n in sorted(unknown)]
                continue
            candidates = resolve(roots, key, ports)
            if not candidates:
                problems.append(f"{marker}: {key} is documented and names no field")
                continue
            problems += [f"{marker}: {p}" for p in check_row(key, type_cell, meaning,
                                                              candidates, known)]
    return problems


def test_every_documented_default_bound_and_allowed_value_is_the_model_s(
    reference: str,
) -> None:
    problems = value_problems(reference)
    assert not problems, "docs/reference.md states what the models do not:\n" + "\n".join(
        problems)


def test_the_value_check_catches_a_wrong_default_bound_and_value_list() -> None:
    from powerplane.sim.channel import SimulatedConfig

    def check(type_cell: str, key: str = "latency_ms", meaning: str = "") -> list[str]:
        return check_row(key, type_cell, meaning, resolve([SimulatedConfig], key), set())

    assert check("number ≥ 0, `0`") == []
    assert check("number ≥ 0, `5`")  # the default
    assert check(f"number 0{DASH}10, `0`")  # the bounds
    assert check("number, `0`")  # bounds not stated
    assert check("`full` (default) | `on-only` | `none`", "readback") == []
    assert check("`full` (default) | `none`", "readback")  # a value left out
    assert check("`none` (default) | `on-only` | `full`", "readback")  # the default
    assert check("list of verbs, `[]`", "verbs")
    assert check("bool, `true`", "graceful") == []
    assert check("string, `true`", "graceful")  # a bool not called one
    assert check("bool, `1`", "graceful")  # 1 is not true
    assert check("int ≥ 1, none", "session_limit") == []
    assert check("int ≥ 1, required", "session_limit")


# --- exit codes ------------------------------------------------------------------------------

def error_classes() -> dict[str, type[Exception]]:
    """Every ``PowerplaneError`` subclass of core and the in-tree distributions, by name."""
    import importlib
    import pkgutil

    from powerplane.errors import PowerplaneError

    for package in ("powerplane", "powerplane_conformance", "powerplane_demo",
                    "powerplane_kubernetes"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not info.name.endswith("__main__") and ".template" not in info.name:
                importlib.import_module(info.name)

    def walk(cls: type[Exception]) -> Iterator[type[Exception]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    return {cls.__name__: cls for cls in walk(PowerplaneError)}


def test_the_exit_code_table_is_what_each_error_class_exits_with(reference: str) -> None:
    from powerplane.cli._common import INTERRUPTED

    body = section(reference, "Exit codes")
    table: dict[int, set[str]] = {}
    for line in body.splitlines():
        if m := re.match(r"\|\s*`(\d+)`\s*\|", line):
            row = cells(line)
            table[int(m.group(1))] = set(re.findall(r"`(\w+)`", row[2] if len(row) > 2 else ""))
    assert set(table) == {0, 1, 2, 3, INTERRUPTED}, sorted(table)
    classes = error_classes()
    wrong = []
    for code, names in table.items():
        for name in sorted(names):
            if name not in classes:
                wrong.append(f"`{code}`: {name} is not an error class")
            elif getattr(classes[name], "exit_code", None) != code:
                wrong.append(f"`{code}`: {name} exits {classes[name].exit_code}")  # type: ignore[attr-defined]
    # every error class is in its code's row, itself or through a base class named there
    for name, cls in sorted(classes.items()):
        code = cls.exit_code  # type: ignore[attr-defined]
        named = table.get(code, set())
        if not any(base.__name__ in named for base in cls.__mro__):
            wrong.append(f"{name} (exit {code}, {cls.__module__}) is in no row of its code")
    assert not wrong, "docs/reference.md, Exit codes:\n" + "\n".join(wrong)


# --- the command line: usage of every option, defaults and ranges, commands that exist --------

def option_rows(body: str) -> dict[str, str]:
    """First cell (without backticks) -> meaning, for every option row of a section."""
    out = {}
    for line in body.splitlines():
        if re.match(r"\|\s*`-", line):
            row = cells(line)
            out[row[0].replace("`", "")] = row[1]
    return out


def _same_number(a: str, b: object) -> bool:
    try:
        return float(a) == float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def option_problems(path: str, cmd: click.Command, ctx: click.Context, body: str) -> list[str]:
    rows = option_rows(body)
    problems = []
    shown: dict[str, click.Option] = {}
    for param in cmd.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden and "--help" not in param.opts:
            record = param.get_help_record(ctx)
            assert record is not None
            shown[record[0]] = param
    for usage in sorted(rows.keys() - shown.keys()):
        first = usage.split()[0].rstrip(",")
        like = sorted(u for u in shown if u.split()[0].rstrip(",") == first)
        problems.append(f"{path}: `{usage}` is documented; --help shows {like}")
    for usage, param in shown.items():
        meaning = rows.get(usage)
        if meaning is None:
            continue  # the name check above says which
        default = param.default
        found = re.search(r"\(default:? (?:`([^`]+)`|([^`;:),\s]+))", meaning)
        stated = (found.group(1) or found.group(2)) if found else None
        plain_default = (isinstance(default, (int, float, str)) and not isinstance(default, bool)
                         and default != "" and "--output" not in param.opts)
        if stated and plain_default and not (stated == str(default)
                                             or _same_number(stated, default)):
            problems.append(f"{path} {usage}: documented default {stated!r}; "
                            f"--help {default!r}")
        elif plain_default and not stated and not re.search(
                rf"\b{re.escape(str(default))}\b.*default|default.*\b{re.escape(str(default))}\b",
                meaning):
            problems.append(f"{path} {usage}: default {default!r} not stated")
        if isinstance(param.type, click.types._NumberRangeBase):
            lo, hi = param.type.min, param.type.max
            words = []
            if lo is not None:
                words.append(f"{'>' if param.type.min_open else '≥'} {lo:g}")
            if hi is not None:
                words.append(f"{'<' if param.type.max_open else '≤'} {hi:g}")
            want = (f"{lo:g}{DASH}{hi:g}" if lo is not None and hi is not None
                    and not param.type.min_open and not param.type.max_open
                    else ", ".join(words))
            if want not in meaning:
                problems.append(f"{path} {usage}: its range {want!r} is not stated")
    return problems


def test_every_option_row_is_what_help_shows(reference: str) -> None:
    problems: list[str] = []
    for path, cmd, ctx in commands():
        problems += option_problems(path, cmd, ctx, section(reference, f"`{path}`"))
    assert not problems, "docs/reference.md, the command line:\n" + "\n".join(problems)


def test_every_documented_command_exists(reference: str) -> None:
    real = {path for path, _, _ in commands()}
    documented = {m.group(1) for heading, _ in sections(reference)
                  if (m := re.fullmatch(r"### `(powerplane(?: [\w-]+)*)`", heading))}
    assert documented == real, (sorted(documented - real), sorted(real - documented))


def test_the_reference_says_which_distribution_adds_each_command(reference: str) -> None:
    from powerplane.cli import BUILTIN, EXTENSION_GROUP
    from powerplane.cli._extensions import scan

    intro = section(reference, "The command line")
    sentence = next(s for s in re.split(r"\.\s", intro) if "Commands come from" in s)
    for name, ext in scan(EXTENSION_GROUP).items():
        assert re.search(rf"{re.escape(ext.dist)}\s+\([^)]*`{re.escape(name)}`", sentence), (
            name, ext.dist, sentence)
    for name in BUILTIN:
        assert f"`{name}`" in sentence.split("powerplane-")[0], (name, sentence)


def test_a_feed_s_keys_have_the_top_level_keys_defaults_and_bounds(reference: str) -> None:
    """The reference says each ``feeds.<feed>.*`` key has "the same meaning and default as
    the key of the same name above": the feed model's field and the channel's agree."""
    ctype = load_plugins().channel_types["pdu"]
    body = section(reference, "Channel type `pdu`")
    feed_keys = [k for k in table_keys(body) if k.startswith("feeds.") and k.count(".") == 1]
    assert "feeds.protocol" in feed_keys
    feeds = ctype.config.model_fields["feeds"]
    (feed_model,) = _models(feeds.annotation)
    differ = []
    for key in feed_keys:
        name = key.split(".", 1)[1]
        top, feed = ctype.config.model_fields[name], feed_model.model_fields[name]
        if (own_default(top), model_bounds(top), model_allowed(top)) != (
                own_default(feed), model_bounds(feed), model_allowed(feed)):
            differ.append(name)
    assert not differ, f"feed keys that are not the top-level key's: {differ}"


def test_the_timeouts_model_is_as_documented(reference: str) -> None:
    from powerplane import Timeouts

    body = section(reference, "### `Timeouts`")
    m = re.search(r"`Timeouts\(connect_s=([\d.]+), read_s=([\d.]+)\)`", body)
    assert m, "the Timeouts section states no defaults"
    assert (float(m.group(1)), float(m.group(2))) == (Timeouts().connect_s, Timeouts().read_s)
    upper = re.search(r"above 0, at most ([\d,]+)", body)
    assert upper, "the Timeouts section states no bounds"
    for name in ("connect_s", "read_s"):
        bounds, finite = model_bounds(Timeouts.model_fields[name])
        assert bounds == {"gt": 0.0, "le": _number(upper.group(1))} and finite, (name, bounds)
