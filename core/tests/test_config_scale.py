"""Config loading at scale: libyaml's parser, one pass with no collector runs, no per-node
model copy, a node bound that grows with the file, and lines still named at node 9,999.
(A generated fleet's JSON file at scale: ``test_config_json.py``.)"""

from __future__ import annotations

import gc
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from powerplane import (
    ChannelType,
    ConfigError,
    _json,
    _yaml,
    hookimpl,
    load_config,
    parse_config,
)
from powerplane._yaml import MAX_NODES, load_yaml, node_bound
from powerplane.cli._common import collector_off
from powerplane.config import read_config
from powerplane.nodes import NodeSpec
from powerplane.plugins import load_plugins

NODES = 10_000


def deployment(nodes: int, node_row: Callable[[int], list[str]] | None = None) -> str:
    """One simulated channel with a machine per node; each node: site, labels, one channel."""
    rows = ["channels:", "  lab:", "    type: simulated", "    machines:"]
    rows += [f"      m{i:05d}: 'on'" for i in range(nodes)]
    rows.append("nodes:")
    for i in range(nodes):
        if node_row is not None and (custom := node_row(i)):
            rows += custom
            continue
        rows += [f"  node-{i:05d}:", f"    site: site-{i % 20}",
                 f"    labels: {{rack: r{i % 500}, role: worker}}",
                 f"    channels: [{{channel: lab, target: m{i:05d}}}]"]
    return "\n".join(rows) + "\n"


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations of the garbage collector's passes while the test runs."""
    seen: list[int] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)


@pytest.mark.perf
def test_a_10k_node_file_is_read_in_one_pass_with_no_collector_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collections: list[int]
) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text(deployment(NODES))

    def pure(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pure-Python parser was used")

    monkeypatch.setattr(yaml, "parse", pure)
    during: list[int] = []
    build = _yaml._Builder._build

    def counted(self: Any, events: Any) -> Any:
        before = len(collections)
        try:
            return build(self, events)
        finally:
            during.append(len(collections) - before)

    monkeypatch.setattr(_yaml._Builder, "_build", counted)
    assert gc.isenabled()
    with collector_off():  # as the CLI loads a file in its own process
        data, lines, _ = read_config(path)
    assert getattr(lines, "parser", None) == "libyaml"
    assert len(data["nodes"]) == NODES
    assert during == [0]  # one pass over libyaml's events, no collector run
    assert gc.isenabled()  # and the collector is back as it was
    with collector_off():
        assert lines[("nodes", "node-09999", "channels", 0, "target")] == 5 * NODES + 5
    assert during == [0, 0]  # the lines: libyaml's pass, only when asked for, no collector run
    gc.disable()
    try:
        load_yaml("a: 1\n", "x")
        assert not gc.isenabled()  # off stays off
    finally:
        gc.enable()


def test_the_collector_is_restored_after_a_refused_file() -> None:
    with pytest.raises(ConfigError):
        load_yaml("a: [" * 100 + "\n", "x")
    assert gc.isenabled()


def test_an_error_in_node_9999_names_its_path_and_line(tmp_path: Path) -> None:
    def bad(i: int) -> list[str]:
        if i != 9_999:
            return []
        return ["  node-09999:", "    site: site-1", "    sitee: x",
                "    channels: [{channel: lab, target: 7}]"]

    path = tmp_path / "powerplane.yaml"
    path.write_text(deployment(NODES, bad))
    first = NODES + 6 + 4 * 9_999  # the line of node-09999's name
    with pytest.raises(ConfigError) as info:
        load_config(path)
    problems = {str(p) for p in info.value.problems}
    assert problems == {
        f"nodes.node-09999.sitee (line {first + 2}): unknown key; did you mean 'site'?",
        f"nodes.node-09999.channels[0].target (line {first + 3}): expected a machine name "
        "(a non-empty string)",
    }


def test_a_duplicate_and_a_bad_tag_in_node_9999_name_their_lines(tmp_path: Path) -> None:
    def bad(i: int) -> list[str]:
        if i != 9_999:
            return []
        return ["  node-09999:", "    site: !!python/name:os.system", "    site: b"]

    path = tmp_path / "powerplane.yaml"
    path.write_text(deployment(NODES, bad))
    first = NODES + 6 + 4 * 9_999
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert f"nodes.node-09999.site (line {first + 1}): tag !!python/name:os.system" in text
    assert (f"nodes.node-09999.site (line {first + 2}): duplicate key 'site' "
            f"(first defined at line {first + 1})") in text


def test_nodes_are_validated_once_with_no_model_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def copy(*args: object, **kwargs: object) -> None:
        raise AssertionError("a node was copied")

    monkeypatch.setattr(NodeSpec, "model_copy", copy)
    path = tmp_path / "powerplane.yaml"
    path.write_text(deployment(100))
    dep = load_config(path)
    assert dep.nodes["node-00099"].channels[0].target == "m00099"


class _PairConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _pair(raw: Any) -> tuple[str, int]:
    """'pdu:3' -> ('pdu', 3); a list is a TypeError (a plugin's parser may raise one)."""
    if isinstance(raw, list):
        raise TypeError("expected NAME:OUTLET, not a list")
    name, _, outlet = str(raw).partition(":")
    if not outlet.isdigit():
        raise ValueError("expected NAME:OUTLET")
    return name, int(outlet)


class _PairPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType("pairs", _PairConfig, lambda n, c: None,  # type: ignore[arg-type,return-value]
                             target=_pair))


def test_targets_are_parsed_by_the_channel_type_as_the_node_is_validated() -> None:
    reg = load_plugins()
    reg.add_module("pairs", _PairPlugin())
    text = ("channels:\n  p: {type: pairs}\n  q: {type: pairs, nope: 1}\n"
            "nodes:\n  n1:\n    channels: [{channel: p, target: 'a:3'}]\n"
            "  n2:\n    channels:\n      - {channel: p, target: 'a'}\n"
            "      - {channel: q, target: 'a'}\n"
            "  n3:\n    channels: [{channel: p, target: [1]}]\n"
            "  n4:\n    channels: [{channel: p}]\n")
    data, lines = load_yaml(text, "p.yaml")
    with pytest.raises(ConfigError) as info:
        parse_config(data, registry=reg, lines=lines, source="p.yaml")
    assert [str(p) for p in info.value.problems] == [
        "nodes.n2.channels[0].target (line 9): expected NAME:OUTLET",
        "nodes.n3.channels[0].target (line 12): expected NAME:OUTLET, not a list",
        "nodes.n4.channels[0].target (line 14): expected NAME:OUTLET",
        "channels.q.nope (line 3): unknown key",  # q's own problem; its targets go unparsed
    ]
    good = ("channels:\n  p: {type: pairs}\n"
            "nodes:\n  n1:\n    channels: [{channel: p, target: 'a:3'}]\n")
    data, lines = load_yaml(good, "p.yaml")
    dep = parse_config(data, registry=reg, lines=lines)
    assert dep.nodes["n1"].channels[0].target == ("a", 3)


def test_the_node_bound_grows_with_the_file_so_a_big_deployment_loads() -> None:
    machines = 160_000  # 320,000 nodes: over MAX_NODES, in about 3 MB of block YAML
    text = "machines:\n" + "".join(f"  m{i:06d}: 'on'\n" for i in range(machines))
    assert 2 * machines > MAX_NODES
    data, _ = load_yaml(text, "big.yaml")
    assert len(data["machines"]) == machines
    assert node_bound(len(text)) > 2 * machines
    assert node_bound(1000) == MAX_NODES  # a small file keeps the bomb's bound


def test_the_bomb_inside_a_big_file_still_stops() -> None:
    padding = "".join(f"p{i:06d}: 1\n" for i in range(100_000))  # 1 MB: bound ~333,000
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{n}: &{n} [{','.join(['*' + p] * 10)}]\n" for p, n in itertools.pairwise("abcdefghij"))
    with pytest.raises(ConfigError) as info:
        load_yaml(padding + bomb, "bomb.yaml")
    assert f"more than {node_bound(len(padding + bomb))} nodes, aliases expanded" in str(
        info.value)


def test_a_config_from_a_pipe_is_refused_unread_and_a_file_read_up_to_the_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A pipe is not a regular file: refused at once (it could block forever), its writer
    never read; a regular file is read up to the bound. (Pipes were read up to the bound
    before a FIFO with no writer was found to block the command forever.)"""
    import os

    from powerplane import files  # the deployment's reads and their bound

    read, write = os.pipe()
    try:
        os.write(write, deployment(50).encode()[:4096])
        with pytest.raises(ConfigError) as info:
            read_config(f"/dev/fd/{read}")
        assert "is a FIFO (named pipe), not a regular file" in str(info.value)
        assert len(os.read(read, 8192)) == 4096  # nothing of it was read
    finally:
        os.close(read)
        os.close(write)
    path = tmp_path / "fifty.yaml"
    path.write_text(deployment(50))
    data, _, _ = read_config(path)
    assert len(data["nodes"]) == 50
    monkeypatch.setattr(files, "MAX_BYTES", 1000)
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert "larger than 1000 bytes" in str(info.value)


@pytest.mark.perf
def test_a_big_json_file_is_read_by_the_decoder_alone_with_no_collector_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    yaml_passes: list[bool] = []  # one entry per pass over libyaml's events (True: lines)
    build = _yaml._Builder.build

    def counted_build(self: Any, events: Any) -> Any:
        yaml_passes.append(self.track)
        return build(self, events)

    monkeypatch.setattr(_yaml._Builder, "build", counted_build)
    nodes = 3_000
    doc = {"channels": {"lab": {"type": "simulated",
                                "machines": {f"m{i:05d}": "on" for i in range(nodes)}}},
           "nodes": {f"node-{i:05d}": {"site": f"site-{i % 20}",
                                       "labels": {"rack": f"r{i % 500}", "role": "worker"},
                                       "channels": [{"channel": "lab", "target": f"m{i:05d}"}]}
                     for i in range(nodes)}}
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(doc, indent=2))
    collections: list[int] = []
    during: list[int] = []
    decoder = _json._JSON

    class Counted:
        def decode(self, text: str) -> Any:
            before = len(collections)
            try:
                return decoder.decode(text)
            finally:
                during.append(len(collections) - before)

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(_json, "_JSON", Counted())
    gc.callbacks.append(callback)
    try:
        with collector_off():  # as the CLI loads a file in its own process
            data, lines, _ = read_config(path)
    finally:
        gc.callbacks.remove(callback)
    assert yaml_passes == []  # no pass over libyaml's events
    assert during == [0]  # one decode, and no collector pass while it built
    assert gc.isenabled()
    assert data == doc
    # the lines, asked for: one YAML pass over the same text, only then
    rows = path.read_text().splitlines()
    target = max(i for i, row in enumerate(rows) if '"target": "m02999"' in row) + 1
    assert lines[("nodes", "node-02999", "channels", 0, "target")] == target
    assert yaml_passes == [True]


def test_library_loading_leaves_the_collector_as_the_caller_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GC tuning lives in the CLI process only: a library caller's collector stays on
    while a document is built (and off, when it turned it off)."""
    path = tmp_path / "powerplane.yaml"
    path.write_text(deployment(50))
    during: list[bool] = []
    build = _yaml._Builder.build

    def recorded(self: Any, events: Any) -> Any:
        during.append(gc.isenabled())
        return build(self, events)

    monkeypatch.setattr(_yaml._Builder, "build", recorded)
    load_config(path)
    assert during == [True] and gc.isenabled()
    gc.disable()
    try:
        load_config(path)
        assert during == [True, False] and not gc.isenabled()
    finally:
        gc.enable()
