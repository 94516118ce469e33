"""Commands pay only for what they touch; ``powerplane check`` proves the whole file.

* A secret is looked for when the channel that holds it opens: an unset ``{env:}`` or a
  missing ``{file:}`` on a channel a node does not use never fails ``state`` of that node
  (it was exit 2 at load); on the node's own channel it is exit 2 naming the field.
* ``powerplane check`` loads the file as every command does, resolves every secret
  reference (the value never shown) and opens and closes every channel (what its type
  checks then: the Talos certificates behind inline references), exit 0 or 2 with every
  problem of the file and its line in one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from powerplane import hookimpl
from powerplane.config import check_config, load_config
from powerplane.errors import ConfigError, SecretError
from powerplane.plugins import load_plugins
from powerplane.secrets import SecretKind

SECRET = "s3cr3t-value-7e1d-NEVER-SHOWN"

TWO = """\
channels:
  lab: {{type: simulated, machines: {{m1: 'on'}}}}
  other:
    type: simulated
    machines: {{m2: 'on'}}
    password: {{env: {env}}}
    expect_password: {{file: {file}}}
nodes:
  n1: {{channels: [{{channel: lab, target: m1}}]}}
  n2: {{channels: [{{channel: other, target: m2}}]}}
"""


def _cli(path: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("PP_CHECK_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(path),
                           *args], capture_output=True, text=True, timeout=60, env=full,
                          check=False)


def _missing(tmp_path: Path) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(TWO.format(env="PP_CHECK_UNSET", file=tmp_path / "nope"))
    return path


def test_a_missing_secret_of_an_untouched_channel_does_not_fail_state(tmp_path: Path) -> None:
    path = _missing(tmp_path)
    res = _cli(path, "state", "n1")
    assert res.returncode == 0, res.stderr  # exit 2 at load before
    assert res.stdout == "n1: on via lab\n"
    load_config(path)  # loading reads no secret


def test_a_missing_secret_of_the_nodes_own_channel_is_exit_2_naming_it(tmp_path: Path) -> None:
    path = _missing(tmp_path)
    res = _cli(path, "state", "n2")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "channels.other.password: environment variable 'PP_CHECK_UNSET' is not set" \
        in res.stderr
    assert f"channels.other.expect_password: secret file '{tmp_path / 'nope'}' does not " \
        "exist" in res.stderr
    assert "Traceback" not in res.stderr


def test_check_names_every_missing_secret_with_its_line(tmp_path: Path) -> None:
    path = _missing(tmp_path)
    res = _cli(path, "check")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    assert "channels.other.password (line 6): environment variable 'PP_CHECK_UNSET' is " \
        "not set" in res.stderr
    assert "channels.other.expect_password (line 7): secret file" in res.stderr


def test_check_reports_secrets_with_the_other_problems_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text(TWO.format(env="PP_CHECK_UNSET", file=tmp_path / "nope")
                    + "  n3: {sight: x}\nlimits: {total: 0}\n")
    with pytest.raises(ConfigError) as info:
        check_config(path)
    assert {(p.path, p.line) for p in info.value.problems} == {
        ("limits.total", 12), ("nodes.n3.sight", 11), ("channels.other.password", 6),
        ("channels.other.expect_password", 7)}


def test_check_passes_a_proven_file_and_never_shows_a_secret(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    path = tmp_path / "powerplane.yaml"
    path.write_text(TWO.format(env="PP_CHECK_SET", file=secret_file))
    res = _cli(path, "check", env={"PP_CHECK_SET": SECRET})
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"ok: {path}: 2 channel(s), 2 node(s), 2 secret reference(s) resolved\n"
    res = _cli(path, "check", "-o", "json", env={"PP_CHECK_SET": SECRET})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"config": str(path), "ok": True, "channels": 2,
                                      "nodes": 2, "secrets": 2, "lifecycle": False}
    secret_file.write_text("")
    bad = _cli(path, "check", env={"PP_CHECK_SET": SECRET})
    assert bad.returncode == 0, bad.stderr  # an empty secret is still a secret
    for out in (res.stdout, res.stderr, bad.stdout, bad.stderr):
        assert SECRET not in out


class _Vault:
    """A plugin secret kind whose references are well formed and cannot be read."""

    @hookimpl
    def register_secret_kinds(self, register: Any) -> None:
        def resolve(value: str) -> str:
            raise SecretError(f"secret {{vault: {value}}}: the vault is sealed")

        register(SecretKind("vault", resolve, description="a vault path"))


def test_check_resolves_every_reference_a_plugin_kind_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powerplane.plugins

    reg = load_plugins()
    reg.add_module("vault", _Vault(), "vault-dist", "1.0")
    monkeypatch.setattr(powerplane.plugins, "_registry", reg)  # where references find kinds
    path = tmp_path / "powerplane.yaml"
    path.write_text("channels:\n  lab:\n    type: simulated\n    machines: {m1: 'on'}\n"
                    "    password: {vault: kv/bmc}\n")
    deployment = load_config(path, registry=reg)  # at load: the reference's shape only
    assert "lab" in deployment.channels
    with pytest.raises(ConfigError) as info:
        check_config(path, registry=reg)
    assert [str(p) for p in info.value.problems] == [
        "channels.lab.password (line 5): secret {vault: kv/bmc}: the vault is sealed"]


def test_check_opens_every_channel_the_talos_certificates_behind_references(
    tmp_path: Path,
) -> None:
    pytest.importorskip("powerplane_talos")
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    path = tmp_path / "powerplane.yaml"
    path.write_text("channels:\n  lab: {type: simulated, machines: {m1: 'on'}}\n"
                    "  plant:\n    type: talos\n    endpoint: 127.0.0.1:50000\n"
                    f"    ca: {{file: {garbage}}}\n"
                    "nodes:\n  n1: {channels: [{channel: lab, target: m1}]}\n")
    load_config(path)
    assert _cli(path, "state", "n1").returncode == 0  # the Talos channel is not opened
    res = _cli(path, "check")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "channels.plant.ca (line 6): " in res.stderr, res.stderr
    assert "not a certificate" not in res.stderr  # the secret's content is never shown
