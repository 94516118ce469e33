"""An explicitly tagged scalar that its tag cannot read is a problem at its line, never a
traceback: ``!!bool maybe`` raised KeyError, ``!!timestamp abc`` AttributeError, ``!!int ''``
IndexError, where ``!!int abc`` was a clean exit 2. Each standard tag accepts only its own
lexical forms: ``!!bool`` true or false (YAML 1.2, as plain booleans are read), ``!!null``
null/~/nothing, ``!!int`` and ``!!float`` ASCII digits in the YAML 1.2 core schema's forms
(``!!int 08`` is eight, ``!!int -0x1F`` and ``!!int 0b101`` are refused), ``!!timestamp`` a
date (and time).
"""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from powerplane._yaml import load_yaml
from powerplane.errors import ConfigError

REFUSED = [
    ("bool", "maybe"), ("bool", "yes"), ("bool", "on"), ("bool", "Off"), ("bool", "1"),
    ("bool", "''"), ("bool", "y"),
    ("timestamp", "abc"), ("timestamp", "''"), ("timestamp", "2020-13-45"),
    ("timestamp", "2020-02-30"), ("timestamp", "2020-01-01T25:00:00"),
    ("timestamp", "0000-01-01"), ("timestamp", "٢٠٢٠-01-01"),
    ("int", "abc"), ("int", "''"), ("int", "'+'"), ("int", "'-'"), ("int", "0x"),
    ("int", "0b12"), ("int", "0b101"), ("int", "-0x1F"), ("int", "1_000"), ("int", "1:30"),
    ("int", "٦٢٣"), ("int", "'²'"), ("int", "'\uff11'"),
    ("float", "abc"), ("float", "''"), ("float", "'.'"), ("float", "'-'"), ("float", "1:a"),
    ("float", "٦.\u0665"), ("float", "'\u0661'"),
    ("null", "abc"), ("null", "'0'"), ("null", "none"),
]
"""(tag, scalar as written after it)."""

ACCEPTED: list[tuple[str, str, Any]] = [
    ("bool", "true", True), ("bool", "False", False), ("bool", "TRUE", True),
    ("int", "623", 623), ("int", "0x1F", 31), ("int", "0o17", 15), ("int", "017", 17),
    ("int", "08", 8), ("int", "'42'", 42), ("float", "1e3", 1000.0),
    ("float", "2.5", 2.5), ("float", "1", 1.0), ("float", "-.inf", float("-inf")),
    ("null", "~", None), ("null", "null", None), ("null", "''", None),
    ("timestamp", "2020-01-02", datetime.date(2020, 1, 2)),
    ("str", "yes", "yes"),
]


@pytest.mark.parametrize(("tag", "written"), REFUSED)
def test_a_tagged_scalar_its_tag_cannot_read_is_a_problem_at_its_line(
    tag: str, written: str
) -> None:
    text = f"a: 1\nb:\n  c: !!{tag} {written}\n"
    with pytest.raises(ConfigError) as err:
        load_yaml(text, "t.yaml")
    problems = [(p.path, p.line) for p in err.value.problems]
    assert problems == [("b.c", 3)]
    assert f"not a valid !!{tag} value" in err.value.problems[0].message


def test_a_refused_bool_says_the_two_values() -> None:
    with pytest.raises(ConfigError) as err:
        load_yaml("x: !!bool maybe\n", "t.yaml")
    assert err.value.problems[0].message == "not a valid !!bool value (expected true or false)"


@pytest.mark.parametrize(("tag", "written", "value"), ACCEPTED)
def test_a_tagged_scalar_in_its_tags_form_is_read(tag: str, written: str, value: Any) -> None:
    data, _ = load_yaml(f"x: !!{tag} {written}\n", "t.yaml")
    assert data == {"x": value} and type(data["x"]) is type(value)


@pytest.mark.parametrize("tag", ["binary", "set", "omap", "pairs", "python/object:os.system"])
def test_the_other_standard_tags_stay_refused(tag: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_yaml(f"x: !!{tag} abc\n", "t.yaml")
    assert [(p.path, p.line) for p in err.value.problems] == [("x", 1)]
    assert "is not accepted" in err.value.problems[0].message


def test_random_text_under_every_tag_never_raises_anything_but_a_config_error() -> None:
    """A fixed-seed sample of odd scalars (signs, separators, letters, other scripts'
    digits) under every scalar tag: each is read or refused, nothing else escapes."""
    rng = random.Random(24)
    alphabet = "0123456789+-._:eExXoObBtTzZ ~abcinfINFnaNtrue٦²\uff11\t"
    tags = ["bool", "int", "float", "null", "timestamp", "str"]
    for _ in range(3000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        tag = rng.choice(tags)
        try:
            load_yaml(f"x: !!{tag} {json.dumps(value)}\n", "t.yaml")
        except ConfigError as exc:
            assert [p.path for p in exc.problems] == ["x"], (tag, value)


@pytest.mark.parametrize("written", ["!!bool maybe", "!!timestamp abc", "!!int ''"])
def test_the_cli_says_exit_2_with_the_line_for_a_tag_it_cannot_read(
    tmp_path: Path, written: str
) -> None:
    from powerplane.cli import cli

    config = tmp_path / "powerplane.yaml"
    config.write_text("channels:\n  lab:\n    type: simulated\n"
                      f"    graceful: {written}\nnodes: {{}}\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "state", "n1"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output + result.stderr
    assert "channels.lab.graceful (line 4): not a valid !!" in result.stderr
