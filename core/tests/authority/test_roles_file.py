"""The ``policy:`` section and its roles file, read when the deployment loads: a policy
that cannot be loaded is exit 2 with the file, the path and the line, never "allow"."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from authority_support import ADMIN_ENGINEER_ROLES, write_deployment
from click.testing import CliRunner

from powerplane.cli import cli


def run(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["--config", str(config), *args])
    return result.exit_code, result.output


def test_a_roles_file_that_grants_an_unknown_action_is_exit_2_with_did_you_mean(
    tmp_path: Path,
) -> None:
    roles = {"roles": {"eng": {"allow": ["servers:cordon", "servers:uncordn"]}},
             "bindings": [{"role": "eng", "groups": ["plant-eng"]}]}
    config = write_deployment(tmp_path, roles)
    code, out = run(config, "offers")
    assert code == 2
    assert "roles.yaml: roles.eng.allow[1] (line 5)" in out
    assert "unknown action 'servers:uncordn'" in out
    assert "did you mean 'servers:uncordon'?" in out
    assert "Traceback" not in out


def test_a_binding_to_an_unknown_role_is_exit_2_naming_it(tmp_path: Path) -> None:
    roles = {"roles": {"admin": {"tier": "admin"}},
             "bindings": [{"role": "admin", "users": ["alice"]},
                          {"role": "admn", "users": ["bob"]}]}
    config = write_deployment(tmp_path, roles)
    code, out = run(config, "offers")
    assert code == 2
    assert "bindings[1].role" in out and "unknown role 'admn'" in out
    assert "did you mean 'admin'?" in out


@pytest.mark.parametrize(("text", "expected"), [
    ("roles: {admin: {tier: root}}\n", "roles.admin.tier"),
    ("roles: {admin: {tier: admin, allw: [servers:read]}}\n", "unknown key 'allw'"),
    ("roles: {admin: {tier: admin}}\nbindings: [{role: admin}]\n", "to no user and no group"),
    ("roles: &a [*a]\n", "roles.yaml: roles[0] (line 1): recursive alias"),
    ("l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10)),
     "roles.yaml"),
    ("roles: !!python/object:os.system {}\n", "tag !!python/object:os.system is not accepted"),
])
def test_a_bad_or_hostile_roles_file_is_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    config = write_deployment(tmp_path)
    (tmp_path / "roles.yaml").write_text(text)
    code, out = run(config, "offers")
    assert code == 2, out
    assert expected in out
    assert "Traceback" not in out


def test_a_missing_roles_file_is_exit_2_never_allow(tmp_path: Path) -> None:
    config = write_deployment(tmp_path)
    (tmp_path / "roles.yaml").unlink()
    for args in (["offers"], ["invoke", "n1", "reboot", "--reason", "kernel", "--yes"],
                 ["auth", "can-i", "reboot", "n1"]):
        code, out = run(config, *args)
        assert code == 2, out
        assert "roles.yaml does not exist" in out


def test_a_roles_file_over_the_size_bound_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import powerplane.files

    config = write_deployment(tmp_path)
    monkeypatch.setattr(powerplane.files, "MAX_BYTES", 64)
    code, out = run(config, "offers")
    assert code == 2
    assert "larger than 64 bytes" in out


def test_an_unknown_policy_type_is_exit_2_with_the_types(tmp_path: Path) -> None:
    config = write_deployment(tmp_path)
    doc = yaml.safe_load(config.read_text())
    doc["policy"] = {"type": "locl", "file": "roles.yaml"}
    config.write_text(yaml.safe_dump(doc))
    code, out = run(config, "offers")
    assert code == 2
    assert "unknown policy type 'locl'" in out and "did you mean 'local'?" in out


def test_the_roles_file_is_read_relative_to_the_deployment_file(tmp_path: Path) -> None:
    config = write_deployment(tmp_path, ADMIN_ENGINEER_ROLES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = CliRunner().invoke(cli, ["--config", str(config), "auth", "can-i", "reboot", "n1",
                                      "--as", "alice"])
    assert result.exit_code == 0, result.output
    assert "role admin allows it (tier admin)" in result.output
