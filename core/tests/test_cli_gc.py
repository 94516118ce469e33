"""The garbage collector is tuned by the command's own process only, once for the whole command
(:func:`powerplane.cli._common.tune_gc`: what is alive after the load frozen, the young
threshold raised); a command run in-process (a test's, an application's) leaves it alone.
That library code never tunes it: ``test_library_gc.py``."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane.cli import cli
from powerplane.cli._common import YOUNG_THRESHOLD

CONFIG = ("channels:\n  lab:\n    type: simulated\n    machines: {m1: 'on', m2: 'on'}\n"
          "nodes:\n  n1:\n    channels: [{channel: lab, target: m1}]\n"
          "  n2:\n    channels: [{channel: lab, target: m2}]\n")

RUN = ("import gc, sys\nfrom powerplane.cli import main\n"
       "before = gc.get_threshold()\n"
       "try:\n    main(['--config', sys.argv[1], 'state', 'n1'])\n"
       "except SystemExit as exc:\n    code = exc.code\n"
       "print('BEFORE', before[0])\n"
       "print('AFTER', gc.get_threshold()[0], gc.get_freeze_count() > 0)\n"
       "print('EXIT', code)\n")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's settings as the test found them, whatever the test did."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_the_command_process_freezes_after_the_load_and_raises_the_young_threshold(
        config: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_LOAD_PLUGINS"}
    proc = subprocess.run([sys.executable, "-c", RUN, str(config)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert "EXIT 0" in proc.stdout, proc.stdout + proc.stderr
    assert "BEFORE 700" in proc.stdout  # CPython's default when the command starts
    assert f"AFTER {YOUNG_THRESHOLD} True" in proc.stdout, proc.stdout


def test_an_in_process_call_leaves_the_collector_as_it_was(config: Path, collector: None) -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    result = CliRunner().invoke(cli, ["--config", str(config), "state", "n1"])
    assert result.exit_code == 0, result.output
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
