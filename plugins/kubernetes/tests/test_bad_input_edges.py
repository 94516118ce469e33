"""The edges that are bad input, for ``operator run``, ``maintenance ...`` and ``invoke``
alike: exit 2 naming the option or the file, never a traceback, nothing sent. A kubeconfig
whose current context does not exist, with none, invalid YAML or empty; a context the
kubeconfig lacks, or an empty one; operator run's timings (the lease's three, --interval,
--resync, --timeout) that are not finite positive numbers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator import write_config

from powerplane_kubernetes.testing.apiserver import KubeApiServer

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
FAST = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
        "--interval", "0.05"]


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POWERPLANE_CRASH_AT")}
    return subprocess.run([sys.executable, "-c", RUN, *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def _kubeconfig_text(kind: str, server: str) -> str:
    cfg: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    }
    if kind == "missing-context":
        return yaml.safe_dump({**cfg, "current-context": "nope"})
    if kind == "no-current-context":
        return yaml.safe_dump(cfg)
    if kind == "invalid-yaml":
        return "clusters: [unclosed\n"
    if kind == "empty":
        return ""
    raise AssertionError(kind)


KUBECONFIG_KINDS = ["missing-context", "no-current-context", "invalid-yaml", "empty"]


@pytest.mark.parametrize("kind", KUBECONFIG_KINDS)
def test_a_kubeconfig_that_cannot_be_used_is_bad_input_for_operator_run(
        tmp_path: Path, api: KubeApiServer, kind: str) -> None:
    config = write_config(tmp_path)
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(_kubeconfig_text(kind, api.url), encoding="utf-8")
    done = cli("--config", str(config), "operator", "run", "--kubeconfig", str(bad),
               "--namespace", "ops", "--until-idle", "--timeout", "60", *FAST)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--kubeconfig" in done.stderr and str(bad) in done.stderr, done.stderr
    assert not api.requests  # nothing was sent


def _kube_lifecycle_config(tmp: Path, kubeconfig: Path) -> Path:
    """A deployment whose cluster port and store are ``kubernetes`` with ``kubeconfig``."""
    config = write_config(tmp)
    raw = yaml.safe_load(config.read_text())
    raw["lifecycle"]["cluster"] = {"type": "kubernetes", "kubeconfig": str(kubeconfig)}
    raw["lifecycle"]["store"] = {"type": "kubernetes", "namespace": "ops"}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


@pytest.mark.parametrize("kind", KUBECONFIG_KINDS)
@pytest.mark.parametrize("command", [
    ["maintenance", "list"],
    ["maintenance", "request", "w1", "--intent", "cordon", "--reason", "rack move today",
     "--confirm-node", "w1", "--ack-preflight"],
    ["invoke", "w1", "reboot", "--reason", "replace the PSU", "--yes"],
    ["operator", "run", "--namespace", "ops", "--until-idle", "--timeout", "60"],
])
def test_a_kubeconfig_that_cannot_be_used_is_bad_input_naming_the_file(
        tmp_path: Path, api: KubeApiServer, kind: str, command: list[str]) -> None:
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(_kubeconfig_text(kind, api.url), encoding="utf-8")
    config = _kube_lifecycle_config(tmp_path, bad)
    done = cli("--config", str(config), *command)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    # the store's and the cluster port's access: whichever loads it first names it
    assert re.search(r"lifecycle\.(cluster|store)\.kubeconfig: ", done.stderr), done.stderr
    assert str(bad) in done.stderr
    assert not api.requests  # nothing was sent


@pytest.mark.parametrize(("option", "value"), [
    *((o, v) for o in ("--lease-duration", "--interval", "--resync", "--timeout")
      for v in ("nan", "inf")),
    # an infinite renew deadline or retry period is refused by the lease-duration rule too
    ("--renew-deadline", "nan"), ("--retry-period", "nan"),
])
def test_operator_run_refuses_a_timing_that_is_not_a_finite_positive_number(
        tmp_path: Path, api: KubeApiServer, option: str, value: str) -> None:
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = cli("--config", str(config), "operator", "run", "--kubeconfig", str(kubeconfig),
               "--namespace", "ops", "--until-idle", "--timeout", "60", *FAST,
               f"{option}={value}", timeout=60)
    assert done.returncode == 2, done.stderr
    assert option in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not api.requests


def test_operator_run_refuses_an_empty_context(tmp_path: Path, api: KubeApiServer) -> None:
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = cli("--config", str(config), "operator", "run", "--kubeconfig", str(kubeconfig),
               "--context", "", "--namespace", "ops", "--until-idle", "--timeout", "60",
               *FAST, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--context" in done.stderr and "Traceback" not in done.stderr
    assert not api.requests


def test_operator_run_names_a_context_the_kubeconfig_lacks(tmp_path: Path,
                                                           api: KubeApiServer) -> None:
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = cli("--config", str(config), "operator", "run", "--kubeconfig", str(kubeconfig),
               "--context", "elsewhere", "--namespace", "ops", "--until-idle",
               "--timeout", "60", *FAST, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--context" in done.stderr and "'elsewhere'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not api.requests
