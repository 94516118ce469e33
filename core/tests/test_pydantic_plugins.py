"""The console script answers pydantic's plugin lookup itself only when no distribution
declares a pydantic plugin: then a one-shot command never imports :mod:`importlib.metadata`;
with a pydantic plugin installed (a real dist-info on ``PYTHONPATH``) pydantic's own loader
runs and the plugin sees every model the command validates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from powerplane.cli import _pydantic_plugins

CONFIG = "channels:\n  lab:\n    type: simulated\n    machines: {m1: 'on'}\n" \
         "nodes:\n  n1:\n    channels: [{channel: lab, target: m1}]\n"

RUN = ("import sys\nfrom powerplane.cli import main\n"
       "try:\n    main(['--config', sys.argv[1], 'state', 'n1'])\n"
       "except SystemExit as exc:\n    code = exc.code\n"
       "loader = sys.modules.get('pydantic.plugin._loader')\n"
       "print('METADATA', 'importlib.metadata' in sys.modules)\n"
       "print('LOADER', 'ours' if loader is not None and 'read by powerplane' in "
       "(loader.__doc__ or '') else 'pydantic')\n"
       "print('EXIT', code)\n")

PLUGIN = '''\
"""A pydantic plugin (for tests): says which models it was asked about."""
import sys


class Recorder:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind,
                             config, plugin_settings):
        print("PLUGIN SAW", schema_type_path.name, file=sys.stderr)
        return None, None, None


plugin = Recorder()
'''


def _run(tmp_path: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "powerplane.yaml"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_LOAD_PLUGINS"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", RUN, str(config)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_without_pydantic_plugins_a_command_reads_no_metadata_module(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert "n1: on" in proc.stdout, proc.stderr
    assert "METADATA False" in proc.stdout
    assert "LOADER ours" in proc.stdout
    assert "EXIT 0" in proc.stdout


def test_an_installed_pydantic_plugin_is_found_and_called(tmp_path: Path) -> None:
    site = tmp_path / "site"
    meta = site / "pp_recorder-1.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: pp-recorder\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text("[pydantic]\nrecorder = pp_recorder:plugin\n")
    (site / "pp_recorder.py").write_text(PLUGIN)
    proc = _run(tmp_path, str(site))
    assert "n1: on" in proc.stdout, proc.stderr
    assert "LOADER pydantic" in proc.stdout
    assert "PLUGIN SAW" in proc.stderr  # pydantic's loader found it and used it
    assert "EXIT 0" in proc.stdout


def test_an_imported_loader_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic.plugin._loader as real

    monkeypatch.setitem(sys.modules, _pydantic_plugins.LOADER, real)
    assert _pydantic_plugins.answer_without_scan() is False
    assert sys.modules[_pydantic_plugins.LOADER] is real


def test_the_stand_in_gives_what_pydantic_would_give(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic.plugin._loader as real

    monkeypatch.delitem(sys.modules, _pydantic_plugins.LOADER)
    assert _pydantic_plugins.answer_without_scan() is True  # nothing here declares one
    stand_in = sys.modules[_pydantic_plugins.LOADER]
    assert list(stand_in.get_plugins()) == list(real.get_plugins()) == []
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == real.PYDANTIC_ENTRY_POINT_GROUP
    assert {n for n in vars(real) if not n.startswith("__") and n in
            ("get_plugins", "PYDANTIC_ENTRY_POINT_GROUP", "_plugins", "_loading_plugins")} \
        <= set(vars(stand_in))
