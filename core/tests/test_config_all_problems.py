"""Every problem of a file in one run, "did you mean", bounded limits, check_limits, and
``--config`` wherever it is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict

from powerplane import ChannelType, ConfigError, hookimpl, load_config, parse_config
from powerplane.cli import cli
from powerplane.plugins import load_plugins

MANY = """\
chanels: {}
channels:
  lab:
    type: simulated
    machnes: {m1: 'on'}
  bmc:
    type: simulatd
  ok:
    type: simulated
    machines: {m9: 'on'}
nodes:
  n1:
    chanels: []
  n2:
    channels: [{channel: labb, target: m1}]
  n3:
    classification: disposable
limits:
  timeout_s: .nan
  per_endpoint: 0
recovery:
  attendedRak: true
"""

EXPECTED = [
    "chanels (line 1): unknown key; did you mean 'channels'?",
    "channels.lab.machnes (line 5): unknown key; did you mean 'machines'?",
    "channels.bmc.type (line 7): unknown channel type 'simulatd'",
    "did you mean 'simulated'?",
    "nodes.n1.chanels (line 13): unknown key; did you mean 'channels'?",
    "nodes.n2.channels[0].channel (line 15): unknown channel 'labb'; channels: bmc, lab, ok; "
    "did you mean 'lab'?",
    "nodes.n3.classification (line 17): Input should be 'repairable' or 'replaceable'",
    "limits.timeout_s (line 19): Input should be a finite number",
    "limits.per_endpoint (line 20): Input should be greater than or equal to 1",
    "recovery.attendedRak (line 22): unknown key; did you mean 'attendedRack'?",
]


def test_every_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(MANY)
    res = CliRunner().invoke(cli, ["--config", str(path), "offers"])
    assert res.exit_code == 2, res.output
    for line in EXPECTED:
        assert line in res.output, f"{line!r} not in:\n{res.output}"
    assert "9 problem(s)" in res.output
    assert "Traceback" not in res.output


def test_an_unknown_key_without_a_close_match_lists_the_accepted_keys(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("nodes:\n  n1:\n    zzz: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert ("nodes.n1.zzz (line 3): unknown key; accepted keys: channels, classification, "
            "labels, site") in str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("timeout_s", ".inf", "Input should be a finite number"),
        ("timeout_s", "-.inf", "Input should be a finite number"),
        ("timeout_s", ".nan", "Input should be a finite number"),
        ("timeout_s", "1e-300", "Input should be greater than or equal to 0.01"),
        ("timeout_s", "-5", "Input should be greater than or equal to 0.01"),
        ("timeout_s", "0", "Input should be greater than or equal to 0.01"),
        ("timeout_s", "1e9", "Input should be less than or equal to 86400"),
        ("per_endpoint", "0", "Input should be greater than or equal to 1"),
        ("per_endpoint", "1000000", "Input should be less than or equal to 10000"),
        ("total", "-1", "Input should be greater than or equal to 1"),
        ("total", "10000000", "Input should be less than or equal to 100000"),
    ],
)
def test_limits_refuse_nan_infinite_negative_and_absurd(
    key: str, value: str, message: str
) -> None:
    from powerplane._yaml import load_yaml

    data, lines = load_yaml(f"limits:\n  {key}: {value}\n", "x.yaml")
    with pytest.raises(ConfigError) as info:
        parse_config(data, lines=lines, source="x.yaml")
    assert f"limits.{key} (line 2): {message}" in str(info.value)


def test_limits_at_their_bounds_load() -> None:
    for timeout in (0.01, 86_400):
        dep = parse_config({"limits": {"timeout_s": timeout, "per_endpoint": 10_000,
                                       "total": 100_000}})
        assert dep.limits.timeout_s == timeout


class _WaitConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    wait_s: float = 1.0

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        if self.wait_s >= timeout_s:
            return [("wait_s", f"must be shorter than limits.timeout_s ({timeout_s:g} s)")]
        return []


class _WaitPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType("waiting", _WaitConfig, lambda n, c: None))  # type: ignore[arg-type,return-value]


def test_a_channel_models_check_limits_is_called_with_the_timeout() -> None:
    from powerplane._yaml import load_yaml

    reg = load_plugins()
    reg.add_module("waiting", _WaitPlugin())
    text = ("channels:\n  w:\n    type: waiting\n    wait_s: 30\n"
            "  fine:\n    type: waiting\n    wait_s: 1\nlimits:\n  timeout_s: 10\n")
    data, lines = load_yaml(text, "w.yaml")
    with pytest.raises(ConfigError) as info:
        parse_config(data, registry=reg, lines=lines, source="w.yaml")
    assert [str(p) for p in info.value.problems] == [
        "channels.w.wait_s (line 4): must be shorter than limits.timeout_s (10 s)"]
    data["limits"]["timeout_s"] = 60
    dep = parse_config(data, registry=reg)
    assert set(dep.channels) == {"w", "fine"}


def test_missing_config_file_names_every_way_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POWERPLANE_CONFIG", raising=False)
    res = CliRunner().invoke(cli, ["offers"])
    assert res.exit_code == 2
    for words in ("powerplane.yaml does not exist", "--config", "$POWERPLANE_CONFIG",
                  "./powerplane.yaml"):
        assert words in res.output, res.output
    monkeypatch.setenv("POWERPLANE_CONFIG", str(tmp_path / "env.yaml"))
    res = CliRunner().invoke(cli, ["offers"])
    assert res.exit_code == 2
    assert "env.yaml does not exist (named by $POWERPLANE_CONFIG)" in res.output
    res = CliRunner().invoke(cli, ["offers", "--config", str(tmp_path / "x.yaml")])
    assert "x.yaml does not exist (given with --config)" in res.output


GOOD = ("channels:\n  lab: {{type: simulated, machines: {{m1: 'on'}}}}\n"
        "nodes:\n  {name}: {{channels: [{{channel: lab, target: m1}}]}}\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["offers", "--config", "{a}", "-o", "json"],
        ["offers", "-o", "json", "--config={a}"],
        ["--config", "{b}", "offers", "-o", "json", "--config", "{a}"],
        ["state", "from-a", "--config", "{a}", "-o", "json"],
    ],
)
def test_config_is_accepted_after_the_command(tmp_path: Path, argv: list[str]) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(GOOD.format(name="from-a"))
    b.write_text(GOOD.format(name="from-b"))
    args = [x.format(a=a, b=b) for x in argv]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "from-a" in res.output and "from-b" not in res.output


def test_config_after_a_nested_command(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    # maintenance needs a lifecycle: section (without one it says so, exit 2)
    a.write_text(GOOD.format(name="n1") + "lifecycle: {store: ./pp.db}\n")
    res = CliRunner().invoke(cli, ["maintenance", "list", "--config", str(a)])
    assert res.exit_code == 0, res.output
    missing = CliRunner().invoke(cli, ["maintenance", "list", "--config",
                                       str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2
    assert "nope.yaml does not exist" in missing.output


def test_hoist_config_moves_only_the_root_option() -> None:
    from powerplane.cli import hoist_config

    assert hoist_config(["offers", "--config", "F", "n1"]) == ["--config", "F", "offers", "n1"]
    assert hoist_config(["--config", "A", "offers", "--config=B"]) == [
        "--config", "A", "--config=B", "offers"]
    assert hoist_config(["invoke", "n1", "--", "--config", "F"]) == [
        "invoke", "n1", "--", "--config", "F"]
    assert hoist_config(["--help"]) == ["--help"]
    res = CliRunner().invoke(cli, ["offers", "--config"])
    assert res.exit_code == 2
    assert "'--config' requires an argument" in res.output


def test_check_limits_runs_against_the_default_timeout_too() -> None:
    from powerplane.plugins import load_plugins

    reg = load_plugins()
    if "redfish" not in reg.channel_types:
        import pytest

        pytest.skip("powerplane-redfish is not installed")
    from powerplane import ConfigError, parse_config

    cfg = {"channels": {"bmc": {"type": "redfish", "endpoint": "https://127.0.0.1:1",
                                "username": "u", "password": {"env": "PATH"},
                                "shutdown": "graceful-then-force", "shutdown_wait_s": 300}},
           "nodes": {}}
    try:
        parse_config(cfg, registry=reg)
    except ConfigError as exc:
        assert "channels.bmc.shutdown_wait_s" in str(exc)
    else:
        raise AssertionError("a graceful-then-force wait longer than limits.timeout_s loaded")
