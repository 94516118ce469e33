"""A number config key is a number, never a boolean or a quoted string, in every model.

pydantic's lax ``int`` reads ``true`` as 1 and ``false`` as 0 (``limits.per_endpoint:
false`` was refused as "greater than or equal to 1", ``limits.total: true`` accepted as
1) and its lax ``float`` reads ``true`` as 1.0; both read a quoted ``'5'`` as 5. Core's
``StrictInt`` and ``StrictFloat`` refuse them. The walk of ``test_config_booleans`` (every
registered channel type, port type, the lifecycle, core and conformance sections, nested
models included) gives every int and float field ``true``, ``false`` and ``'5'``: each is
one problem at the field's path, ``expected a whole number`` or ``expected a number``.
A float field still takes a YAML integer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter, ValidationError
from test_config_booleans import BoolField, every_field, problems_for

from powerplane import StrictFloat, StrictInt
from powerplane.config import FINITE_EXPECTED, INT_EXPECTED, NUMBER_EXPECTED

INTS = every_field(int)
FLOATS = every_field(float)
NOT_NUMBERS: tuple[Any, ...] = (True, False, "5", "1", "0", "5.0", "", [], {})
"""``true``/``false`` as YAML gives them, and quoted numbers (strings)."""


def _id(field: BoolField) -> str:
    return f"{field.root}:{field.dotted}"


def _only(path: str, found: list[tuple[str, str]]) -> list[str]:
    return [message for p, message in found if p == path]


def test_the_walk_reaches_int_and_float_fields_of_every_distribution() -> None:
    roots = {f.root.partition(":")[0] for f in INTS + FLOATS}
    assert {"channel", "cluster", "storage", "store", "lifecycle", "limits",
            "conformance"} <= roots
    assert {("limits", "total"), ("limits", "per_endpoint"), ("channel:pdu", "feeds.k.port"),
            ("store:kubernetes", "lock_duration_s"), ("storage:simulated", "replicas.k"),
            ("channel:ec2", "batch_size")} <= {(f.root, f.dotted) for f in INTS}
    assert {("limits", "timeout_s"), ("channel:ipmi", "poll_interval_s"),
            ("channel:talos", "timeouts.read_s"), ("conformance", "call_timeout_s"),
            ("lifecycle", "settle_window_s")} <= {(f.root, f.dotted) for f in FLOATS}


@pytest.mark.parametrize("field", INTS, ids=_id)
def test_every_int_field_refuses_booleans_and_strings_as_a_whole_number(
    field: BoolField
) -> None:
    for value in (*NOT_NUMBERS, 2.5, float("nan")):
        path, found = problems_for(field, value)
        assert _only(path, found) == [INT_EXPECTED], (value, found)


@pytest.mark.parametrize("field", FLOATS, ids=_id)
def test_every_float_field_refuses_booleans_and_strings_as_a_number(field: BoolField) -> None:
    for value in NOT_NUMBERS:
        path, found = problems_for(field, value)
        assert _only(path, found) == [NUMBER_EXPECTED], (value, found)


@pytest.mark.parametrize("field", FLOATS, ids=_id)
def test_every_float_field_takes_a_yaml_integer(field: BoolField) -> None:
    """Some whole number inside the field's bounds is accepted as it is written (``30``)."""
    for value in (1, 2, 5, 30, 60, 600):
        path, found = problems_for(field, value)
        if not _only(path, found):
            return
    pytest.fail(f"no whole number accepted at {field.dotted}")


@pytest.mark.parametrize("field", INTS, ids=_id)
def test_every_int_field_takes_a_yaml_integer(field: BoolField) -> None:
    for value in (1, 2, 5, 30, 161):
        path, found = problems_for(field, value)
        if not _only(path, found):
            return
    pytest.fail(f"no whole number accepted at {field.dotted}")


def test_the_types_read_what_yaml_gives() -> None:
    ints: TypeAdapter[int] = TypeAdapter(StrictInt)
    floats: TypeAdapter[float] = TypeAdapter(StrictFloat)
    assert ints.validate_python(7) == 7
    assert (ints.validate_python(3.0), type(ints.validate_python(3.0))) == (3, int)
    got = floats.validate_python(30)
    assert (got, type(got)) == (30.0, float)
    assert floats.validate_python(2.5) == 2.5
    for adapter, value, message in [
        (ints, True, INT_EXPECTED), (ints, "5", INT_EXPECTED), (ints, 2.5, INT_EXPECTED),
        (ints, float("inf"), INT_EXPECTED), (floats, False, NUMBER_EXPECTED),
        (floats, "5", NUMBER_EXPECTED), (floats, None, NUMBER_EXPECTED),
        (floats, 10 ** 400, FINITE_EXPECTED), (floats, float("nan"), FINITE_EXPECTED),
        (floats, "inf", FINITE_EXPECTED),
    ]:
        with pytest.raises(ValidationError) as err:
            adapter.validate_python(value, strict=False)
        assert [e["msg"] for e in err.value.errors()] == [message], value


def _run(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    from powerplane.cli import cli

    config = tmp_path / "powerplane.yaml"
    config.write_text(text)
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


DEPLOYMENT = """\
channels:
  lab:
    type: simulated
    machines: {m1: on}
nodes:
  n1:
    channels: [{channel: lab, target: m1}]
"""


@pytest.mark.parametrize(("key", "value", "message"), [
    ("total", "true", INT_EXPECTED), ("per_endpoint", "false", INT_EXPECTED),
    ("per_endpoint", "'4'", INT_EXPECTED), ("timeout_s", "true", NUMBER_EXPECTED),
    ("timeout_s", "'30'", NUMBER_EXPECTED),
])
def test_the_issues_limits_are_exit_2_with_one_clear_problem(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    code, out, err = _run(tmp_path, DEPLOYMENT + f"limits:\n  {key}: {value}\n", "state", "n1")
    assert code == 2 and out == ""
    assert f"limits.{key} (line 9): {message}" in err
    assert err.count(f"limits.{key}") == 1
    assert "greater than" not in err


def test_whole_numbers_still_load_into_float_keys(tmp_path: Path) -> None:
    from powerplane.config import load_config

    config = tmp_path / "powerplane.yaml"
    config.write_text(DEPLOYMENT.replace("machines", "latency_ms: 3\n    machines")
                      + "limits:\n  timeout_s: 30\n  total: 8\n")
    deployment = load_config(config)
    assert (deployment.limits.timeout_s, type(deployment.limits.timeout_s)) == (30.0, float)
    assert deployment.limits.total == 8
    assert deployment.channels["lab"].config.latency_ms == 3.0
