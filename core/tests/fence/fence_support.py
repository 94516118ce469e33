"""Helpers for the fence-agent tests: the agent run as the fencer runs it, deployments."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

AGENT = Path(sys.executable).with_name("fence_powerplane")
"""The console script, installed beside this interpreter."""

RNG = Path("/usr/share/cluster/relaxng/metadata.rng")
"""fence-agents' own RelaxNG schema of agent metadata (Debian package fence-agents)."""


def need(tool: str, package: str) -> str:
    """The path of ``tool``; skip without it (fail under CI, which installs ``package``)."""
    found = shutil.which(tool) or (tool if Path(tool).is_file() else None)
    if found is None:
        why = f"{tool} is not installed (Debian package {package})"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must have it", pytrace=False)
        pytest.skip(why)
    return found


def stdin_lines(**options: Any) -> str:
    """``key=value`` lines, as the fencer writes them."""
    return "".join(f"{k}={v}\n" for k, v in options.items())


def agent(*args: str, stdin: str = "", cwd: Path | None = None,
          env: dict[str, str] | None = None, exe: str | Path = AGENT,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The agent in its own process: options as ``args`` or as ``stdin`` lines, stdin a pipe
    (never a terminal), output captured."""
    run_env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    run_env.update(env or {})
    return subprocess.run([str(exe), *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, env=run_env, timeout=timeout, check=False)


def write_deployment(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path
