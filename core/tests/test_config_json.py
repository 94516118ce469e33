"""A JSON deployment file: read by the standard library's decoder, under YAML's bounds.

A file named ``*.json`` is JSON; a file that starts with ``{`` is read as JSON when it is
JSON, else as YAML. Duplicate keys and ``NaN``/``Infinity`` are refused, the bounds are
YAML's (nesting, nodes, the length of a number, the size), and every problem names its
line, found (only then) by the YAML pass over the same text. (A big generated fleet read
by the decoder alone: ``test_config_scale.py``.)
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powerplane import ConfigError, _yaml, load_config
from powerplane._json import load_json
from powerplane._yaml import MAX_DEPTH, MAX_NODES, node_bound
from powerplane.config import read_config
from powerplane.errors import ConfigProblem

DOC: dict[str, Any] = {
    "channels": {"lab": {"type": "simulated", "machines": {"m1": "on", "m2": "off"},
                         "latency_ms": 2.5}},
    "nodes": {
        "n1": {"site": "plant-a", "labels": {"rack": "r1", "role": "worker"},
               "channels": [{"channel": "lab", "target": "m1"}]},
        "n2": {"classification": "replaceable", "channels": [{"channel": "lab", "target": "m2"}]},
    },
    "recovery": {"attendedRack": False, "sites": {"plant-a": {"attended": True}}},
    "limits": {"per_endpoint": 2, "total": 17, "timeout_s": 30},
}

YAML = """\
channels:
  lab:
    type: simulated
    machines: {m1: 'on', m2: 'off'}
    latency_ms: 2.5
nodes:
  n1:
    site: plant-a
    labels: {rack: r1, role: worker}
    channels: [{channel: lab, target: m1}]
  n2:
    classification: replaceable
    channels: [{channel: lab, target: m2}]
recovery:
  attendedRack: false
  sites: {plant-a: {attended: true}}
limits: {per_endpoint: 2, total: 17, timeout_s: 30}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.source == str(path)
    return [str(p) for p in info.value.problems]


@pytest.fixture
def yaml_passes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per pass over libyaml's events (``True``: the lines pass)."""
    seen: list[bool] = []
    build = _yaml._Builder.build

    def counted(self: Any, events: Any) -> Any:
        seen.append(self.track)
        return build(self, events)

    monkeypatch.setattr(_yaml._Builder, "build", counted)
    return seen


# -- accepted, and the same as YAML ------------------------------------------------------


def test_a_json_and_a_yaml_file_of_the_same_content_give_the_same_deployment(
    tmp_path: Path, yaml_passes: list[bool],
) -> None:
    from_yaml = load_config(write(tmp_path, "d.yaml", YAML))
    assert yaml_passes == [False]
    from_json = load_config(write(tmp_path, "d.json", json.dumps(DOC, indent=2)))
    assert yaml_passes == [False]  # the JSON file: no pass over libyaml's events
    assert from_json.source.endswith("d.json")
    for field in ("nodes", "recovery", "limits", "lifecycle", "raw"):
        assert getattr(from_json, field) == getattr(from_yaml, field), field
    assert from_json.channels.keys() == from_yaml.channels.keys()
    assert from_json.channels["lab"].config == from_yaml.channels["lab"].config
    assert from_json.channels["lab"].type is from_yaml.channels["lab"].type
    assert from_json.limits.total == 17 and from_json.nodes["n1"].site == "plant-a"


def test_a_json_file_is_known_by_its_extension(
    tmp_path: Path, yaml_passes: list[bool],
) -> None:
    """``*.json`` is JSON whatever it starts with: a trailing comma, which YAML's flow
    mapping takes, is a JSON syntax error at its line."""
    text = "\n\n" + json.dumps(DOC, indent=2)
    dep = load_config(write(tmp_path, "fleet.JSON", text))
    assert yaml_passes == [] and set(dep.nodes) == {"n1", "n2"}
    comma = '{\n  "channels": {},\n  "nodes": {},\n}\n'
    assert problems(write(tmp_path, "comma.json", comma)) == [
        "(top level) (line 4): JSON syntax error: Expecting property name enclosed in "
        "double quotes (column 1)"]
    assert load_config(write(tmp_path, "comma.yaml", comma)).nodes == {}  # YAML takes it


def test_a_file_that_starts_with_a_brace_is_read_as_json(
    tmp_path: Path, yaml_passes: list[bool],
) -> None:
    dep = load_config(write(tmp_path, "powerplane.yaml", "  \n" + json.dumps(DOC)))
    assert yaml_passes == []  # the standard library's decoder read it
    assert set(dep.nodes) == {"n1", "n2"}
    assert load_config(write(tmp_path, "conf", json.dumps(DOC))).limits.total == 17
    assert yaml_passes == []


def test_a_yaml_flow_mapping_that_is_not_json_is_still_yaml(
    tmp_path: Path, yaml_passes: list[bool],
) -> None:
    text = "{channels: {lab: {type: simulated, machines: {m1: 'on'}}},\n nodes: {}}\n"
    dep = load_config(write(tmp_path, "flow.yaml", text))
    assert set(dep.channels) == {"lab"}
    assert yaml_passes == [False]
    # JSON with a YAML-only value: YAML reads it, as before (``NaN``: a string)
    data, _, _ = read_config(write(tmp_path, "nan.yaml", '{"a": NaN}'))
    assert data == {"a": "NaN"}


def test_json_values_are_what_yaml_reads_from_the_same_text() -> None:
    text = ('{"a": 17, "b": -0, "c": 1.5, "d": 1e3, "e": 1E-2, "f": true, "g": null,'
            ' "h": "on", "i": "017", "j": [], "k": {}, "l": "\\u00e9\\ud83d\\ude00"}')
    data, _ = load_json(text, "v.json")
    assert data == _yaml.load_yaml(_yaml.as_yaml(text), "v.yaml")[0]
    assert data["d"] == 1000.0 and type(data["d"]) is float and data["h"] == "on"
    assert data["l"] == "\u00e9\U0001f600"


# -- refused, with its line ------------------------------------------------------------------


def test_a_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    text = ('{\n  "channels": {},\n  "nodes": {\n    "n1": {\n      "site": "a",\n'
            '      "site": "b"\n    }\n  }\n}\n')
    assert problems(write(tmp_path, "dup.json", text)) == [
        "nodes.n1.site (line 6): duplicate key 'site' (first defined at line 5)"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_with_their_line(tmp_path: Path, constant: str) -> None:
    text = ('{\n  "channels": {"lab": {"type": "simulated", "note": "NaN Infinity",\n'
            f'    "latency_ms": {constant}}}}},\n  "nodes": {{}}\n}}\n')
    assert problems(write(tmp_path, "nan.json", text)) == [
        f"(top level) (line 3): {constant} is not JSON: a number must be finite"]


def test_a_number_too_big_for_a_float_is_refused_as_in_yaml(tmp_path: Path) -> None:
    """``1e999`` reads as infinity in both; the number key refuses it at its line."""
    yaml_text = ("channels:\n  lab:\n    type: simulated\n    latency_ms: 1e999\n")
    json_text = ('{\n  "channels": {\n    "lab": {\n      "type": "simulated",\n'
                 '      "latency_ms": 1e999\n    }\n  }\n}\n')
    from_yaml = problems(write(tmp_path, "inf.yaml", yaml_text))
    from_json = problems(write(tmp_path, "inf.json", json_text))
    assert from_yaml == [p.replace("line 5", "line 4") for p in from_json]
    assert len(from_json) == 1 and from_json[0].startswith("channels.lab.latency_ms (line 5)")


def test_nesting_deeper_than_the_bound_is_refused_with_its_line() -> None:
    def nested(depth: int) -> str:
        return '{\n"a":\n' + "[" * (depth - 1) + "]" * (depth - 1) + "\n}"

    data, _ = load_json(nested(MAX_DEPTH), "ok.json")
    assert data["a"] is not None
    with pytest.raises(ConfigError) as info:
        load_json(nested(MAX_DEPTH + 1), "deep.json")
    (problem,) = info.value.problems
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels" and problem.line == 3
    with pytest.raises(ConfigError) as info:  # past the decoder's own recursion: the same
        load_json(nested(200_000), "deeper.json")
    assert info.value.problems == (
        ConfigProblem("", f"nesting deeper than {MAX_DEPTH} levels", 3),)
    assert gc.isenabled()


def test_the_node_bound_and_a_number_too_long_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert node_bound(2 * MAX_NODES) == MAX_NODES  # a small file: MAX_NODES nodes
    monkeypatch.setattr(_yaml, "MAX_NODES", 1000)  # the same rule, smaller
    many = "[" + ",".join(["0"] * 1000) + "]"  # the list and its 1000 items: 1001 nodes
    with pytest.raises(ConfigError) as info:
        load_json(many, "many.json")
    (problem,) = info.value.problems
    assert problem.message.startswith("more than 1000 nodes") and problem.line == 1
    data, _ = load_json("[" + ",".join(["0"] * 999) + "]", "fits.json")
    assert len(data) == 999
    with pytest.raises(ConfigError) as info:
        load_json('{\n"a": ' + "1" * 1001 + "}", "long.json")
    assert info.value.problems == (
        ConfigProblem("a", "number longer than 1000 characters", 2),)


def test_a_json_file_over_the_size_bound_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from powerplane import files  # the deployment's reads and their bound

    path = write(tmp_path, "big.json", json.dumps(DOC))
    monkeypatch.setattr(files, "MAX_BYTES", 100)
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert "larger than 100 bytes" in str(info.value)


def test_a_validation_problem_in_a_json_file_names_its_line(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(DOC))
    doc["nodes"]["n2"]["sitee"] = "x"
    doc["limits"]["total"] = "many"
    text = json.dumps(doc, indent=2)
    lines = text.splitlines()
    sitee = next(i for i, row in enumerate(lines) if '"sitee"' in row) + 1
    total = next(i for i, row in enumerate(lines) if '"total"' in row) + 1
    found = problems(write(tmp_path, "bad.json", text))
    assert f"nodes.n2.sitee (line {sitee}): unknown key; did you mean 'site'?" in found
    assert any(p.startswith(f"limits.total (line {total}):") for p in found), found
    # tabs and CRLF line ends (JSON whitespace): the same lines
    tabbed = json.dumps(doc, indent="\t").replace("\n", "\r\n")
    found = problems(write(tmp_path, "tabbed.json", tabbed))
    assert f"nodes.n2.sitee (line {sitee}): unknown key; did you mean 'site'?" in found


def test_a_json_syntax_error_names_its_line(tmp_path: Path) -> None:
    text = '{\n  "channels": {},\n  "nodes" {}\n}\n'
    assert problems(write(tmp_path, "syntax.json", text)) == [
        "(top level) (line 3): JSON syntax error: Expecting ':' delimiter (column 11)"]


# -- generated: the lines pass reads every JSON document as the decoder does ----------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from([None, 1, 2, "\t"]), st.booleans())
def test_yaml_reads_every_json_document_to_the_same_data_and_lines(
    value: Any, indent: int | str | None, ascii_only: bool,
) -> None:
    """What the line lookup relies on: the YAML pass over a JSON text builds the same
    document, so a path of the data has its line."""
    text = json.dumps({"v": value}, indent=indent, ensure_ascii=ascii_only)
    data, lines = load_json(text, "g.json")
    again, _ = _yaml.load_yaml(_yaml.as_yaml(text), "g.yaml")
    assert json.dumps(again) == json.dumps(data)
    assert lines[("v",)] >= 1 and len(lines) >= 2
