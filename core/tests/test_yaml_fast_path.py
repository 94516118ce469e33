"""The fast first pass over block YAML (``_yaml_block.read_block``) against the full path.

For every text the first pass accepts it must build exactly what libyaml's events build
(the same values, the same Python types, the same key order) and count the same nodes;
anything else it must decline, so the full path reads the text and reports as before.
"""

from __future__ import annotations

import datetime
import gc
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from powerplane import ConfigError, _yaml, _yaml_block
from powerplane._yaml import MAX_DEPTH, load_yaml, node_bound
from powerplane._yaml_block import DECLINE
from powerplane.errors import ConfigProblem


def full(text: str) -> tuple[Any, int] | ConfigError:
    """The full path's document and its count of nodes, or its error."""
    bound = node_bound(len(text.encode("utf-8", "replace")))
    try:
        root = _yaml._full_pass(text, "t.yaml", bound)
    except ConfigError as exc:
        return exc
    builder = _yaml._Builder(max_nodes=10**9)
    events, dispose = _yaml._events(text)
    try:
        builder.build(events)
    finally:
        dispose()
    return root, builder.nodes


def fast(text: str, max_nodes: int | None = None) -> Any:
    """The first pass as ``load_yaml`` runs it (its exceptions are not caught here)."""
    if max_nodes is None:
        return _yaml._first_pass(text, node_bound(len(text.encode("utf-8", "replace"))))
    builder = _yaml._Builder(max_nodes=max_nodes)

    def resolve(value: str) -> Any:
        return builder.plain(_yaml._UNMARKED, value, 0)

    root = _yaml_block.read_block(text, resolve, _yaml._RESOLVED_FIRST, max_nodes, MAX_DEPTH)
    return DECLINE if builder.problems else root


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, datetime.datetime):
        return a == b and a.tzinfo == b.tzinfo
    return bool(a == b)


def check(text: str) -> bool:
    """Declined, or exactly the full path's document and node count; True if accepted."""
    got = fast(text)
    if got is DECLINE:
        return False
    expected = full(text)
    assert not isinstance(expected, ConfigError), (text, got, expected.problems)
    root, nodes = expected
    assert same(got, root), (text, got, root)
    if root is not None:  # the same count of nodes: accepted at it, declined one below
        assert same(fast(text, max_nodes=nodes), root)
        assert fast(text, max_nodes=nodes - 1) is DECLINE, text
    return True


# text -> True: the first pass must take it; False: it must decline
HAND_PICKED: dict[str, bool] = {
    "a: 'on'\nb: on\nc: \"off\"\nd: yes\ne: True\nf: FALSE\n": True,
    "a: 1_000\nb: 0x1F\nc: 0o17\nd: 017\ne: 0b101\nf: +12\ng: -1\n": True,
    "a: ~\nb: null\nc: Null\nd:\ne: ''\nf: \"\"\n": True,
    "a: 1:20\nb: 190:20:30\nc: 1.5\nd: .inf\ne: -.Inf\nf: .nan\ng: 1e3\nh: 6.8523015e+5\n": True,
    "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10\n": True,
    "a: 2001-13-14\n": False,
    'a: "\\u00e9"\nb: "tab\\there"\nc: "q\\"q"\nd: "\\x41\\U0001F600\\/\\\\"\n': True,
    'a: "\\ud800"\n': False,
    'a: "\\0\\x00\\U0000FFFE\\e\\N\\_\\L\\P\\ \\a"\n': True,
    'a: "\\q"\n': False,
    "a: 'it''s'\nb: 'a # not a comment'\nc: \"# nor this\"\nd: it's\n": True,
    "key: value # comment\n# a comment line\n  # indented comment\nother: x#y\n": True,
    "a: b: c\n": False,
    "- - x\n  - y\n- z\n": True,
    "- a: 1\n  b: 2\n- - c\n-\n- d\n": True,
    "a key with spaces: v\n'quoted key': v\n\"dq key\": v\nk  : spaced colon\n": True,
    "? complex key\n: value\n": False,
    "a: b   \nc:   \nd: 'e'  \n": True,
    "a: 1\r\nb: 2\r\n": False,
    "": True,
    "# only a comment\n\n": True,
    "---\n": True,
    "--- # start\na: 1\n": True,
    "a: 1\n---\nb: 2\n": False,
    "a: 1\n...\n": False,
    "a: {}\nb: []\nc: {x: [1, {y: z}], w: []}\nd: [[a, b], [c]]\n": True,
    "a: [a, b, ]\n": False,
    "a: {x: }\n": False,
    "a: [x y, -1, 'q', \"r\"]\nb: {k: 'v', 'k2': [1]}\n": True,
    "a:\n- 1\n- 2\nb:\n  - 3\n  -\n    c: 4\n": True,
    "a: &x 1\nb: *x\n": False,
    "a: !!str 1\n": False,
    "a: !foo x\n": False,
    "<<: {a: 1}\n": False,
    "a: |\n  text\n": False,
    "a: >\n  text\n": False,
    "a: multi\n  line\n": False,
    "a: 'multi\n  line'\n": False,
    "a: [1,\n  2]\n": False,
    "a:\n\tb: 1\n": False,
    "a: 1\na: 2\n": False,
    "a: {x: 1, x: 2}\n": False,
    "1: a\n1.0: b\n": False,
    "true: a\n1: b\n": False,
    "~: a\n": False,
    "2001-12-14: a\n": False,
    "1: int key\n-2: neg\n1.5: float key\nfalse: bool key\n": True,
    "%YAML 1.1\n---\na: 1\n": False,
    "\ufeffa: 1\n": False,
    "a: \u00e9t\u00e9\nb: \u00a0nbsp\n": True,
    "a: 1\n  b: 2\n": False,
    "  a: 1\n  b: 2\n": True,
    "  a: 1\nb: 2\n": False,
    "a: -\n": False,
    "a: - b\n": False,
    "a:b\n": False,
    "a::\n": True,
    "-: 1\n": False,
    "a: b]\nc: d, e\nf: g}\n": True,
    "a: {b: c}, d\n": False,
    "a: [b] # ok\nc: [d]#no\n": False,
    "a: [b] # ok\n": True,
    "a: ---\nb: ...\n": True,
    "---: 1\n": False,
    "x: " + "1" * 1001 + "\n": False,
    "k" * 1100 + ": 1\n": False,
    "a: {" + "k" * 1100 + ": 1}\n": False,
    "a: [{" + "k" * 1100 + ": 1}]\n": False,
    "a: {'" + "k" * 1100 + "': 1}\n": False,
    "a: {k: " + "v" * 1100 + "}\n": True,
}


@pytest.mark.parametrize("text", list(HAND_PICKED), ids=lambda t: repr(t[:40]))
def test_hand_picked_documents_are_read_as_the_full_path_reads_them_or_declined(
    text: str,
) -> None:
    assert check(text) is HAND_PICKED[text]


def test_depth_at_the_bound_is_left_to_the_full_path() -> None:
    for depth in (MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        block = "".join(" " * i + "k:\n" for i in range(depth)) + " " * depth + "k: v\n"
        flow = "a: " + "[" * depth + "]" * depth + "\n"
        seqs = "- " * depth + "x\n"
        for text in (block, flow, seqs):
            check(text)
    assert fast("".join(" " * i + "k:\n" for i in range(200))) is DECLINE


# -- generated documents ------------------------------------------------------------------

PLAIN_POOL = [
    "on", "off", "yes", "no", "y", "n", "true", "False", "null", "~", "NULL", "1", "-1", "+1",
    "1_000", "0x1F", "0o17", "017", "0b11", "1:20", "1.5", "1e3", ".inf", "-.inf", ".NaN",
    "2001-12-14", "2001-12-14 21:59:43.10", "<<", "=", "a b", "a  b", "a:b", "a#b", "it's",
    "x]", "x,y", "-x", "--x", "é", "x\u00a0y", "m0000001", "site-3", "worker", "1.0", "0",
]
ALPHABET = "ab :#-?,[]{}'\"&*!|>%@`\\~.019\t\u00e9\u00a0"


@st.composite
def scalars(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.sampled_from(PLAIN_POOL))
    if kind == 1:
        return draw(st.text(alphabet=ALPHABET, max_size=6))
    if kind == 2:
        body = draw(st.text(alphabet=ALPHABET.replace("'", "") + "'", max_size=5))
        return "'" + body.replace("'", "''") + "'"
    if kind == 3:
        body = draw(st.sampled_from(["", "x", "\\u00e9", "\\n", "\\\"", "\\\\", "a b", "\\x",
                                     "#", "on", "1"]))
        return '"' + body + '"'
    return draw(st.sampled_from(PLAIN_POOL)) + " # note"


Node = Any  # ("s", text) | ("m", [(key text, node)]) | ("l", [node])


def nodes() -> st.SearchStrategy[Node]:
    leaf = scalars().map(lambda s: ("s", s))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(st.tuples(scalars(), inner), max_size=4).map(lambda kv: ("m", kv)),
            st.lists(inner, max_size=4).map(lambda items: ("l", items)),
        ),
        max_leaves=14,
    )


def flow_text(node: Node) -> str:
    kind, body = node
    if kind == "s":
        return str(body).split(" # ")[0]
    if kind == "l":
        return "[" + ", ".join(flow_text(n) for n in body) + "]"
    return "{" + ", ".join(f"{flow_text(('s', k))}: {flow_text(v)}" for k, v in body) + "}"


def block_lines(node: Node, indent: int, draw: st.DrawFn) -> Iterator[str]:
    """The lines of a collection at ``indent`` in block style (some parts in flow style)."""
    kind, body = node
    pad = " " * indent
    if kind == "m":
        if not body:
            yield pad + "{}"
        for key, value in body:
            key = key.split(" # ")[0]
            if value[0] == "s":
                yield f"{pad}{key}: {value[1]}"
            elif draw(st.booleans()) or not value[1]:
                yield f"{pad}{key}: {flow_text(value)}"
            else:
                yield f"{pad}{key}:"
                step = draw(st.integers(0 if value[0] == "l" else 1, 3))
                yield from block_lines(value, indent + step, draw)
        return
    if not body:
        yield pad + "[]"
    for item in body:
        if item[0] == "s":
            yield f"{pad}- {item[1]}"
        elif draw(st.booleans()) or not item[1]:
            yield f"{pad}- {flow_text(item)}"
        elif draw(st.booleans()):  # compact: the first line of the item after the dash
            inner = list(block_lines(item, indent + 2, draw))
            yield f"{pad}- {inner[0][indent + 2:]}"
            yield from inner[1:]
        else:
            yield f"{pad}-"
            yield from block_lines(item, indent + draw(st.integers(1, 3)), draw)


@st.composite
def documents(draw: st.DrawFn) -> str:
    root = draw(nodes().filter(lambda n: n[0] != "s"))
    lines = list(block_lines(root, draw(st.integers(0, 1)), draw))
    out: list[str] = []
    if draw(st.booleans()):
        out.append(draw(st.sampled_from(["---", "--- # doc", "# head"])))
    for line in lines:
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(st.sampled_from(["", "   ", "# c", "  # c"])))
        out.append(line + draw(st.sampled_from(["", "", "", "  ", " # c"])))
    return "\n".join(out) + draw(st.sampled_from(["\n", "", "\n\n"]))


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_generated_block_documents_are_read_exactly_or_declined(text: str) -> None:
    check(text)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET + "\n\r", max_size=24), max_size=8))
def test_arbitrary_text_is_read_exactly_or_declined(rows: list[str]) -> None:
    check("\n".join(rows))


def test_generated_documents_are_mostly_taken() -> None:
    """The property tests above compare values, not only declines: most generated block
    documents are accepted."""
    taken = 0

    @settings(max_examples=100, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(documents())
    def count(text: str) -> None:
        nonlocal taken
        taken += check(text)

    count()
    assert taken >= 20


# -- errors and the fast path in load_yaml -----------------------------------------------

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
def test_a_declined_file_gets_the_full_paths_error(text: str, problem: ConfigProblem) -> None:
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


def test_a_big_generated_block_file_is_read_by_the_first_pass_alone(
    builds: list[bool], monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = big_block_file(3_000)
    collections: list[int] = []
    during: list[int] = []
    read_block = _yaml.read_block

    def counted(*args: Any) -> Any:
        before = len(collections)
        try:
            return read_block(*args)
        finally:
            during.append(len(collections) - before)

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(_yaml, "read_block", counted)
    gc.callbacks.append(callback)
    try:
        data, lines = load_yaml(text, "big.yaml")
    finally:
        gc.callbacks.remove(callback)
    assert builds == []  # no pass over libyaml's events
    assert during == [0]  # one first pass, and no collector pass while it built
    assert gc.isenabled()
    assert len(data["nodes"]) == 3_000
    assert data["nodes"]["node-0002999"] == {
        "site": "site-19", "labels": {"rack": "r499", "role": "worker"},
        "channels": [{"channel": "lab", "target": "m0002999"}]}
    assert data["channels"]["lab"]["machines"]["m0000000"] == "on"
    # the lines, asked for: the full path's second pass, as before
    assert lines[("nodes", "node-0002999", "channels", 0, "target")] == 5 + 3_000 + 4 * 2_999 + 4
    assert builds == [True]
    expected = full(text)
    assert not isinstance(expected, ConfigError) and same(data, expected[0])


def test_a_file_outside_the_subset_is_read_by_the_full_path(
    builds: list[bool], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_yaml, "FIRST_PASS_BYTES", 0)
    data, _ = load_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n", "m.yaml")
    assert data == {"base": {"x": 1}, "other": {"y": 2, "x": 1}}
    assert builds == [False]


def test_a_small_file_is_read_by_the_full_path_alone(builds: list[bool]) -> None:
    """Below FIRST_PASS_BYTES the first pass is not worth compiling its patterns."""
    data, _ = load_yaml(big_block_file(2), "small.yaml")
    assert len(data["nodes"]) == 2
    assert builds == [False]


def test_lines_split_in_chunks_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml_block, "_CHUNK", 7)
    for text in [*HAND_PICKED, "a: 1\n\n\nb: 2", "a:\n  b: 1\n\n"]:
        check(text)
    assert check(big_block_file(50))
    assert fast("a: 1\nb: 2\n" * 20 + "c: \x01\n") is DECLINE  # in a later chunk
    assert fast("a: 1\nb: 2\n" * 20 + "c: \u2028\n") is DECLINE


def test_a_first_pass_result_shares_no_container_between_equal_flows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_yaml, "FIRST_PASS_BYTES", 0)
    data, _ = load_yaml("a:\n  x: {rack: r1, role: w}\n  y: {rack: r1, role: w}\n", "s.yaml")
    data = data["a"]
    assert data["x"] == data["y"] and data["x"] is not data["y"]
    data["x"]["rack"] = "r2"
    assert data["y"]["rack"] == "r1"
