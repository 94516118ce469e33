"""A ``verify`` key is ``true``, ``false`` or the path of a CA bundle file, for every plugin.

``verify: 1`` gave two problems (``expected true or false`` and ``verify.str: Input should
be a valid string``), ``verify: yes`` was read as a CA bundle named "yes": redfish refused
it as missing, a pdu's first call raised a bare FileNotFoundError, openstack's was a config
error with no line, ec2's a misleading "TLS verification of the endpoint failed". Core's
``TlsVerify`` types every ``verify`` key: anything else is one problem at the key saying the
three things allowed, and a path with no file there is refused when the file is loaded.
The walk of ``test_config_booleans`` finds every such key of every installed plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter, ValidationError
from test_config_booleans import BoolField, every_field, problems_for

from powerplane import TlsVerify
from powerplane.config import VERIFY_EXPECTED

VERIFY = [f for f in every_field(bool) if f.admits_str]
NOT_VERIFY: tuple[Any, ...] = (1, 0, 1.0, 2, -1, "yes", "no", "on", "off", "y", "true",
                               "False", "1", "", " ", "null", [], {}, ["/etc/ssl"])


def _id(field: BoolField) -> str:
    return f"{field.root}:{field.dotted}"


def _at(path: str, found: list[tuple[str, str]]) -> list[str]:
    """Every problem under ``path`` (``path.str`` too: a union's second member)."""
    return [m for p, m in found if p == path or p.startswith(path + ".")]


def test_the_walk_reaches_every_plugins_verify_key() -> None:
    assert {("channel:redfish", "verify"), ("channel:pdu", "verify"),
            ("channel:pdu", "feeds.k.verify"), ("channel:ec2", "verify"),
            ("channel:openstack", "verify")} <= {(f.root, f.dotted) for f in VERIFY}


@pytest.mark.parametrize("field", VERIFY, ids=_id)
def test_a_verify_key_that_is_not_true_false_or_a_path_is_one_problem(
    field: BoolField
) -> None:
    for value in NOT_VERIFY:
        path, found = problems_for(field, value)
        assert _at(path, found) == [VERIFY_EXPECTED], (value, found)


@pytest.mark.parametrize("field", VERIFY, ids=_id)
def test_a_ca_bundle_path_with_nothing_there_is_refused_at_load(
    field: BoolField, tmp_path: Path
) -> None:
    for value, words in [
        (str(tmp_path / "missing-ca.pem"), "no file at that path"),
        ("missing-ca.pem", "no file at that path (a relative one is read from the working"),
        (str(tmp_path), "that path is not a file"),
    ]:
        path, found = problems_for(field, value)
        messages = _at(path, found)
        assert len(messages) == 1, (value, found)
        assert messages[0].startswith(f"{VERIFY_EXPECTED}: {words}"), (value, found)


@pytest.mark.parametrize("field", VERIFY, ids=_id)
def test_true_false_and_an_existing_ca_bundle_are_accepted(
    field: BoolField, tmp_path: Path
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    for value in (True, False, str(bundle)):
        path, found = problems_for(field, value)
        assert _at(path, found) == [], (value, found)


def test_the_value_is_true_false_or_the_path_with_home_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ca.pem").write_text("x")
    adapter: TypeAdapter[bool | str] = TypeAdapter(TlsVerify)
    assert adapter.validate_python(True) is True
    assert adapter.validate_python(False) is False
    assert adapter.validate_python("~/ca.pem") == str(tmp_path / "ca.pem")
    with pytest.raises(ValidationError) as err:
        adapter.validate_python("~/nope.pem")
    assert [e["msg"] for e in err.value.errors()] == [
        f"{VERIFY_EXPECTED}: no file at that path"]


CHANNELS = {
    "redfish": "type: redfish\n    endpoint: https://127.0.0.1:1\n    username: u\n"
               "    password: {env: PP_UNUSED}\n",
    "pdu": "type: pdu\n    protocol: redfish\n    endpoint: https://127.0.0.1:1\n",
    "ec2": "type: ec2\n    region: us-east-1\n",
    "openstack": "type: openstack\n    auth_url: https://127.0.0.1:1/v3\n    region: r\n"
                 "    auth: {method: password, username: u, password: {env: PP_UNUSED},"
                 " project_name: p}\n",
}


@pytest.mark.parametrize("kind", list(CHANNELS))
@pytest.mark.parametrize("value", ["yes", "1", "'true'", "/nonexistent/ca.pem"])
def test_the_cli_names_the_verify_key_and_its_line_once(
    tmp_path: Path, kind: str, value: str
) -> None:
    from powerplane.cli import cli

    config = tmp_path / "powerplane.yaml"
    config.write_text(f"channels:\n  c:\n    {CHANNELS[kind]}    verify: {value}\n"
                      "  lab: {type: simulated, machines: {m1: on}}\n"
                      "nodes:\n  n1: {channels: [{channel: lab, target: m1}]}\n")
    line = config.read_text().splitlines().index(f"    verify: {value}") + 1
    result = CliRunner().invoke(cli, ["--config", str(config), "state", "n1"])
    assert "Traceback" not in result.output + result.stderr
    assert result.exit_code == 2, result.output
    assert f"channels.c.verify (line {line}): {VERIFY_EXPECTED}" in result.stderr
    assert result.stderr.count("channels.c.verify") == 1, result.stderr
