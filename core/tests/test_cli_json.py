"""The CLI's JSON output: the bytes of ``json.dumps(data, indent=2, default=str)``, encoded
without ``indent`` where it can be (:mod:`powerplane.cli._json`), through the documented
:mod:`json` API only (no ``json.encoder`` internals such as ``c_make_encoder``).

Checked against the standard library on generated documents (every scalar kind, keys that
are coerced, values only ``default`` can write, equal values of different types side by
side, which a cache must not confuse), and on ``offers -o json`` of a deployment whose
nodes share decisions, differ, and have a channel that could not be discovered.
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from powerplane import PowerHost, load_config
from powerplane.cli import cli
from powerplane.cli._json import Encoded, dumps_indented


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def std(data: Any, depth: int = 0) -> str:
    text = json.dumps(data, indent=2, default=str)
    return text.replace("\n", "\n" + "  " * depth)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-3, max_value=3),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.0, 1]),
    st.text(), st.sampled_from(["", "é", "\x00", "\x1b[31m", '"{[,]}":', "\\u007b", "\U0001f600"]),
    st.sampled_from([Colour.RED, Level.HIGH, PurePosixPath("/etc/pp"), b"raw"]),
)
keys = st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none(),
                 st.floats(allow_nan=False), st.sampled_from([Colour.RED, Level.HIGH]))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_the_bytes_are_the_standard_librarys(data: Any) -> None:
    assert dumps_indented(data) == std(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(documents, min_size=1, max_size=4))
def test_a_value_encoded_at_its_depth_fits_in_place(items: list[Any]) -> None:
    doc = {"nodes": [{"node": i, "verbs": v} for i, v in enumerate(items)]}
    shared = {"nodes": [{"node": i, "verbs": Encoded(dumps_indented(v, depth=3))}
                        for i, v in enumerate(items)]}
    assert dumps_indented(shared) == std(doc)


def test_equal_values_of_other_types_are_not_taken_for_each_other() -> None:
    # each container of scalars is written once per (depth, items, types): these hash alike
    rows = [{"a": True}, {"a": 1}, {"a": 1.0}, {"a": 0.0}, {"a": -0.0}, {True: 1}, {1: 1},
            {1.0: 1}, [True], [1], [1.0], [-0.0], [0.0], {"a": Colour.RED}, {"a": "red"},
            {"a": Level.HIGH}, {"a": 3}, [math.nan], [math.inf]]
    doc = {"rows": rows * 2}
    assert dumps_indented(doc) == std(doc)


def test_only_the_documented_json_api_is_used() -> None:
    import ast
    import inspect

    from powerplane.cli import _json

    tree = ast.parse(inspect.getsource(_json))
    imported = {(node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for a in node.names}
    assert not {m for m in imported if m.startswith("json.")}, imported  # json.encoder, ...
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "json"}
    assert used <= {"dumps", "JSONEncoder"}, used


def test_the_bytes_are_the_same_where_the_standard_library_has_no_c_encoder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import json.encoder

    doc = {"nodes": [{"node": f"n{i}", "labels": {"rack": i % 3}, "verbs": [1.5, None, True]}
                     for i in range(5)], "ü": [], "e": {}}
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    assert dumps_indented(doc) == std(doc)


def test_errors_are_the_standard_librarys() -> None:
    for bad in ({(1, 2): 1}, {"a": {frozenset(): 1}}):
        with pytest.raises(TypeError) as ours:
            dumps_indented(bad)
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad, indent=2, default=str)
        assert str(ours.value) == str(theirs.value)


# -- offers -o json ----------------------------------------------------------------------------
def deployment(tmp: Path) -> Path:
    cfg: dict[str, Any] = {
        "channels": {
            "lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "machines": {f"m{i}": "on" for i in range(30)}},
            "soft": {"type": "simulated", "verbs": ["reboot"], "machines": {"s1": "on"}},
            "gone": {"type": "simulated", "machines": {"g": "on"},
                     "faults": {"g": "unreachable"}},
        },
        "nodes": {
            **{f"n{i}": {"site": f"site-{i % 3}", "labels": {"rack": f"r{i % 4}"},
                         "classification": "replaceable" if i % 7 == 0 else "repairable",
                         "channels": [{"channel": "lab", "target": f"m{i}"}]}
               for i in range(30)},
            "only-reboot": {"channels": [{"channel": "soft", "target": "s1"}]},
            "broken": {"channels": [{"channel": "gone", "target": "g"},
                                    {"channel": "soft", "target": "s1"}]},
            "bare": {},
            "ünïcode\t\"node\"": {"site": "sïte \x1b", "channels": [
                {"channel": "lab", "target": "m1"}]},
        },
        "recovery": {"sites": {"site-1": {"attended": True}}},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return path


def test_offers_json_is_byte_identical_to_encoding_each_row(tmp_path: Path) -> None:
    path = deployment(tmp_path)

    async def rows() -> list[dict[str, Any]]:
        async with PowerHost(load_config(path)) as host:
            out = [o.as_dict() for o in host.offers()]
        for row in out:  # no policy: section, so every verb's action is allowed
            for verb in row["verbs"].values():
                verb["allowed"] = True
        return out

    manners = {"per_endpoint": None, "sessions": None, "min_interval_s": 0.0,
               "lockout_s": 600.0}  # the simulated type's: no pacing, no cap
    channels = [{"channel": name, "type": "simulated", "manners": manners}
                for name in ("gone", "lab", "soft")]  # as the file lists them
    expected = json.dumps({"nodes": asyncio.run(rows()), "channels": channels}, indent=2,
                          default=str) + "\n"
    result = CliRunner().invoke(cli, ["--config", str(path), "offers", "-o", "json"])
    assert result.stdout == expected
    assert '"channels": [' in expected  # the undiscoverable channel is listed
    assert result.exit_code in (0, 1), result.output
