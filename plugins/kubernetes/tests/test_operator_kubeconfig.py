"""``operator run``'s API access: ``--kubeconfig`` must name a file (a usage error
otherwise), and without it the operator finds its access as kubectl and the ``{k8s:}``
secret kind do (one resolution): in the cluster the pod's service account, else
``$KUBECONFIG``, else ``~/.kube/config``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from powerplane import PowerHost
from powerplane.cli import cli
from powerplane.config import load_config
from powerplane.lifecycle import Lifecycle
from powerplane.lifecycle.ceremony import Ceremony
from powerplane_kubernetes.operator.run import Operator, OperatorOptions
from powerplane_kubernetes.secrets import environment_kubeconfig
from powerplane_kubernetes.testing.apiserver import KubeApiServer

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
FAST = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
        "--interval", "0.05"]


def write_config(tmp: Path) -> Path:
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "machines": {"w1": "on"}}},
        "nodes": {"w1": {"site": "east", "channels": [{"channel": "lab", "target": "w1"}]}},
        "lifecycle": {"store": "lifecycle.db", "cluster": {"type": "simulated"},
                      "no_control_plane": True},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def request_cordon(config: Path) -> None:
    """A maintenance for the operator to drive (a cordon: it parks, and the run is idle)."""
    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                await lc.request("w1", "cordon", Ceremony(reason="rack move today"))
            finally:
                lc.close()

    asyncio.run(go())


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


def test_a_kubeconfig_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(config), "operator", "run",
                                      "--kubeconfig", str(tmp_path / "nonexistent"),
                                      "--until-idle"])
    text = result.output + result.stderr
    assert result.exit_code == 2, text
    assert "Usage:" in text and "'--kubeconfig'" in text and "does not exist" in text
    assert "invalid config" not in text and "Traceback" not in text


def test_the_environment_kubeconfig_is_found_as_kubectl_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nowhere = tmp_path / "no-service-account"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert environment_kubeconfig(nowhere) == home / ".kube" / "config"
    listed = tmp_path / "listed"
    listed.write_text("{}")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(listed)]))
    assert environment_kubeconfig(nowhere) == listed  # the first of the list that exists
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert environment_kubeconfig(nowhere) is None  # nothing found: the service account
    account = tmp_path / "account"
    account.mkdir()
    (account / "token").write_text("t")
    monkeypatch.setenv("KUBECONFIG", str(listed))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert environment_kubeconfig(account) is None  # in the cluster: the pod's account


def test_without_kubeconfig_the_operator_takes_the_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kc = tmp_path / "kc"
    kc.write_text("{}")
    monkeypatch.setenv("KUBECONFIG", str(kc))
    op = Operator(OperatorOptions(config=str(config), namespace="ops", identity="r1"))
    access, _, where = op._access(load_config(config))
    assert (access.kubeconfig, where) == (str(kc), "$KUBECONFIG")


@pytest.mark.parametrize("how", ["KUBECONFIG", "~/.kube/config"])
def test_operator_run_reaches_the_api_server_through_the_environment(
    tmp_path: Path, api: KubeApiServer, how: str
) -> None:
    config = write_config(tmp_path)
    request_cordon(config)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POWERPLANE_CRASH_AT")}
    if how == "KUBECONFIG":
        env["KUBECONFIG"] = str(kubeconfig)
    else:
        home = tmp_path / "home"
        (home / ".kube").mkdir(parents=True)
        (home / ".kube" / "config").write_text(kubeconfig.read_text())
        env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", RUN, "--config", str(config), "operator", "run",
         "--namespace", "ops", "--identity", "r1", "--until-idle", "--timeout", "60", *FAST],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert api.requests_to("POST", "/apis/coordination.k8s.io/v1/namespaces/ops/leases")
