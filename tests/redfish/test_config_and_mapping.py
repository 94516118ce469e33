"""Config validation, target parsing, the entry point, and the reset-type-to-verb mapping."""

from __future__ import annotations

import pytest

from powerplane import ConfigError, Source, parse_config
from powerplane.plugins import registry
from powerplane_redfish import RebootMode, ResetType, ShutdownMode, parse_target, plan
from powerplane_redfish.mapping import parse_reset_types

EMULATOR_VALUES = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart",
                   "Nmi", "ForceOn"]


def test_redfish_registers_through_its_entry_point() -> None:
    reg = registry()
    ctype = reg.get("redfish")
    assert ctype is not None
    assert ctype.factory.__module__ == "powerplane_redfish.plugin"
    assert reg.owners["redfish"] == "redfish"


def base(**kw: object) -> dict[str, object]:
    cfg: dict[str, object] = {"type": "redfish", "endpoint": "https://127.0.0.1:8443",
                              "username": "admin", "password": {"env": "PP_TEST_CFG_PW"}}
    cfg.update(kw)
    return {"channels": {"bmc": cfg}}


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_CFG_PW", "x")


def test_defaults_are_graceful_and_auto() -> None:
    cfg = parse_config(base()).channels["bmc"].config
    assert cfg.shutdown is ShutdownMode.GRACEFUL  # type: ignore[attr-defined]
    assert cfg.reboot is RebootMode.GRACEFUL  # type: ignore[attr-defined]
    assert cfg.auth.value == "auto"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("override", "path"),
    [
        ({"verify": "/nonexistent/ca.pem"}, "channels.bmc.verify"),
        ({"password": "inline-secret"}, "channels.bmc.password"),
        ({"endpoint": "ftp://bmc"}, "channels.bmc.endpoint"),
        ({"shutdown": "gently"}, "channels.bmc.shutdown"),
        ({"auth": "kerberos"}, "channels.bmc.auth"),
        ({"reset_types": ["Explode"]}, "channels.bmc.reset_types"),
        ({"read_timeout_s": 0}, "channels.bmc.read_timeout_s"),
        ({"colour": "red"}, "channels.bmc.colour"),
    ],
)
def test_bad_config_names_the_path(override: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(base(**override))
    assert any(p.path.startswith(path) for p in err.value.problems), err.value
    assert "inline-secret" not in str(err.value)


def test_target_is_a_system_path_or_omitted() -> None:
    assert parse_target(None) is None
    assert parse_target("/redfish/v1/Systems/1/") == "/redfish/v1/Systems/1"
    for bad in ("1", "", "/", 7, {"id": 1}):
        with pytest.raises(ValueError, match="system path"):
            parse_target(bad)


def test_bad_target_is_a_config_error_on_the_node() -> None:
    cfg = base()
    cfg["nodes"] = {"n1": {"channels": [{"channel": "bmc", "target": "Systems-1"}]}}
    with pytest.raises(ConfigError) as err:
        parse_config(cfg)
    assert err.value.problems[0].path == "nodes.n1.channels[0].target"


def mapped(
    values: list[str], shutdown: str = "graceful", reboot: str = "graceful"
) -> dict[str, str]:
    return plan(parse_reset_types(values), ShutdownMode(shutdown), RebootMode(reboot),
                source=Source.DISCOVERED, where="test").caps.as_dict()


def test_emulator_values_map_to_all_three_verbs() -> None:
    assert mapped(EMULATOR_VALUES) == {
        "reboot": "graceful", "shutdown": "graceful", "power-on": "hard"
    }


def test_nothing_accepted_advertises_nothing() -> None:
    assert mapped([]) == {}
    assert mapped(["Nmi", "PushPowerButton", "OemThing"]) == {}


@pytest.mark.parametrize(
    ("values", "shutdown", "reboot", "expected"),
    [
        (["ForceOn"], "graceful", "graceful", {"power-on": "hard"}),
        (["ForceOff"], "graceful", "graceful", {}),
        (["ForceOff"], "force", "graceful", {"shutdown": "hard"}),
        (["ForceOff"], "graceful-then-force", "graceful", {"shutdown": "hard"}),
        (["GracefulShutdown"], "force", "graceful", {}),
        (["GracefulShutdown", "ForceOff"], "force", "graceful", {"shutdown": "hard"}),
        (["PowerCycle"], "graceful", "force", {"reboot": "hard"}),
        (["ForceRestart"], "graceful", "force", {"reboot": "hard"}),
        (["GracefulRestart"], "graceful", "force", {}),
        (["ForceRestart"], "graceful", "graceful", {}),
        (["GracefulShutdown", "On"], "graceful", "graceful-then-force",
         {"reboot": "graceful", "shutdown": "graceful", "power-on": "hard"}),
        (["GracefulShutdown"], "graceful", "graceful-then-force", {"shutdown": "graceful"}),
    ],
)
def test_modes_decide_what_is_advertised(
    values: list[str], shutdown: str, reboot: str, expected: dict[str, str]
) -> None:
    assert mapped(values, shutdown, reboot) == expected


def test_force_restart_is_preferred_to_power_cycle() -> None:
    found = plan(parse_reset_types(["PowerCycle", "ForceRestart"]), ShutdownMode.GRACEFUL,
                 RebootMode.FORCE, source=Source.DISCOVERED, where="t")
    assert found.reboot is ResetType.FORCE_RESTART


def test_detail_says_what_was_accepted_and_what_is_missing() -> None:
    found = plan(parse_reset_types(["ForceOff"]), ShutdownMode.GRACEFUL, RebootMode.GRACEFUL,
                 source=Source.DISCOVERED, where="/redfish/v1/Systems/1 AllowableValues")
    assert "ForceOff" in found.caps.detail
    assert "GracefulShutdown not accepted" in found.caps.detail
