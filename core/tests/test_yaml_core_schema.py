"""Plain scalars resolve by the YAML 1.2 core schema, also for integers and floats.

The loader is YAML 1.2 for booleans (``on`` stays a string), but it kept PyYAML's YAML
1.1 integers and floats: ``x: 1:30`` read as 90 (sexagesimal), ``017`` as 15 (octal),
``1_000`` as 1000, ``0b101`` as 5, while ``0o17`` and ``1e3`` stayed strings. Each scalar
below is checked against the core schema's own patterns (YAML 1.2.2, section 10.3.2), in
the full path (libyaml's events), in small files and in big ones.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from powerplane._yaml import load_yaml

BIG = 64 * 1024  # bytes: a big file (once read by a second grammar, gone since)

# The core schema's patterns, as the spec writes them (tag resolution, section 10.3.2).
SPEC_INT = [r"[-+]?[0-9]+", r"0o[0-7]+", r"0x[0-9a-fA-F]+"]
SPEC_FLOAT = [r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?",
              r"[-+]?(\.inf|\.Inf|\.INF)", r"\.nan|\.NaN|\.NAN"]

CASES: list[tuple[str, Any]] = [
    # what YAML 1.1 (PyYAML) read otherwise
    ("1:30", "1:30"), ("190:20:30", "190:20:30"), ("1:30.5", "1:30.5"),
    ("017", 17), ("-017", -17), ("08", 8), ("0o17", 15), ("1_000", "1_000"),
    ("0b101", "0b101"), ("-0x1F", "-0x1F"), ("+0x1F", "+0x1F"), ("1e3", 1000.0),
    ("1.0e3", 1000.0), ("-1E-3", -0.001), ("1e400", math.inf), ("1_0.5", "1_0.5"),
    # the same in both
    ("0x1F", 31), ("0x1f", 31), ("+12", 12), ("-1", -1), ("0", 0), ("00", 0),
    ("1.5", 1.5), ("1.", 1.0), (".5", 0.5), ("-.5", -0.5), ("+.inf", math.inf),
    (".inf", math.inf), ("-.Inf", -math.inf), (".NaN", math.nan), (".nan", math.nan),
    (".NAN", math.nan),
    # strings in both
    ("0x", "0x"), ("0o", "0o"), ("0o8", "0o8"), (".", "."), ("+", "+"), ("1e", "1e"),
    (".Nan", ".Nan"), ("inf", "inf"), ("nan", "nan"), ("0xG", "0xG"), ("1.2.3", "1.2.3"),
    ("0O17", "0O17"), ("0X1F", "0X1F"), ("+.nan", "+.nan"),
]


def _spec(text: str) -> type:
    if any(re.fullmatch(p, text) for p in SPEC_INT):
        return int
    if any(re.fullmatch(p, text) for p in SPEC_FLOAT):
        return float
    return str


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return type(got) is type(want) and bool(got == want)


@pytest.mark.parametrize(("text", "value"), CASES, ids=[c[0] for c in CASES])
def test_a_plain_scalar_resolves_as_the_core_schema_says(text: str, value: Any) -> None:
    assert _spec(text) is type(value), "the case table disagrees with the spec's patterns"
    data, _ = load_yaml(f"x: {text}\n", "t.yaml")
    assert _same(data["x"], value), (text, data["x"])


def test_a_big_file_resolves_the_same() -> None:
    """A file of 64 KiB or more: the same values, with or without the cache of short
    scalars."""
    body = "".join(f"k{i}: {text}\n" for i, (text, _) in enumerate(CASES))
    pad = "".join(f"p{i}: v\n" for i in range(BIG // 6))
    for text in (body + pad, pad + body + body.replace("k", "q")):
        data, _ = load_yaml(text, "big.yaml")
        for i, (_, value) in enumerate(CASES):
            assert _same(data[f"k{i}"], value), (CASES[i], data[f"k{i}"])


def test_a_sexagesimal_looking_value_is_a_string_to_a_number_key(tmp_path: Path) -> None:
    """``latency_ms: 1:30`` was 90 ms; it is now the string it is, refused as a number."""
    from powerplane.cli import cli

    config = tmp_path / "powerplane.yaml"
    config.write_text("channels:\n  lab:\n    type: simulated\n    machines: {m1: on}\n"
                      "    latency_ms: 1:30\nnodes:\n  n1:\n"
                      "    channels: [{channel: lab, target: m1}]\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "state", "n1"])
    assert result.exit_code == 2
    assert "channels.lab.latency_ms (line 5): expected a number" in result.stderr
