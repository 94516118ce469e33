"""Config validation, target parsing, the entry point, and the reset-type-to-verb mapping."""

from __future__ import annotations

import pytest

from powerplane import ConfigError, Source, Verb, parse_config
from powerplane.plugins import registry
from powerplane_redfish import (
    RebootMode,
    RedfishConfig,
    ResetType,
    ShutdownMode,
    parse_target,
    plan,
)
from powerplane_redfish.config import LIMITS_MARGIN_S
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
        ({"timeouts": {"read_s": 0}}, "channels.bmc.timeouts.read_s"),
        ({"timeouts": {"connect_s": float("nan")}}, "channels.bmc.timeouts.connect_s"),
        ({"read_timeout_s": 30}, "channels.bmc.read_timeout_s"),
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


# -- withheld verbs carry the channel's reason and the fix ------------------------------------
NO_GRACEFUL_RESTART = ["On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "PowerCycle"]


@pytest.mark.parametrize(
    ("values", "shutdown", "reboot", "verb", "reason"),
    [
        (NO_GRACEFUL_RESTART, "graceful", "graceful", "reboot",
         "GracefulRestart is not allowed by this BMC; it allows ForceRestart, PowerCycle: "
         "set reboot: force"),
        (["On", "ForceOff"], "graceful", "graceful", "shutdown",
         "GracefulShutdown is not allowed by this BMC; it allows ForceOff: set shutdown: force"),
        (["On", "GracefulShutdown"], "force", "graceful", "shutdown",
         "ForceOff is not allowed by this BMC; it allows GracefulShutdown: "
         "set shutdown: graceful"),
        (["On", "GracefulRestart"], "graceful", "force", "reboot",
         "neither ForceRestart nor PowerCycle is allowed by this BMC; it allows "
         "GracefulRestart: set reboot: graceful"),
        (["On", "ForceOff", "GracefulShutdown"], "graceful", "graceful", "reboot",
         "GracefulRestart is not allowed by this BMC; it allows On, ForceOff, "
         "GracefulShutdown: set reboot: graceful-then-force"),
        (["ForceOff"], "force", "graceful", "power-on",
         "neither On nor ForceOn is allowed by this BMC (it allows ForceOff)"),
    ],
)
def test_a_withheld_verb_says_what_is_missing_and_the_fix(
    values: list[str], shutdown: str, reboot: str, verb: str, reason: str
) -> None:
    p = plan(parse_reset_types(values), ShutdownMode(shutdown), RebootMode(reboot),
             source=Source.DISCOVERED, where="x")
    assert verb not in p.caps.as_dict()
    assert reason in p.caps.withheld[Verb(verb)]
    # every verb not advertised has a reason, and no advertised verb has one
    assert set(p.caps.withheld) == set(Verb) - set(p.caps.verbs) - {Verb.TERMINATE}


def test_a_declared_set_is_named_as_such_in_the_reason() -> None:
    p = plan(parse_reset_types(["On", "ForceOff"]), ShutdownMode.GRACEFUL, RebootMode.GRACEFUL,
             source=Source.DECLARED, where="declared in config")
    assert p.caps.withheld[Verb.SHUTDOWN].startswith(
        "GracefulShutdown is not in the declared reset_types; they list ForceOff")


# -- check_limits: graceful-then-force must fit in limits.timeout_s ----------------------------
def redfish_config(**kw: object) -> RedfishConfig:
    doc = base(**kw)
    doc["limits"] = {"timeout_s": 86_400}  # check_limits alone, not the loader's own check
    cfg = parse_config(doc).channels["bmc"].config
    assert isinstance(cfg, RedfishConfig)
    return cfg


def test_check_limits_has_nothing_to_say_without_graceful_then_force() -> None:
    assert redfish_config().check_limits(60) == []
    assert redfish_config(shutdown="force", reboot="force").check_limits(1) == []


def test_check_limits_flags_a_wait_that_leaves_no_room_for_the_force_off() -> None:
    # 30 s wait + 5 s connect + 30 s read + 1 s margin = 66 s > 60 s
    problems = redfish_config(shutdown="graceful-then-force").check_limits(60)
    assert len(problems) == 1
    field, message = problems[0]
    assert field == "shutdown_wait_s"
    assert "limits.timeout_s (60 s)" in message
    assert "lower shutdown_wait_s to at most 24 s" in message
    assert "raise limits.timeout_s to at least 66 s" in message


def test_check_limits_counts_two_waits_for_a_graceful_then_force_reboot() -> None:
    cfg = redfish_config(reboot="graceful-then-force", shutdown_wait_s=10,
                         timeouts={"connect_s": 2, "read_s": 5})
    assert cfg.check_limits(28) == []  # 2 * 10 + 2 + 5 + 1
    problems = cfg.check_limits(27.5)
    assert [f for f, _ in problems] == ["shutdown_wait_s"]
    assert "reboot" in problems[0][1] and "twice shutdown_wait_s" in problems[0][1]


def test_check_limits_when_the_last_request_alone_is_too_long() -> None:
    cfg = redfish_config(shutdown="graceful-then-force", shutdown_wait_s=1,
                         timeouts={"read_s": 100})
    (field, message), = cfg.check_limits(60)
    assert field == "shutdown_wait_s"
    assert "lower timeouts.read_s or timeouts.connect_s" in message


def test_check_limits_fits_exactly() -> None:
    cfg = redfish_config(shutdown="graceful-then-force", shutdown_wait_s=10,
                         timeouts={"connect_s": 1, "read_s": 4})
    assert cfg.check_limits(10 + 1 + 4 + LIMITS_MARGIN_S) == []


def test_the_loader_reports_a_graceful_then_force_that_does_not_fit() -> None:
    data = base(shutdown="graceful-then-force")  # 66 s needed, limits.timeout_s 60 s
    data["limits"] = {"timeout_s": 60}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert "channels.bmc.shutdown_wait_s" in str(err.value)
    assert "at most 24 s" in str(err.value)
    data["limits"] = {"timeout_s": 66}
    parse_config(data)
