"""Targets and the bad-input battery for the ipmi keys: exit 2, path-named, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ipmi_support import cli

from powerplane_ipmi.config import parse_target


@pytest.mark.parametrize(("raw", "host", "port"), [
    ("10.0.0.23", "10.0.0.23", 623), ("10.0.0.23:6230", "10.0.0.23", 6230),
    ("bmc-7.plant.example", "bmc-7.plant.example", 623), ("[fd00::7]:624", "fd00::7", 624),
    ("fd00::7", "fd00::7", 623),
])
def test_targets(raw: str, host: str, port: int) -> None:
    addr = parse_target(raw)
    assert (addr.host, addr.port) == (host, port)


@pytest.mark.parametrize("raw", ["", "10.0.0.1:0", "10.0.0.1:70000", "a b", "[fd00::1",
                                 "host:port", 623, None, {"host": "x"}])
def test_bad_targets(raw: object) -> None:
    with pytest.raises(ValueError, match="HOST or HOST:PORT"):
        parse_target(raw)


BASE = {"type": "ipmi", "username": "oper", "password": {"env": "PP_IPMI_TEST_PW"}}

BATTERY = [
    ({"username": ""}, "channels.bmc.username", "1 to 16 bytes"),
    ({"username": "x" * 17}, "channels.bmc.username", "1 to 16 bytes"),
    ({"password": "inline-secret"}, "channels.bmc.password", "inline secret values"),
    ({"kg": "inline-kg"}, "channels.bmc.kg", "inline secret values"),
    ({"privilege": "root"}, "channels.bmc.privilege", "operator"),
    ({"cipher_suite": 1}, "channels.bmc.cipher_suite", "17 or 3"),
    ({"cipher_suite": True}, "channels.bmc.cipher_suite", "17 or 3"),
    ({"shutdown": "hard"}, "channels.bmc.shutdown", "graceful"),
    ({"reboot": "graceful"}, "channels.bmc.reboot", "force"),
    ({"connect_timeout_s": 0}, "channels.bmc.connect_timeout_s", "greater than 0"),
    ({"command_timeout_s": -1}, "channels.bmc.command_timeout_s", "greater than 0"),
    ({"shutdown_wait_s": "soon"}, "channels.bmc.shutdown_wait_s", "number"),
    ({"allow_insecure": "yes"}, "channels.bmc.allow_insecure", "bool"),
    ({"pasword": {"env": "X"}}, "channels.bmc.pasword", "unknown"),
    ({"shutdown": "graceful-then-force", "shutdown_wait_s": 120},
     "channels.bmc.shutdown_wait_s", "limits.timeout_s"),
]


@pytest.mark.parametrize(("change", "path", "words"), BATTERY)
def test_bad_input_battery_exit_2_path_named_no_traceback(
        change: dict[str, object], path: str, words: str, tmp_path: Path) -> None:
    chan = {**BASE, **change}
    doc = {"channels": {"bmc": chan},
           "nodes": {"n1": {"channels": [{"channel": "bmc", "target": "127.0.0.1:6230"}]}},
           "limits": {"timeout_s": 60}}
    f = tmp_path / "d.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = cli("--config", str(f), "offers", env={"PP_IPMI_TEST_PW": "pp-battery-secret"})
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert path in text and words in text, text
    assert "Traceback" not in text and "pp-battery-secret" not in text
    assert "inline-secret" not in text and "inline-kg" not in text


def test_a_bad_target_is_exit_2_naming_the_node(tmp_path: Path) -> None:
    doc = {"channels": {"bmc": BASE},
           "nodes": {"n1": {"channels": [{"channel": "bmc", "target": "10.0.0.1:99999"}]}}}
    f = tmp_path / "d.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = cli("--config", str(f), "offers", env={"PP_IPMI_TEST_PW": "x"})
    assert out.returncode == 2 and "nodes.n1" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
