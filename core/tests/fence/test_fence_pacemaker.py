"""``fence_powerplane`` through pacemaker's own tooling on one machine, without a cluster.

Pacemaker runs fence agents from ``/usr/sbin`` (its ``fence_`` agents directory), so the
test puts a two-line wrapper there for the run (root only; removed afterwards; an agent of
that name it did not write is left alone and the test skips). What runs here:

- ``stonith_admin --metadata --agent fence_powerplane`` and ``stonith_admin --validate``
  (the agent's ``metadata`` and ``validate-all``, run by the library, no daemon);
- ``pacemaker-fenced --stand-alone`` (the fencer daemon without a cluster) with a device
  registered by ``stonith_admin --register``: ``--list-targets`` (``list``), ``--query``
  (``monitor``), ``--fence`` (``off``), ``--reboot`` and ``--unfence`` (``on``), each run
  by the fencer exactly as in a cluster: options on stdin, the exit code read.

``crm_resource --validate --class stonith`` does not run here: pacemaker 2.1 says "Manual
execution of the stonith standard is unsupported".
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fence_support import AGENT, need, write_deployment

from powerplane.testing import Subprocess

WRAPPER = Path("/usr/sbin/fence_powerplane")
MARK = "# written by core/tests/fence/test_fence_pacemaker.py"


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    """``/usr/sbin/fence_powerplane`` running this checkout's agent, for this module."""
    need("stonith_admin", "pacemaker-cli-utils")
    if os.geteuid() != 0:
        pytest.skip("pacemaker runs agents from /usr/sbin only: the test must run as root")
    if WRAPPER.exists() and MARK not in WRAPPER.read_text(errors="replace"):
        pytest.skip(f"{WRAPPER} exists and is not this test's")
    WRAPPER.write_text(f'#!/bin/sh\n{MARK}\nexec "{AGENT}" "$@"\n')
    WRAPPER.chmod(0o755)
    try:
        yield WRAPPER
    finally:
        WRAPPER.unlink(missing_ok=True)


def admin(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["stonith_admin", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    # the fencer runs agents in its own working directory: every path absolute
    return write_deployment(tmp_path / "pp.yaml", {
        "channels": {
            "lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "graceful": False, "machines": {"m1": "on", "m2": "on"},
                    "state_file": str(tmp_path / "machines.json")},
            "dark": {"type": "simulated", "verbs": ["reboot", "shutdown"], "graceful": False,
                     "machines": {"m3": "on"}, "state_file": str(tmp_path / "dark.json")},
        },
        "nodes": {
            "n1": {"channels": [{"channel": "lab", "target": "m1"}]},
            "n2": {"channels": [{"channel": "lab", "target": "m2"}]},
            "n3": {"channels": [{"channel": "dark", "target": "m3"}]},
        },
        "audit": {"path": str(tmp_path / "audit.jsonl")},
    })


def status(config: Path, node: str) -> int:
    return subprocess.run([str(AGENT), "-o", "status", "-n", node, "--config", str(config)],
                          capture_output=True, timeout=60, check=False).returncode


def test_stonith_admin_reads_the_metadata_and_validates(installed: Path,
                                                        deployment: Path) -> None:
    meta = admin("--metadata", "--agent", "fence_powerplane")
    assert meta.returncode == 0, meta.stderr
    assert '<resource-agent name="fence_powerplane"' in meta.stdout
    assert '<parameter name="plug"' in meta.stdout
    good = admin("--validate", "--agent", "fence_powerplane", "--option",
                 f"config={deployment}", "--option", "plug=n1")
    assert good.returncode == 0 and "succeeded" in good.stdout, good.stdout + good.stderr
    bad = admin("--validate", "--agent", "fence_powerplane", "--option",
                f"config={deployment}", "--option", "plug=nope")
    assert bad.returncode != 0 and "unknown node 'nope'" in bad.stdout + bad.stderr
    missing = admin("--validate", "--agent", "fence_powerplane", "--option",
                    f"config={deployment.parent / 'absent.yaml'}")
    assert missing.returncode != 0 and "does not exist" in missing.stdout + missing.stderr


@pytest.fixture
def fencer(installed: Path, tmp_path: Path) -> Iterator[None]:
    """pacemaker-fenced in stand-alone mode (no cluster), stopped by its own handle."""
    daemon = need("/usr/lib/pacemaker/pacemaker-fenced", "pacemaker")
    proc = Subprocess([daemon, "--stand-alone", "-l", tmp_path / "fenced.log"],
                      log=tmp_path / "fenced.out")
    try:
        deadline = time.monotonic() + 30
        while admin("--list-registered", timeout=10).returncode not in (0, 105):
            if time.monotonic() > deadline:
                pytest.fail("pacemaker-fenced --stand-alone did not answer")
            time.sleep(0.2)
        yield
    finally:
        proc.stop()


def test_the_fencer_runs_every_action_as_in_a_cluster(fencer: None, deployment: Path) -> None:
    reg = admin("--register", "pp", "--agent", "fence_powerplane", "--option",
                f"config={deployment}", "--option", "pcmk_host_check=dynamic-list")
    assert reg.returncode == 0, reg.stderr
    targets = admin("--list-targets", "pp")
    assert targets.returncode == 0 and targets.stdout.split()[:3] == ["n1", "n2", "n3"]
    assert admin("--query", "pp").returncode == 0  # monitor
    fenced = admin("--fence", "n1", "--timeout", "60")
    assert fenced.returncode == 0, fenced.stderr
    assert status(deployment, "n1") == 2  # read off by another process
    assert admin("--unfence", "n1", "--timeout", "60").returncode == 0
    assert status(deployment, "n1") == 0
    assert admin("--reboot", "n2", "--timeout", "60").returncode == 0
    assert status(deployment, "n2") == 0
    # no channel of n3 can power it on: the fencer's off is refused, the machine stays on
    refused = admin("--fence", "n3", "--timeout", "30")
    assert refused.returncode != 0
    assert status(deployment, "n3") == 0
    log = (deployment.parent / "fenced.log").read_text(errors="replace")
    assert "shutdown not offered for n3" in log
