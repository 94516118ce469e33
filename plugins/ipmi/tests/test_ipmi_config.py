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


# each: a target that must be refused, and words the refusal must carry
NOT_TARGETS = [
    ("127.0.0.1:\u0666\u0662\u0663", "ASCII digits"),  # Arabic-Indic 623
    ("127.0.0.1:\u00b2", "ASCII digits"),  # superscript two
    ("127.0.0.1:\uff16\uff12\uff13", "ASCII digits"),  # fullwidth 623
    ("127.0.0.1:" + "6" * 5000, "5000 characters"),
    ("127.0.0.1:+623", "ASCII digits"), ("127.0.0.1: 623", "ASCII digits"),
    ("127.0.0.1:623_0", "ASCII digits"), ("127.0.0.1:", "ASCII digits"),
    ("256.256.256.256", "not a valid IPv4 address"), ("1.2.3.4.5", "not a valid IPv4 address"),
    ("1.2.3", "not a valid IPv4 address"), ("10.0.0.01", "not a valid IPv4 address"),
    ("bmc.123", "last label is all digits"), ("-bmc.example", "RFC 1123"),
    ("bmc-.example", "RFC 1123"), ("bmc..example", "RFC 1123"), ("b_mc", "RFC 1123"),
    ("a" * 64 + ".example", "RFC 1123"), (".".join(["a" * 60] * 5), "RFC 1123"),
    ("b\u00fccher.example", "outside ASCII"), ("\u0661.\u0662.\u0663.\u0664", "outside ASCII"),
    ("[bmc.example]:623", "only an IPv6 address goes in brackets"),
    ("[fd00::zz]:623", "not a valid IPv6 address"), ("fd00:::1", "not a valid IPv6 address"),
    (":623", "no host"),
]


@pytest.mark.parametrize(("raw", "words"), NOT_TARGETS)
def test_only_ascii_ports_and_valid_addresses_or_host_names_are_targets(
        raw: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_target(raw)
    text = str(caught.value)
    assert "HOST or HOST:PORT" in text and words in text, text
    assert "int_max_str_digits" not in text and "invalid literal" not in text, text
    assert len(text) < 400, text


@pytest.mark.parametrize("raw", ["127.0.0.1:\u0666\u0662\u0663", "127.0.0.1:\u00b2",
                                 "127.0.0.1:" + "6" * 5000, "256.256.256.256", "1.2.3.4.5"])
def test_a_bad_target_in_the_file_is_exit_2_at_its_path(raw: str, tmp_path: Path) -> None:
    doc = {"channels": {"bmc": BASE},
           "nodes": {"n1": {"channels": [{"channel": "bmc", "target": raw}]}}}
    f = tmp_path / "d.yaml"
    f.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    out = cli("--config", str(f), "offers", env={"PP_IPMI_TEST_PW": "x"})
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "nodes.n1" in text and "HOST or HOST:PORT" in text, text
    assert "Traceback" not in text and "int_max_str_digits" not in text, text


@pytest.mark.parametrize(("raw", "host", "port"), [
    ("bmc.example.", "bmc.example.", 623), ("[fe80::1%eth0]:6230", "fe80::1%eth0", 6230),
    ("BMC-7:65535", "BMC-7", 65535), ("0.0.0.1:1", "0.0.0.1", 1), ("::1", "::1", 623),
    ("x1.example", "x1.example", 623), ("123abc.example", "123abc.example", 623),
])
def test_valid_edge_targets_still_parse(raw: str, host: str, port: int) -> None:
    addr = parse_target(raw)
    assert (addr.host, addr.port) == (host, port)


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
    ({"timeouts": {"connect_s": 0}}, "channels.bmc.timeouts.connect_s", "greater than 0"),
    ({"timeouts": {"read_s": -1}}, "channels.bmc.timeouts.read_s", "greater than 0"),
    ({"connect_timeout_s": 2}, "channels.bmc.connect_timeout_s", "unknown"),
    ({"command_timeout_s": 3}, "channels.bmc.command_timeout_s", "unknown"),
    ({"shutdown_wait_s": "soon"}, "channels.bmc.shutdown_wait_s", "number"),
    ({"allow_insecure": "yes"}, "channels.bmc.allow_insecure", "true or false"),
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


def test_the_type_declares_its_address_its_secrets_and_its_timeouts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_IPMI_TEST_PW", "pp-declared-secret")
    from powerplane import Address, Timeouts
    from powerplane_ipmi.config import BmcAddress, IpmiConfig
    from powerplane_ipmi.plugin import IPMI

    cfg = IpmiConfig.model_validate({"username": "oper", "password": {"env": "PP_IPMI_TEST_PW"}})
    assert IPMI.address_for(cfg) == Address(None, source="target", format="host:port",
                                            transport="udp")
    assert IPMI.address_for(cfg).retarget("10.0.0.1", "127.0.0.1", 6231) == "127.0.0.1:6231"
    assert IPMI.address_for(cfg).read(cfg, parse_target("10.0.0.1")) == "10.0.0.1:623"
    assert IPMI.gated_sends is True
    assert set(IPMI.secret_fields()) == {"password", "kg"}
    assert IPMI.timeouts_field() == "timeouts"
    assert IPMI.timeouts_of(cfg) == Timeouts(connect_s=2, read_s=3)
    assert isinstance(parse_target("10.0.0.1"), BmcAddress)


def test_check_limits_counts_a_session_and_two_answers_from_the_timeouts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_IPMI_TEST_PW", "pp-limits-secret")
    from powerplane_ipmi.config import LIMITS_MARGIN_S, IpmiConfig

    cfg = IpmiConfig.model_validate({
        "username": "oper", "password": {"env": "PP_IPMI_TEST_PW"},
        "shutdown": "graceful-then-force", "shutdown_wait_s": 10,
        "timeouts": {"connect_s": 4, "read_s": 5}})
    needed = 10 + 4 + 2 * 5 + LIMITS_MARGIN_S
    assert cfg.check_limits(needed) == []
    ((field, message),) = cfg.check_limits(needed - 0.5)
    assert field == "shutdown_wait_s" and f"{needed:g} s" in message


@pytest.mark.perf
def test_importing_the_package_and_the_plugin_loads_neither_the_channel_nor_pyghmi() -> None:
    import subprocess
    import sys

    code = ("import sys, powerplane_ipmi, powerplane_ipmi.plugin\n"
            "print(sorted(m for m in ('powerplane_ipmi.channel', 'pyghmi') if m in sys.modules))\n"
            "assert powerplane_ipmi.IpmiConfig.__name__ == 'IpmiConfig'\n"
            "assert 'IpmiChannel' in dir(powerplane_ipmi)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]", f"perf (plugin load): imported {out.stdout.strip()}"


def test_the_source_imports_only_the_public_core() -> None:
    import ast

    import powerplane
    import powerplane_ipmi

    root = Path(powerplane_ipmi.__file__).parent
    bad = []
    for file in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "powerplane":
                bad += [f"{file.name}: {a.name}" for a in node.names
                        if a.name not in powerplane.__all__]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "powerplane.") and not (node.module or "").startswith("powerplane.testing"):
                bad.append(f"{file.name}: {node.module}")
            elif isinstance(node, ast.Import):
                bad += [f"{file.name}: {a.name}" for a in node.names
                        if a.name.startswith("powerplane.")
                        and not a.name.startswith("powerplane.testing")]
    assert bad == []
