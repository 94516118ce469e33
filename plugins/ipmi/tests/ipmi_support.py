"""Helpers for the ipmi tests: channel and deployment files for a peer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from powerplane_ipmi.channel import IpmiChannel
from powerplane_ipmi.config import IpmiConfig


def channel(peer: Any, user: str = "oper", **keys: Any) -> IpmiChannel:
    """An ipmi channel logging in to ``peer`` as ``user``."""
    cfg = IpmiConfig(username=user, password={"file": str(peer.secret_file(user))}, **keys)
    return IpmiChannel("bmc", cfg)


def deployment(path: Path, peer: Any, user: str = "oper", target: str | None = None,
               **keys: Any) -> Path:
    """A deployment file with one ipmi channel and node ``n1`` on ``peer``."""
    chan = {"type": "ipmi", "username": user,
            "password": {"file": str(peer.secret_file(user))}, **keys}
    doc = {"channels": {"bmc": chan},
           "nodes": {"n1": {"channels": [{"channel": "bmc",
                                           "target": target or peer.address}]}},
           "limits": {"timeout_s": 30}}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``powerplane ARGS`` in a child process; output captured."""
    run_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "powerplane.cli", *args], capture_output=True,
                          text=True, timeout=120, env=run_env, check=False)


def need_ipmi_sim() -> None:
    """Skip (or, under CI, fail) when ipmi_sim is not installed."""
    if shutil.which("ipmi_sim") is None:
        why = "ipmi_sim is not installed (Debian package openipmi: apt-get install openipmi)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must have it", pytrace=False)
        pytest.skip(why)
