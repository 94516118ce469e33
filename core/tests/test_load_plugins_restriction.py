"""``POWERPLANE_LOAD_PLUGINS`` mistakes are named.

* A name in the variable that no installed entry point has is a warning on stderr, naming
  it and the installed ones (it was silently ignored).
* ``powerplane plugins`` says the variable restricted the table: what it left out, and the
  names it holds that no plugin has (table and JSON).
* An unknown channel type the variable hid ("unknown channel type 'redfish'") says the
  variable did not load the installed plugin; a lifecycle port type and a secret kind too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from powerplane.config import parse_config
from powerplane.errors import ConfigError
from powerplane.plugins import ENV_RESTRICT, load_plugins

RUN = [sys.executable, "-m", "powerplane.cli"]


def _cli(*args: str, restrict: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_RESTRICT}
    if restrict is not None:
        env[ENV_RESTRICT] = restrict
    return subprocess.run([*RUN, *args], capture_output=True, text=True, timeout=60, env=env,
                          check=False)


def test_an_unknown_name_in_the_variable_warns_on_stderr(caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_RESTRICT, "simulated,nosuch")
    reg = load_plugins()
    assert reg.restriction is not None
    assert reg.restriction.names == ("simulated", "nosuch")
    assert reg.restriction.unknown == ("nosuch",)
    assert "simulated" not in reg.restriction.not_loaded
    assert "redfish" in reg.restriction.not_loaded
    assert any("POWERPLANE_LOAD_PLUGINS names 'nosuch', which no installed plugin has"
               in r.getMessage() for r in caplog.records)
    res = _cli("plugins", restrict="simulated,nosuch")
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith(
        "warning: POWERPLANE_LOAD_PLUGINS names 'nosuch', which no installed plugin has "
        "(installed: ")


def test_no_variable_no_restriction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_RESTRICT, raising=False)
    assert load_plugins().restriction is None
    res = _cli("plugins", "-o", "json", restrict=None)
    assert json.loads(res.stdout)["restricted"] is None
    assert "restricted by" not in _cli("plugins", restrict=None).stdout


def test_the_plugins_table_says_the_variable_restricted_it() -> None:
    res = _cli("plugins", restrict="talos,nosuch")
    assert res.returncode == 0, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("restricted by POWERPLANE_LOAD_PLUGINS=talos,nosuch: not loaded: ")
    assert "redfish" in last and "ipmi" in last
    assert last.endswith("; no installed plugin is named nosuch")
    data = json.loads(_cli("plugins", "-o", "json", restrict="talos,nosuch").stdout)
    assert data["restricted"]["variable"] == "POWERPLANE_LOAD_PLUGINS"
    assert data["restricted"]["names"] == ["talos", "nosuch"]
    assert data["restricted"]["unknown"] == ["nosuch"]
    assert "redfish" in data["restricted"]["not_loaded"]
    assert [p["name"] for p in data["plugins"]] == ["talos"]


def test_an_unknown_channel_type_the_variable_hid_says_so(tmp_path: Path) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text("channels:\n  bmc:\n    type: redfish\n    endpoint: https://127.0.0.1\n"
                    "    username: admin\n    password: {env: BMC_PASSWORD}\n")
    res = _cli("--config", str(path), "offers", restrict="talos")
    assert res.returncode == 2, res.stderr
    assert ("channels.bmc.type (line 3): unknown channel type 'redfish'; registered types: "
            "talos; plugin 'redfish' is installed but POWERPLANE_LOAD_PLUGINS=talos did not "
            "load it (add it to POWERPLANE_LOAD_PLUGINS, or unset the variable)") in res.stderr
    empty = _cli("--config", str(path), "offers", restrict="")
    assert 'POWERPLANE_LOAD_PLUGINS="" did not load it' in empty.stderr
    plain = _cli("--config", str(path), "offers", "nosuch", restrict=None)
    assert "POWERPLANE_LOAD_PLUGINS" not in plain.stderr  # not set: nothing hid it


def test_a_type_no_installed_plugin_has_names_what_the_variable_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_RESTRICT, "simulated")
    reg = load_plugins()
    with pytest.raises(ConfigError) as info:
        parse_config({"channels": {"x": {"type": "acme"}},
                      "lifecycle": {"cluster": {"type": "kubernetes"}}}, registry=reg)
    messages = {p.path: p.message for p in info.value.problems}
    assert "POWERPLANE_LOAD_PLUGINS=simulated left out the installed plugins" in messages[
        "channels.x.type"]
    assert "the type may be one of theirs" in messages["channels.x.type"]
    assert "POWERPLANE_LOAD_PLUGINS=simulated" in messages["lifecycle.cluster.type"]
