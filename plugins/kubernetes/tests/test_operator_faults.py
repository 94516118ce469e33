"""Faults the operator survives: the test API server answering 500 or 429 on the
``nodemaintenances`` watch, 500, 429 or a dropped connection on the first list, an API
server not listening yet, and a transient answer while a ``{k8s:}`` secret is read.

Every fault is injected by the test API server (``fail_requests``) and each test checks
that the faults it injected were served, so none passes without them. No timing
threshold: explicit timeouts only.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator import request
from test_operator_watch import kube_store_config, replica, until

from powerplane_kubernetes.operator.run import Operator
from powerplane_kubernetes.testing.apiserver import KubeApiServer, free_port

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
NM = "powerplane.io/v1alpha1/nodemaintenances"
FAST = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
        "--interval", "0.05"]


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


def cli(*args: str, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POWERPLANE_CRASH_AT")}
    return subprocess.run([sys.executable, "-c", RUN, *args], env={**base, **(env or {})},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def phase(api: KubeApiServer, name: str) -> str:
    obj = next(o for o in api.objects(NM) if o["metadata"]["name"] == name)
    return str((obj.get("status") or {}).get("phase"))


# -- the watch and the first list ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["500", "429"])
async def test_a_failed_watch_is_taken_up_again_and_the_operator_keeps_running(
        tmp_path: Path, api: KubeApiServer, fault: str) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    config = kube_store_config(tmp_path, kubeconfig)
    api.fail_requests("watch", NM, fault, fault)
    op = replica(config, kubeconfig)
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: [e for e in op.trace if e == ("watch", "failed")] == [
            ("watch", "failed")] * 2 or task.done(), "two failed watches")
        assert not task.done(), task.result()  # raises what ended it
        name = await asyncio.to_thread(request, config)
        await until(lambda: op.results.get(name) == "done" or task.done(), f"{name} done")
        assert not task.done(), task.result()
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert api.faults_served == [f"{fault} watch {NM}"] * 2
    assert phase(api, name) == "Complete"
    relisted = [c for k, c in op.trace if k == "watch" and c.startswith("listed at")]
    assert len(relisted) >= 3  # the first list, and one after each failure


@pytest.mark.slow
@pytest.mark.parametrize("faults", [("500", "429"), ("disconnect", "500", "429")])
def test_a_failed_first_list_is_tried_again_with_or_without_until_idle(
        tmp_path: Path, api: KubeApiServer, faults: tuple[str, ...]) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    config = kube_store_config(tmp_path, kubeconfig)
    name = request(config, intent="cordon")
    api.fail_requests("list", NM, *faults)
    done = cli("--config", str(config), "operator", "run", "--kubeconfig", str(kubeconfig),
               "--namespace", "ops", "--identity", "r1", "--until-idle", "--timeout", "90",
               *FAST)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert api.faults_served == [f"{f} list {NM}" for f in faults]
    assert "again in 0.2 s" in done.stderr and "again in 0.4 s" in done.stderr
    assert phase(api, name) == "Cordoned"


@pytest.mark.slow
async def test_an_api_server_not_listening_yet_is_waited_for(tmp_path: Path) -> None:
    port = free_port()
    late = KubeApiServer(port=port)
    kubeconfig = tmp_path / "kubeconfig"
    config = kube_store_config(tmp_path, kubeconfig)
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "kmock",
           "clusters": [{"name": "kmock",
                         "cluster": {"server": f"http://127.0.0.1:{port}"}}],
           "users": [{"name": "kmock", "user": {"token": late.admin_token}}],
           "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}]}
    kubeconfig.write_text(json.dumps(cfg), encoding="utf-8")
    op: Operator = replica(config, kubeconfig)
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: op.trace.count(("start", "failed")) >= 2 or task.done(),
                    "two refused starts")
        assert not task.done(), task.result()
        assert "refused" in (op._start_error or "").lower() or "reach" in (
            op._start_error or ""), op._start_error
        late.start()
        name = await asyncio.to_thread(request, config)
        await until(lambda: op.results.get(name) == "done" or task.done(), f"{name} done")
        assert not task.done(), task.result()
    finally:
        op._stop.set()
        try:
            assert await asyncio.wait_for(task, 30) == 0
        finally:
            late.stop()


# -- a transient answer while a {k8s:} secret is read ---------------------------------------
SECRETS = "v1/secrets"


def secret_config(tmp: Path, kubeconfig: Path) -> Path:
    """The kubernetes-store world, its simulated channel's password a ``{k8s:}`` secret
    that the channel checks (a wrong or unread one is refused)."""
    config = kube_store_config(tmp, kubeconfig)
    raw = yaml.safe_load(config.read_text())
    raw["channels"]["lab"]["password"] = {"k8s": "ops/bmc/password"}
    raw["channels"]["lab"]["expect_password"] = {"env": "EXPECTED_PW"}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


@pytest.fixture
def secret_env(tmp_path: Path, api: KubeApiServer,
               monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    api.add_secret("ops", "bmc", {"password": "pw"})
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("EXPECTED_PW", "pw")
    return {"KUBECONFIG": str(kubeconfig), "EXPECTED_PW": "pw"}


REQUEST = ["maintenance", "request", "w1", "--intent", "reboot", "--reason",
           "replace the PSU", "--confirm-node", "w1", "--ack-preflight"]


@pytest.mark.parametrize("fault", ["500", "429", "disconnect"])
def test_a_transient_answer_for_the_secret_is_a_failure_an_absent_one_bad_input(
        tmp_path: Path, api: KubeApiServer, secret_env: dict[str, str], fault: str) -> None:
    config = secret_config(tmp_path, Path(secret_env["KUBECONFIG"]))
    api.fail_requests("get", SECRETS, *([fault] * 20))
    done = cli("--config", str(config), *REQUEST, env=secret_env)
    assert api.faults_served[:1] == [f"{fault} get {SECRETS}"]
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "secret {k8s: ops/bmc/password}" in done.stderr
    assert "invalid config" not in done.stderr and "Traceback" not in done.stderr
    assert not [o for o in api.objects(NM)]  # nothing requested
    # a Secret really absent, or without the key, stays bad input (exit 2)
    api.clear_faults()
    raw = yaml.safe_load(config.read_text())
    for secret, words in (("ops/absent/password", "no Secret absent in namespace ops"),
                          ("ops/bmc/nokey", "has no key nokey")):
        raw["channels"]["lab"]["password"] = {"k8s": secret}
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        bad = cli("--config", str(config), *REQUEST, env=secret_env)
        assert bad.returncode == 2, (bad.stdout, bad.stderr)
        assert words in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
@pytest.mark.parametrize("when", ["discovery", "verb"])
async def test_the_operator_tries_a_secret_that_failed_for_now_again(
        tmp_path: Path, api: KubeApiServer, secret_env: dict[str, str], when: str) -> None:
    """A 500/429 on the Secret when the operator discovers the channel (the verb would be
    withheld: the maintenance parked in Drained for good) or at the verb itself (it
    failed for good, the node left cordoned): the maintenance completes, the reboot
    applied once."""
    kubeconfig = Path(secret_env["KUBECONFIG"])
    config = secret_config(tmp_path, kubeconfig)
    name = await asyncio.to_thread(request, config)
    op = replica(config, kubeconfig)
    faults = ("500", "429", "500")
    if when == "discovery":
        api.fail_requests("get", SECRETS, *faults)
    else:
        before = op._before_verb

        def at_the_verb(channel: str, method: str, args: tuple[Any, ...]) -> None:
            if not api.faults_served:
                api.fail_requests("get", SECRETS, *faults)  # the verb's own read of it
            before(channel, method, args)
        op._before_verb = at_the_verb  # type: ignore[method-assign]
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: op.results.get(name) == "done" or task.done(), f"{name} done")
        assert not task.done(), task.result()
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert api.faults_served == [f"{f} get {SECRETS}" for f in faults]
    assert phase(api, name) == "Complete"
    state = json.loads((tmp_path / "machines.json").read_text())
    assert state["dispatches"] == [["reboot", "w1"]], state  # sent once, applied once
