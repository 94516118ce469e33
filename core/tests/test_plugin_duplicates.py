"""A vendor plugin that takes a built-in's name, or its channel type name, never replaces it.

Real distributions, pip-installed into a site directory that comes first on ``sys.path``
(``PYTHONPATH``): the place where the first one found used to win silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

POWERPLANE = [sys.executable, "-m", "powerplane.cli"]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "9.9.9"
requires-python = ">=3.11"

[project.entry-points.powerplane]
{ep} = "{module}"

[tool.setuptools]
py-modules = ["{module}"]
"""

MODULE = '''\
"""A vendor plugin (for tests) registering the channel type {ctype!r}."""

from pydantic import BaseModel

from powerplane import ChannelType, hookimpl


class Config(BaseModel):
    pass


@hookimpl
def register_channel_types(register):
    register(ChannelType("{ctype}", Config, lambda name, config: None))
'''

# (distribution, entry-point name, module, channel type it registers)
VENDORS = [
    ("acme-sim", "simulated", "acme_sim_plugin", "acme-sim"),
    ("acme-redfish", "redfish", "acme_redfish_plugin", "acme-redfish"),
    ("acme-types", "acme", "acme_types_plugin", "redfish"),
]


@pytest.fixture(scope="module")
def vendor_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    for dist, ep, module, ctype in VENDORS:
        src = tmp_path_factory.mktemp(dist)
        (src / "pyproject.toml").write_text(PYPROJECT.format(dist=dist, ep=ep, module=module))
        (src / f"{module}.py").write_text(MODULE.format(ctype=ctype))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
             "--target", str(site), str(src)],
            check=True, capture_output=True, timeout=300,
        )
    return site


def run_cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env.pop("POWERPLANE_LOAD_PLUGINS", None)
    return subprocess.run([*POWERPLANE, *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_duplicate_names_are_failures_of_the_second_distribution(vendor_site: Path) -> None:
    res = run_cli(vendor_site, "plugins", "-o", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    loaded = {p["name"]: p for p in data["plugins"]}
    assert loaded["simulated"]["distribution"] == "powerplane"
    assert loaded["simulated"]["channel_types"] == ["simulated"]
    assert loaded["redfish"]["distribution"] == "powerplane-redfish"
    assert loaded["redfish"]["channel_types"] == ["redfish"]
    assert "acme" not in loaded
    failures = {f["distribution"]: f for f in data["failures"]}
    sim = failures["acme-sim"]
    assert sim["name"] == "simulated"
    assert "plugin name 'simulated' is already taken by distribution 'powerplane'" in sim["error"]
    red = failures["acme-redfish"]
    assert red["name"] == "redfish"
    assert "already taken by distribution 'powerplane-redfish'" in red["error"]
    types = failures["acme-types"]
    assert types["name"] == "acme"
    assert types["error"] == "channel type 'redfish' is already registered by plugin 'redfish'"


def test_the_table_shows_each_failure_and_the_builtin_still_works(
    vendor_site: Path, tmp_path: Path
) -> None:
    table = run_cli(vendor_site, "plugins")
    assert table.returncode == 0, table.stderr
    assert "failed plugin simulated (acme-sim 9.9.9)" in table.stdout
    assert "failed plugin redfish (acme-redfish 9.9.9)" in table.stdout
    assert "Traceback" not in table.stdout + table.stderr
    cfg = tmp_path / "p.yaml"
    cfg.write_text("channels:\n  lab: {type: simulated, machines: {m1: 'on'}}\n"
                   "nodes:\n  n1: {channels: [{channel: lab, target: m1}]}\n")
    state = run_cli(vendor_site, "--config", str(cfg), "state", "n1", "-o", "json")
    assert state.returncode == 0, state.stderr
    assert json.loads(state.stdout)["state"] == "on"


def test_add_module_with_a_taken_name_keeps_the_first() -> None:
    from powerplane.plugins import load_plugins

    reg = load_plugins()

    class Other:
        pass

    reg.add_module("simulated", Other(), "acme-sim", "1")
    assert reg.manager.get_plugin("simulated") is not None  # the built-in is still registered
    assert "simulated" in reg.channel_types
    assert [f.distribution for f in reg.failures if f.name == "simulated"] == ["acme-sim"]
