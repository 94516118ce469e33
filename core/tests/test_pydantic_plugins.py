"""pydantic finds its plugins itself: the console script puts nothing in place of pydantic's
loader, with or without a pydantic plugin installed. With one installed (a real dist-info on
``PYTHONPATH``) the plugin sees every model the command validates.

The stand-in loader the console script used to put in ``sys.modules`` (to spare a one-shot
command the import of :mod:`importlib.metadata`) is gone, and with it the tests that pinned
it: that it replaced the loader, left an imported one alone, and gave what pydantic's gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_without_pydantic_plugins_pydantic_keeps_its_own_loader(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert "n1: on" in proc.stdout, proc.stderr
    assert "LOADER pydantic" in proc.stdout  # was "ours": the stand-in, removed
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

