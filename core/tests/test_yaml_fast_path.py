"""Big block YAML files and YAML problems, read by the one YAML path (libyaml's events).

A second, line-by-line grammar for plain block YAML once read big generated files first;
it is gone: big generated fleets are written as JSON (``test_config_json.py``), and every
YAML file is read by libyaml's events, which report every problem and its line.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from powerplane import ConfigError, _yaml
from powerplane._yaml import load_yaml
from powerplane.cli._common import collector_off
from powerplane.errors import ConfigProblem

# -- errors ---------------------------------------------------------------------------

ACCEPTED = "!!str, !!int, !!float, !!bool, !!null, !!timestamp, !!seq, !!map"


@pytest.mark.parametrize(("text", "problem"), [
    ("nodes:\n  n1:\n    site: a\n    site: b\n",
     ConfigProblem("nodes.n1.site", "duplicate key 'site' (first defined at line 3)", 4)),
    ("nodes:\n  n1:\n    site: !bar x\n",
     ConfigProblem("nodes.n1.site", f"tag !bar is not accepted on a scalar; accepted tags: "
                                    f"{ACCEPTED}", 3)),
    ("a: &x 1\nb: *x\nc: {d: 1, d: 2}\n",
     ConfigProblem("c.d", "duplicate key 'd' (first defined at line 3)", 3)),
    ("a: 1\n  b: 2\n",
     ConfigProblem("", "YAML syntax error: mapping values are not allowed in this context", 2)),
    ("a:\n  - x\n  y: 1\n",
     ConfigProblem("", "YAML syntax error: did not find expected '-' indicator", 3)),
    ("a: 1\r\na: 2\r\n", ConfigProblem("a", "duplicate key 'a' (first defined at line 1)", 2)),
    ("a:\n\tb: 1\n",
     ConfigProblem("", "YAML syntax error: found character that cannot start any token", 2)),
])
def test_a_yaml_problem_is_reported_with_its_line(text: str, problem: ConfigProblem) -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml(text, "f.yaml")
    assert caught.value.problems == (problem,)
    assert caught.value.source == "f.yaml"


def big_block_file(nodes: int) -> str:
    """As ``bench/bench_config_load.py`` writes it."""
    rows = ["channels:\n  lab:\n    type: simulated\n    machines:\n"]
    rows += [f"      m{i:07d}: 'on'\n" for i in range(nodes)]
    rows.append("nodes:\n")
    rows += [f"  node-{i:07d}:\n    site: site-{i % 20}\n"
             f"    labels: {{rack: r{i % 500}, role: worker}}\n"
             f"    channels: [{{channel: lab, target: m{i:07d}}}]\n" for i in range(nodes)]
    return "".join(rows)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per full-path build from libyaml's events (``track``: the lines pass)."""
    seen: list[bool] = []
    build = _yaml._Builder.build

    def counted(self: Any, events: Any) -> Any:
        seen.append(self.track)
        return build(self, events)

    monkeypatch.setattr(_yaml._Builder, "build", counted)
    return seen


@pytest.mark.perf
def test_a_big_generated_block_file_is_read_in_one_pass_with_no_collector_run(
    builds: list[bool], monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = big_block_file(3_000)
    collections: list[int] = []
    during: list[int] = []
    build = _yaml._Builder._build

    def counted(self: Any, events: Any) -> Any:
        before = len(collections)
        try:
            return build(self, events)
        finally:
            during.append(len(collections) - before)

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(_yaml._Builder, "_build", counted)
    gc.callbacks.append(callback)
    try:
        with collector_off():  # as the CLI loads a file in its own process
            data, lines = load_yaml(text, "big.yaml")
    finally:
        gc.callbacks.remove(callback)
    assert builds == [False]  # one pass over libyaml's events, no lines yet
    assert during == [0]  # and no collector pass while it built
    assert gc.isenabled()
    assert len(data["nodes"]) == 3_000
    assert data["nodes"]["node-0002999"] == {
        "site": "site-19", "labels": {"rack": "r499", "role": "worker"},
        "channels": [{"channel": "lab", "target": "m0002999"}]}
    assert data["channels"]["lab"]["machines"]["m0000000"] == "on"
    # the lines, asked for: the second pass, as before
    assert lines[("nodes", "node-0002999", "channels", 0, "target")] == 5 + 3_000 + 4 * 2_999 + 4
    assert builds == [False, True]


def test_anchors_and_merge_keys_are_read_in_one_pass(builds: list[bool]) -> None:
    data, _ = load_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n", "m.yaml")
    assert data == {"base": {"x": 1}, "other": {"y": 2, "x": 1}}
    assert builds == [False]


def test_a_small_file_is_read_in_one_pass(builds: list[bool]) -> None:
    data, _ = load_yaml(big_block_file(2), "small.yaml")
    assert len(data["nodes"]) == 2
    assert builds == [False]


def test_equal_flow_mappings_share_no_container() -> None:
    data, _ = load_yaml("a:\n  x: {rack: r1, role: w}\n  y: {rack: r1, role: w}\n", "s.yaml")
    data = data["a"]
    assert data["x"] == data["y"] and data["x"] is not data["y"]
    data["x"]["rack"] = "r2"
    assert data["y"]["rack"] == "r1"
