"""A battery of bad configs: each gives a path-named message, exit 2, no traceback, no secret."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane import ConfigError, load_config
from powerplane.cli import cli
from powerplane.config import check_config

SECRET = "hunter2-7f3a9c-DO-NOT-PRINT"

GOOD_CHANNEL = "  lab:\n    type: simulated\n    machines: {m1: on}\n"

CASES: dict[str, tuple[str, list[str]]] = {
    "unknown channel type": (
        "channels:\n  bmc:\n    type: redfsh\n    endpoint: https://x\n",
        ["channels.bmc.type (line 3): unknown channel type 'redfsh'; registered types:"],
    ),
    "unknown channel on a node": (
        f"channels:\n{GOOD_CHANNEL}nodes:\n  n1:\n    channels:\n"
        "      - {channel: labb, target: m1}\n",
        ["nodes.n1.channels[0].channel (line 8): unknown channel 'labb'; channels: lab"],
    ),
    "unknown and repeated channels of one node, in order": (
        f"channels:\n{GOOD_CHANNEL}nodes:\n  n1:\n    channels:\n"
        "      - {channel: lab, target: m1}\n"
        "      - {channel: lbb, target: m1}\n"
        "      - {channel: lab, target: m1}\n",
        ["nodes.n1.channels[1].channel (line 9): unknown channel 'lbb'; channels: lab; "
         "did you mean 'lab'?\n"
         "  nodes.n1.channels[2].channel (line 10): channel 'lab' is listed twice for this node"],
    ),
    "missing secret file": (
        "channels:\n  lab:\n    type: simulated\n    password: {file: /nonexistent/pw}\n",
        ["channels.lab.password (line 4): secret file '/nonexistent/pw' does not exist"],
    ),
    "missing secret env": (
        "channels:\n  lab:\n    type: simulated\n    password: {env: PP_TEST_UNSET_VAR}\n",
        ["channels.lab.password (line 4): environment variable 'PP_TEST_UNSET_VAR' is not set"],
    ),
    "inline secret": (
        f"channels:\n  lab:\n    type: simulated\n    password: {SECRET}\n",
        ["channels.lab.password (line 4): expected a secret reference {env: NAME} or "
         "{file: PATH}; inline secret values are not accepted"],
    ),
    "wrong types": (
        f"channels:\n{GOOD_CHANNEL}limits:\n  per_endpoint: many\n  timeout_s: -1\n",
        ["limits.per_endpoint (line 6): expected a whole number",
         "limits.timeout_s (line 7): Input should be greater than or equal to 0.01"],
    ),
    "wrong channel key type": (
        "channels:\n  lab:\n    type: simulated\n    latency_ms: slow\n",
        ["channels.lab.latency_ms (line 4): expected a number"],
    ),
    "unknown channel key": (
        "channels:\n  lab:\n    type: simulated\n    endpiont: x\n",
        ["channels.lab.endpiont (line 4): unknown key"],
    ),
    "duplicate channel names": (
        f"channels:\n{GOOD_CHANNEL}{GOOD_CHANNEL}",
        ["channels.lab (line 5): duplicate key 'lab' (first defined at line 2)"],
    ),
    "duplicate node names": (
        f"channels:\n{GOOD_CHANNEL}nodes:\n  n1: {{}}\n  n1: {{}}\n",
        ["nodes.n1 (line 7): duplicate key 'n1' (first defined at line 6)"],
    ),
    "yaml syntax error": (
        "channels:\n  lab:\n    type: simulated\n   machines: [on\n",
        ["(line 4): YAML syntax error"],
    ),
    "unknown top-level key": (
        "chanels: {}\n",
        ["chanels (line 1): unknown key"],
    ),
    "bad classification": (
        "nodes:\n  n1:\n    classification: disposable\n",
        ["nodes.n1.classification (line 3): Input should be 'repairable' or 'replaceable'"],
    ),
    "missing channel type": (
        "channels:\n  lab:\n    machines: {m1: on}\n",
        ["channels.lab.type (line 3): required key is missing"],
    ),
    "bad target": (
        f"channels:\n{GOOD_CHANNEL}nodes:\n  n1:\n    channels: [{{channel: lab, target: 7}}]\n",
        ["nodes.n1.channels[0].target (line 7): expected a machine name"],
    ),
}


CHECKED = {"missing secret file", "missing secret env"}
"""Cases only ``powerplane check`` refuses: a secret is looked for when the channel that
holds it opens (loading the file reads none), or by ``check`` for the whole file."""


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_SECRET", SECRET)
    monkeypatch.delenv("PP_TEST_UNSET_VAR", raising=False)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_config_gives_path_named_message_and_exit_2(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text, expected = CASES[case]
    path = tmp_path / "powerplane.yaml"
    path.write_text(text)
    caplog.set_level(logging.DEBUG)
    command = "check" if case in CHECKED else "offers"
    result = CliRunner().invoke(cli, ["--config", str(path), command])
    assert result.exit_code == 2, result.output
    out = result.output
    for line in expected:
        assert line in out, f"{line!r} not in:\n{out}"
    assert f"invalid config {path}" in out
    assert "Traceback" not in out
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert SECRET not in out
    assert SECRET not in caplog.text
    if case in CHECKED:
        load_config(path)  # the secret of a channel not opened: not looked for
    with pytest.raises(ConfigError) as info:
        (check_config if case in CHECKED else load_config)(path)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value.problems)


def test_missing_config_file_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "nope.yaml"), "offers"])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_config_found_through_env_then_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(f"channels:\n{GOOD_CHANNEL}nodes:\n  from-env: {{}}\n")
    (tmp_path / "powerplane.yaml").write_text("nodes:\n  from-cwd: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POWERPLANE_CONFIG", str(tmp_path / "a.yaml"))
    assert list(load_config().nodes) == ["from-env"]
    monkeypatch.delenv("POWERPLANE_CONFIG")
    assert list(load_config().nodes) == ["from-cwd"]


async def test_secret_is_resolved_at_use_and_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from powerplane import AuthenticationFailed, PowerHost, Verb

    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    path = tmp_path / "p.yaml"
    path.write_text(
        "channels:\n  lab:\n    type: simulated\n    machines: {m1: on}\n"
        f"    password: {{file: {secret_file}}}\n"
        "    expect_password: {env: PP_TEST_SECRET}\n"
        "nodes:\n  n1:\n    channels: [{channel: lab, target: m1}]\n"
    )
    caplog.set_level(logging.DEBUG)
    dep = load_config(path)
    cfg = dep.channels["lab"].config
    assert SECRET not in repr(cfg) and SECRET not in str(cfg.model_dump())
    async with PowerHost(dep) as host:
        assert (await host.invoke("n1", Verb.REBOOT, reason="x")).accepted  # matched at use
        secret_file.write_text("wrong")
        with pytest.raises(AuthenticationFailed) as info:
            await host.invoke("n1", Verb.REBOOT, reason="x")
    assert SECRET not in str(info.value)
    assert SECRET not in caplog.text
    result = CliRunner().invoke(cli, ["--config", str(path), "state", "n1", "-o", "json"])
    assert result.exit_code == 1, result.output  # no reading: the channel failed
    assert 'credentials rejected' in result.output  # the file now holds a wrong password
    assert SECRET not in result.output
