"""Plugin discovery: lazy, isolated, restricted by POWERPLANE_LOAD_PLUGINS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from powerplane import ChannelType, hookimpl
from powerplane.plugins import load_plugins

HERE = Path(__file__).parent
BROKEN = HERE / "fixtures" / "broken-plugin"
POWERPLANE = [sys.executable, "-m", "powerplane.cli"]


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The broken plugin distribution, really installed (pip) into a site directory."""
    target = tmp_path_factory.mktemp("site")
    # setuptools builds in the source folder (build/, *.egg-info): build a copy, never the fixture
    source = tmp_path_factory.mktemp("broken-src") / "broken-plugin"
    shutil.copytree(BROKEN, source)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    return target


def test_installing_the_broken_fixture_leaves_nothing_in_the_source_tree(
    broken_site: Path,
) -> None:
    left = sorted(str(p.relative_to(BROKEN)) for p in BROKEN.rglob("*")
                  if "__pycache__" not in p.parts)
    assert left == [".gitignore", "pyproject.toml", "src", "src/powerplane_broken_example",
                    "src/powerplane_broken_example/__init__.py"]
    assert (broken_site / "powerplane_broken_example" / "__init__.py").is_file()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([*POWERPLANE, *args], capture_output=True, text=True, env=full,
                          timeout=60)


def test_broken_plugin_is_reported_and_the_others_still_load(broken_site: Path) -> None:
    res = run_cli("plugins", "-o", "json", env={"PYTHONPATH": str(broken_site)})
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    failures = {f["name"]: f for f in data["failures"]}
    assert failures["broken"]["distribution"] == "powerplane-broken-example"
    assert "ModuleNotFoundError" in failures["broken"]["error"]
    assert "powerplane_dependency_that_does_not_exist" in failures["broken"]["error"]
    loaded = {p["name"]: p for p in data["plugins"]}
    assert loaded["simulated"]["channel_types"] == ["simulated"]
    table = run_cli("plugins", env={"PYTHONPATH": str(broken_site)})
    assert "failed plugin broken" in table.stdout
    assert "Traceback" not in table.stdout + table.stderr


def test_load_plugins_env_restricts_what_loads(broken_site: Path) -> None:
    res = run_cli("plugins", "-o", "json",
                  env={"PYTHONPATH": str(broken_site), "POWERPLANE_LOAD_PLUGINS": "simulated"})
    data = json.loads(res.stdout)
    assert [p["name"] for p in data["plugins"]] == ["simulated"]
    assert data["failures"] == []
    none = json.loads(run_cli("plugins", "-o", "json",
                              env={"POWERPLANE_LOAD_PLUGINS": ""}).stdout)
    restricted = none.pop("restricted")  # the table says the variable restricted it
    assert none == {"plugins": [], "failures": []}
    assert restricted["names"] == [] and restricted["unknown"] == []
    assert "simulated" in restricted["not_loaded"]


@pytest.mark.perf
def test_importing_powerplane_loads_no_plugin() -> None:
    code = (
        "import sys, powerplane, powerplane.cli;"
        "from powerplane import PowerHost, Verb;"
        "print(sorted(m for m in sys.modules if m in "
        "('powerplane.sim.channel','sushy','boto3','grpclib','pysnmp','powerplane_redfish')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", "perf (import time): importing powerplane imports no plugin"


@pytest.mark.perf
def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv=['powerplane','--help']\n"
        "try:\n  runpy.run_module('powerplane.cli', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy=[m for m in ('sushy','boto3','botocore','grpc','grpclib','pysnmp','pydantic',"
        "'rich','httpx') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    # 'importlib.metadata' and 'email' are no longer in the list: --help reads the extension
    # commands' entry points by the standard reader (core's own reader, which spared it that
    # import, is gone)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "HEAVY []" in out, f"perf (--help startup): --help imports no heavy library: {out}"


class _Raising:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        raise RuntimeError("vendor bug while registering")


class _Cfg(BaseModel):
    pass


class _Dup:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
        register(ChannelType("simulated", _Cfg, lambda n, c: None))  # type: ignore[arg-type,return-value]


@pytest.fixture
def registry_with_bad_plugins() -> Iterator[object]:
    reg = load_plugins()
    reg.add_module("raising", _Raising())
    reg.add_module("dup", _Dup())
    yield reg


def test_plugin_raising_in_its_hook_is_isolated(registry_with_bad_plugins: object) -> None:
    from powerplane.plugins import Registry

    assert isinstance(registry_with_bad_plugins, Registry)
    reg = registry_with_bad_plugins
    errors = {f.name: f.error for f in reg.failures}
    assert errors["raising"] == "RuntimeError: vendor bug while registering"
    assert errors["dup"] == "channel type 'simulated' is already registered by plugin 'simulated'"
    assert "simulated" in reg.channel_types
    assert reg.owners["simulated"] == "simulated"
    reg.remove("dup")
    assert reg.manager.get_plugin("raising") is None


def test_every_hook_is_documented_and_tested() -> None:
    """Meta-test (after llm): each hookspec has a docstring, is named in the module's
    docstring, is collected by the registry, and has a test that implements it."""
    import inspect

    from powerplane import hookspecs, plugins

    tests = "".join(p.read_text() for p in HERE.rglob("test_*.py"))
    collected = inspect.getsource(plugins.Registry)  # add_module; demo peers on first use
    specs = [name for name in dir(hookspecs)
             if callable(getattr(hookspecs, name))
             and hasattr(getattr(hookspecs, name), "powerplane_spec")]
    assert {"register_channel_types", "register_cluster_types", "register_storage_types",
            "register_store_types", "register_secret_kinds", "register_demo_peers"} <= set(specs)
    for name in specs:
        fn = getattr(hookspecs, name)
        assert fn.__doc__ and len(fn.__doc__) > 40, name
        assert f"``{name}``" in (hookspecs.__doc__ or ""), f"hook {name} not in the module doc"
        assert f"hooks.{name}" in collected, f"hook {name} is not collected by the registry"
        assert f"def {name}" in tests, f"hook {name} has no test"


@pytest.mark.perf
def test_plugin_discovery_imports_no_heavy_library() -> None:
    """`powerplane plugins` loads every installed plugin; none may import its client library."""
    code = (
        "import sys, runpy\n"
        "sys.argv=['powerplane','plugins']\n"
        "try:\n  runpy.run_module('powerplane.cli', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy=[m for m in ('sushy','boto3','botocore','grpc','grpclib','pysnmp','httpx',"
        "'google.protobuf') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "print('PEERS', sorted(m for m in sys.modules if m.endswith('.peer')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "HEAVY []" in out, f"perf (plugins startup): loading plugins imports no client: {out}"
    assert "PEERS []" in out  # demo peers are collected when the demo asks, not at load


def test_project_distributions_name_every_plugin_distribution_in_the_repository() -> None:
    """Every ``plugins/*/pyproject.toml`` is a project distribution (loaded right after core's),
    and nothing else is: a plugin added to the repository without its name here would be
    ranked as a third party's."""
    import tomllib
    from pathlib import Path

    from powerplane.plugins import PROJECT_DISTRIBUTIONS

    root = Path(__file__).resolve().parents[2] / "plugins"
    names = {tomllib.loads(p.read_text())["project"]["name"]
             for p in root.glob("*/pyproject.toml")}
    assert names == set(PROJECT_DISTRIBUTIONS)
