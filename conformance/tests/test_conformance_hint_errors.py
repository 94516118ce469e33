"""A mistake in the target file is not the device's fault.

A ``conformance.negative`` hint that makes a config the channel type's own model rejects
is caught when the target is loaded: a ConfigError (exit 2) naming the hint's path (and
line), before any check runs, so results.json holds no FAIL for it. What cannot be
checked at load (a channel type's factory or a call that rejects the config the suite
derived) makes the check NOT TESTED with the reason, never FAIL.

The case from the field: ``negative.bench-bmc.address_key: endpoint`` with the default
``address_format`` (``{host}:{port}``) against Redfish, whose ``endpoint`` must be a URL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from click.testing import CliRunner
from conformance_lineproto import DeclaredLineConfig, LineChannel
from conformance_targets import messages, outcome, sim_target

from powerplane import ChannelType, ConfigError, hookimpl
from powerplane.cli import cli
from powerplane.testing import registered
from powerplane_conformance.api import RunSummary, run_suite
from powerplane_conformance.settings import load_target

pytest.importorskip("powerplane_redfish")

PASSWORD_ENV = "PP_CONFORMANCE_HINT_PASSWORD"
NETWORK = ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT", "WRONG_CREDENTIALS_REJECTED")


@pytest.fixture(autouse=True)
def _hint_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "pp-hint-secret-41c7")


def redfish_target(endpoint: str, hints: dict[str, Any], **channel: Any) -> dict[str, Any]:
    """One redfish channel ``bench-bmc``, read-only, with these ``negative:`` hints."""
    return {
        "channels": {"bench-bmc": {"type": "redfish", "endpoint": endpoint, "username": "admin",
                                   "password": {"env": PASSWORD_ENV}, "verify": False,
                                   "auth": "basic", **channel}},
        "nodes": {"n0": {"channels": [{"channel": "bench-bmc",
                                       "target": "/redfish/v1/Systems/1"}]}},
        "conformance": {"allow_destructive": False, "negative": {"bench-bmc": hints}},
    }


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _problems(err: pytest.ExceptionInfo[ConfigError]) -> dict[str, tuple[str, int | None]]:
    return {p.path: (p.message, p.line) for p in err.value.problems}


def test_the_redfish_address_hint_mistake_is_exit_2_before_any_check(tmp_path: Path) -> None:
    """run_suite raises before running: no results.json, so no FAIL for the device."""
    path = _write(tmp_path, redfish_target("https://127.0.0.1:9", {"address_key": "endpoint"}))
    report = tmp_path / "results.json"
    with pytest.raises(ConfigError) as err:
        run_suite(path, report=report)
    problems = _problems(err)
    assert list(problems) == ["conformance.negative.bench-bmc.address_key"]
    message, line = problems["conformance.negative.bench-bmc.address_key"]
    assert line is not None
    assert path.read_text(encoding="utf-8").splitlines()[line - 1].strip() == \
        "address_key: endpoint"
    # what the channel model said, the value the hint wrote, and the way out
    assert "expected a URL starting with https:// or http://" in message
    assert "endpoint = '127.0.0.1:" in message and "'{host}:{port}'" in message
    assert "channel type redfish declares its address (endpoint" in message
    assert not report.exists()


def test_the_cli_exits_2_naming_the_hint_and_writes_no_results(tmp_path: Path) -> None:
    path = _write(tmp_path, redfish_target("https://127.0.0.1:9", {"address_key": "endpoint"}))
    report = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["conformance", "--target", str(path),
                                      "--report", str(report)])
    assert result.exit_code == 2, result.output
    assert "conformance.negative.bench-bmc.address_key (line " in result.output
    assert "Traceback" not in result.output
    assert "pp-hint-secret-41c7" not in result.output
    assert not report.exists()


def test_an_unknown_hint_key_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as err:
        load_target(redfish_target("https://127.0.0.1:9", {"adress_key": "endpoint"}))
    assert _problems(err) == {"conformance.negative.bench-bmc.adress_key": (
        "unknown key; did you mean 'address_key'?", None)}


def test_an_unknown_conformance_key_gets_did_you_mean_with_its_line(tmp_path: Path) -> None:
    """``conformance:`` keys are told like core's: the close match, else what is accepted."""
    data = redfish_target("https://127.0.0.1:9", {})
    data["conformance"].update({"alow_destructive": True, "zzz": 1})
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_target(path)
    problems = _problems(err)
    assert problems["conformance.alow_destructive"][0] == \
        "unknown key; did you mean 'allow_destructive'?"
    line = problems["conformance.alow_destructive"][1]
    assert line is not None
    assert path.read_text(encoding="utf-8").splitlines()[line - 1].strip().startswith(
        "alow_destructive:")
    message = problems["conformance.zzz"][0]
    assert message.startswith("unknown key; accepted keys: ")
    assert "allow_destructive" in message and "settle_timeout_s" in message


@pytest.mark.parametrize("hints, path, said", [
    # a timeout key the model does not have
    ({"timeout_key": "timeout_s"}, "timeout_key", "timeout_s: no such key"),
    # a secret key that holds no secret reference
    ({"secret_key": "username"}, "secret_key", "username: Input should be a valid string"),
    # a format with a field the suite does not fill
    ({"address_key": "endpoint", "address_format": "https://{hostname}:{port}"},
     "address_format", "cannot be written with host and port"),
    # address_format alone does nothing: the declared address is used
    ({"address_format": "https://{host}:{port}"}, "address_format",
     "applies only with address_key"),
    # an unknown target the channel type's parser rejects
    ({"unknown_target": "Systems/9"}, "unknown_target", "expected a system path"),
])
def test_each_hint_that_breaks_the_config_is_named(
    hints: dict[str, Any], path: str, said: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_target(redfish_target("https://127.0.0.1:9", hints))
    problems = _problems(err)
    assert list(problems) == [f"conformance.negative.bench-bmc.{path}"], problems
    assert said in problems[f"conformance.negative.bench-bmc.{path}"][0]


def test_correct_hints_load() -> None:
    target = load_target(redfish_target("https://127.0.0.1:9", {
        "address_key": "endpoint", "address_format": "https://{host}:{port}",
        "secret_key": "password", "timeout_s": 1, "unknown_target": "/redfish/v1/Systems/9"}))
    assert target.settings.negative["bench-bmc"].address_key == "endpoint"


def test_hints_that_only_repeat_the_declarations_load() -> None:
    target = load_target(redfish_target("https://127.0.0.1:9",
                                        {"timeout_s": 0.5, "transport": "tcp"}))
    hints = target.settings.negative["bench-bmc"]
    assert (hints.timeout_s, hints.transport) == (0.5, "tcp")
    # nothing else was set: the channel type's declarations still decide the rest
    assert hints.model_fields_set == {"timeout_s", "transport"}
    assert (hints.address_key, hints.secret_key, hints.timeout_key,
            hints.unknown_target) == (None, None, None, None)
    assert target.deployment.channels["bench-bmc"].type.name == "redfish"
    assert target.nodes == ["n0"] and target.settings.allow_destructive is False


@pytest.mark.slow
def test_a_correct_address_hint_still_runs_the_network_negatives(tmp_path: Path) -> None:
    """The same hint with the format the model accepts, on the sushy-tools emulator."""
    from powerplane_redfish.testing.emulator import SushyEmulator

    with SushyEmulator(tmp_path / "emulator", systems=1) as emu:
        os.environ[PASSWORD_ENV] = emu.password
        data = redfish_target(emu.endpoint, {"address_key": "endpoint",
                                             "address_format": "https://{host}:{port}"},
                              username=emu.username, verify=str(emu.tls.ca))
        data["nodes"]["n0"]["channels"][0]["target"] = emu.system_paths[0]
        summary = run_suite(_write(tmp_path, data), report=tmp_path / "results.json",
                            pytest_args=["-k", "closed_port or silent_server or wrong_cred"])
    for ident in NETWORK:
        assert outcome(summary, ident) == {"pass"}, (ident, messages(summary, ident))
    assert summary.exit_code == 0


# -- what cannot be checked at load: NOT TESTED, never FAIL --------------------------------

class PickyConfig(DeclaredLineConfig):
    """A line-protocol config whose channel type's factory (or first call) refuses short
    timeouts: the model accepts the config the suite derives, the factory does not."""

    picky: Literal["factory-value", "factory-config", "call-config"] = "factory-value"
    """Where and how the short timeouts are refused."""


def _short(config: PickyConfig) -> bool:
    return config.timeouts.connect_s < 3


class PickyChannel(LineChannel):
    def __init__(self, name: str, config: PickyConfig) -> None:
        if _short(config) and config.picky == "factory-value":
            raise ValueError("timeouts below 3 s are not supported by this device's library")
        if _short(config) and config.picky == "factory-config":
            raise ConfigError("timeouts.connect_s: at least 3 s")
        super().__init__(name, config)
        self.picky = config

    async def _ask(self, target: str, command: str) -> str:
        if _short(self.picky) and self.picky.picky == "call-config":
            raise ConfigError("timeouts.connect_s: at least 3 s")
        return await super()._ask(target, command)


class _PickyPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        from conformance_lineproto import DECLARED_ADDRESS

        register(ChannelType(name="lineproto-picky", config=PickyConfig, factory=PickyChannel,
                             address=DECLARED_ADDRESS,
                             description="a line-protocol device that refuses short timeouts"))


@pytest.fixture
def picky(lineproto_peer: tuple[int, str], tmp_path: Path) -> Iterator[Callable[[str], Any]]:
    port, password = lineproto_peer
    secret = tmp_path / "password"
    secret.write_text(password, encoding="utf-8")

    def make(how: str) -> dict[str, Any]:
        return {
            "channels": {"dev": {"type": "lineproto-picky", "address": f"127.0.0.1:{port}",
                                 "password": {"file": str(secret)}, "picky": how}},
            "nodes": {"n1": {"channels": [{"channel": "dev", "target": "m1"}]}},
            "conformance": {"nodes": ["n1"], "allow_destructive": False},
        }

    with registered(_PickyPlugin(), name="conformance-picky"):
        yield make


@pytest.mark.parametrize("how, said", [
    ("factory-value", "factory rejected the config the suite derived"),
    ("factory-config", "factory rejected the config the suite derived"),
    ("call-config", "found the config the suite derived invalid when called"),
])
def test_a_derived_config_the_factory_or_a_call_rejects_is_not_tested(
    run: Callable[..., RunSummary], picky: Callable[[str], Any], how: str, said: str
) -> None:
    summary = run(picky(how))
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT"):
        assert outcome(summary, ident) == {"not_tested"}, (ident, messages(summary, ident))
        assert said in messages(summary, ident)
    # the wrong secret leaves the timeouts alone: that check still runs and passes
    assert outcome(summary, "WRONG_CREDENTIALS_REJECTED") == {"pass"}
    assert summary.data["counts"]["fail"] == 0
    assert summary.exit_code == 0


def test_the_simulated_target_hint_is_checked_too() -> None:
    """sim_target's own hint (secret_key: password) is valid; a wrong one is named."""
    load_target(sim_target())
    with pytest.raises(ConfigError) as err:
        load_target(sim_target(conformance={"negative": {"lab": {"secret_key": "machines"}}}))
    assert list(_problems(err)) == ["conformance.negative.lab.secret_key"]
