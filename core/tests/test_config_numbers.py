"""A number config key is a finite number in ASCII digits, in every distribution's models.

The same walk as the boolean one (``test_config_booleans``: every registered channel
type, port type, the lifecycle, core and conformance sections, nested models included)
finds every float and int field. NaN and infinity are refused at load with "a finite
number" (a simulated ``latency_ms: .inf`` used to load and fail later as an unmapped
``OverflowError``; a lifecycle ``.nan`` read "should be less than or equal to 86400"), and
so are digits of other scripts (``٦٢٣``, ``²``, fullwidth twelve) in a quoted value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from test_config_booleans import BoolField, every_field, problems_for

from powerplane.config import FINITE_EXPECTED

FLOATS = every_field(float)
INTS = every_field(int)
NOT_FINITE = (float("inf"), float("-inf"), float("nan"), "inf", "-Infinity", "nan", "1e400")
"""As YAML gives them: ``.inf``, ``-.inf``, ``.nan``, ``1e400`` (a plain scalar that is
not a YAML float arrives as a string, which pydantic reads as a number)."""
FOREIGN_DIGITS = ("٦٢٣", "²", "\uff11\uff12", "\u06f1", "६")  # fullwidth 12, Persian 1


def _id(field: BoolField) -> str:
    return f"{field.root}:{field.dotted}"


def test_the_walk_reaches_the_number_fields_of_every_distribution() -> None:
    floats = {(f.root, f.dotted) for f in FLOATS}
    ints = {(f.root, f.dotted) for f in INTS}
    assert {
        ("channel:simulated", "latency_ms"),
        ("channel:simulated", "transition_ms"),
        ("channel:simulated", "timeout_s"),
        ("channel:redfish", "shutdown_wait_s"),
        ("channel:redfish", "timeouts.connect_s"),
        ("channel:pdu", "reboot_delay_s"),
        ("channel:pdu", "feeds.k.settle_s"),
        ("channel:ec2", "backoff_max_s"),
        ("channel:openstack", "backoff_base_s"),
        ("channel:ipmi", "shutdown_wait_s"),
        ("lifecycle", "settle_window_s"),
        ("lifecycle", "drain_deadline_s"),
        ("limits", "timeout_s"),
        ("conformance", "settle_timeout_s"),
        ("conformance", "negative.k.timeout_s"),
    } <= floats
    assert {
        ("limits", "per_endpoint"),
        ("channel:simulated", "session_limit"),
        ("channel:pdu", "port"),
        ("lifecycle", "concurrency"),
        ("storage:simulated", "replicas.k"),
        ("conformance", "repeat"),
    } <= ints


@pytest.mark.parametrize("field", FLOATS, ids=_id)
def test_every_float_field_refuses_nan_and_infinity_as_a_finite_number(
    field: BoolField
) -> None:
    for value in NOT_FINITE:
        path, found = problems_for(field, value)
        assert (path, FINITE_EXPECTED) in found, (value, found)


@pytest.mark.parametrize("field", FLOATS + INTS, ids=_id)
def test_every_number_field_refuses_digits_of_other_scripts(field: BoolField) -> None:
    for value in FOREIGN_DIGITS:
        path, found = problems_for(field, value)
        assert any(p == path for p, _ in found), (value, found)


def _run(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    from powerplane.cli import cli

    config = tmp_path / "powerplane.yaml"
    config.write_text(text)
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


SIMULATED = """\
channels:
  lab:
    type: simulated
    machines: {m1: on}
    latency_ms: LATENCY
nodes:
  n1:
    channels: [{channel: lab, target: m1}]
"""


@pytest.mark.parametrize("latency", [".inf", "-.inf", ".nan", "1e400"])
def test_a_simulated_latency_of_infinity_is_refused_at_load(
    tmp_path: Path, latency: str
) -> None:
    code, out, err = _run(tmp_path, SIMULATED.replace("LATENCY", latency), "state", "n1")
    assert code == 2
    assert f"channels.lab.latency_ms (line 5): {FINITE_EXPECTED}" in err
    assert "OverflowError" not in err and out == ""


def test_a_lifecycle_nan_reads_a_finite_number_with_its_line(tmp_path: Path) -> None:
    from powerplane.config import read_config
    from powerplane.errors import ConfigError
    from powerplane.settings.lifecycle import lifecycle_config

    config = tmp_path / "powerplane.yaml"
    config.write_text("lifecycle:\n  settle_window_s: .nan\n  tick_s: .inf\n")
    data, lines, source = read_config(config)
    with pytest.raises(ConfigError) as err:
        lifecycle_config(data["lifecycle"], source, lines=lines)
    assert [(p.path, p.message, p.line) for p in err.value.problems] == [
        ("lifecycle.tick_s", FINITE_EXPECTED, 3),
        ("lifecycle.settle_window_s", FINITE_EXPECTED, 2),
    ]
    assert "less than or equal" not in str(err.value)
