"""Fixtures of every test tree (the pytest rootdir's conftest; see testpaths in pyproject.toml).

- ``state_home`` (autouse, once a session): ``$XDG_STATE_HOME`` points at a directory of
  the session's own, set in ``os.environ`` so that every CLI child inherits it. Every
  direct call (``invoke``) is audited before it is sent, by default into
  ``$XDG_STATE_HOME/powerplane/audit.jsonl``: no test writes the audit file of the home
  of whoever runs the tests. ``$XDG_CACHE_HOME`` likewise: the CLI keeps validated
  deployment files in ``$XDG_CACHE_HOME/powerplane`` (:mod:`powerplane.config_cache`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's ``$XDG_STATE_HOME`` (what it was is put back at the end)."""
    home = tmp_path_factory.mktemp("xdg-state")
    cache = tmp_path_factory.mktemp("xdg-cache")
    before = {name: os.environ.get(name) for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME")}
    os.environ["XDG_STATE_HOME"] = str(home)
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        yield home
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
