"""``powerplane operator run`` against kmock: leases per site, the lifecycle's Reconciler,
``--until-idle``, the HTTP endpoints, and two replicas with one SIGKILLed mid-maintenance.

The world: a simulated channel with a ``state_file`` (so the verbs applied are counted
across processes), the simulated cluster with a ``state_file``, the SQLite store, and
kmock as the API server holding the site Leases.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from powerplane import PowerHost, load_config
from powerplane.authority.identity import local_identity
from powerplane.lifecycle import Lifecycle
from powerplane.lifecycle.ceremony import Ceremony
from powerplane.lifecycle.store import Store
from powerplane.testing import SilentServer
from powerplane_kubernetes.operator.leases import lease_name
from powerplane_kubernetes.operator.run import Operator, OperatorOptions
from powerplane_kubernetes.testing.apiserver import KubeApiServer

RUN = "import sys; from powerplane.cli import main; sys.exit(main(sys.argv[1:]))"
CP = "node-role.kubernetes.io/control-plane"
FAST = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
        "--interval", "0.05"]


def write_config(tmp: Path, *, site: str = "east", latency_ms: float = 0) -> Path:
    machines = {"cp1": "on", "cp2": "on", "cp3": "on", "w1": "on"}
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "machines": machines,
                             "state_file": str(tmp / "machines.json"),
                             "transition_ms": 300, "latency_ms": latency_ms}},
        "nodes": {
            **{cp: {"site": site, "labels": {CP: ""},
                    "channels": [{"channel": "lab", "target": cp}]}
               for cp in ("cp1", "cp2", "cp3")},
            "w1": {"site": site, "channels": [{"channel": "lab", "target": "w1"}]},
        },
        "lifecycle": {
            "store": "lifecycle.db",
            "cluster": {"type": "simulated", "pods": {"w1": ["web-1"]},
                        "state_file": str(tmp / "cluster.json")},
            "tick_s": 0.02, "readback_window_s": 2, "readback_cadence_s": 0.02,
            "settle_window_s": 0.5,
        },
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def request(config: Path, node: str = "w1", intent: str = "reboot") -> str:
    async def go() -> str:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            try:
                c = Ceremony(reason="replace the PSU in slot 2", confirm_node=node,
                             ack_preflight=True)
                return (await lc.request(node, intent, c)).name
            finally:
                lc.close()

    return asyncio.run(go())


def sent(tmp: Path) -> list[list[str]]:
    path = tmp / "machines.json"
    return list(json.loads(path.read_text())["dispatches"]) if path.exists() else []


def stored(tmp: Path, name: str) -> Any:
    store = Store(tmp / "lifecycle.db")
    try:
        return store.get(name)
    finally:
        store.close()


def operator_argv(config: Path, kubeconfig: Path, identity: str, *args: str,
                  timeout_s: float = 180) -> list[str]:
    """``operator run --until-idle`` with the fast lease timings and one ``--timeout``."""
    if "--timeout" in args:
        raise ValueError("pass the timeout as timeout_s, not in args")
    return [sys.executable, "-c", RUN, "--config", str(config), "operator", "run",
            "--kubeconfig", str(kubeconfig), "--namespace", "ops", "--identity", identity,
            "--until-idle", "--timeout", f"{timeout_s:g}", *FAST, *args]


def operator(config: Path, kubeconfig: Path, identity: str, *args: str,
             crash_at: str | None = None, timeout_s: float = 180) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CRASH_AT"}
    if crash_at:
        env["POWERPLANE_CRASH_AT"] = crash_at
    return subprocess.Popen(
        operator_argv(config, kubeconfig, identity, *args, timeout_s=timeout_s),
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def test_the_operator_helper_passes_one_timeout(tmp_path: Path) -> None:
    argv = operator_argv(tmp_path / "c.yaml", tmp_path / "kc", "r", "--site", "east",
                         timeout_s=3)
    assert argv.count("--timeout") == 1
    assert argv[argv.index("--timeout") + 1] == "3"
    assert argv[-2:] == ["--site", "east"]
    with pytest.raises(ValueError, match="timeout_s"):
        operator_argv(tmp_path / "c.yaml", tmp_path / "kc", "r", "--timeout", "3")


def finish(procs: dict[str, subprocess.Popen[str]],
           timeout: float) -> dict[str, tuple[int, tuple[str, str]]]:
    """Wait for every process at once, reading each one's pipes as it runs (a pipe left
    unread fills and blocks the writer) and reaping each as soon as it exits (a dead
    replica left a zombie still looks alive to the dispatcher's ``runner_alive``)."""
    with concurrent.futures.ThreadPoolExecutor(len(procs)) as pool:
        futures = {who: pool.submit(p.communicate, timeout=timeout) for who, p in procs.items()}
        try:
            outputs = {who: f.result() for who, f in futures.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
    return {who: (int(procs[who].returncode), out) for who, out in outputs.items()}


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


@pytest.mark.slow
def test_until_idle_drives_a_reboot_to_complete_with_one_verb(tmp_path: Path,
                                                              api: KubeApiServer) -> None:
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    name = request(config)
    proc = operator(config, kubeconfig, "replica-a")
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    m = stored(tmp_path, name)
    assert m.phase.value == "Complete"
    assert sent(tmp_path) == [["reboot", "w1"]]
    lease = api.object("coordination.k8s.io/v1/leases", "ops", lease_name("east"))
    assert lease is not None
    # a clean exit gives the lease up so another replica acquires it at once
    assert not lease["spec"].get("holderIdentity")
    assert api.requests_to("POST", "/apis/coordination.k8s.io/v1/namespaces/ops/leases")


@pytest.mark.slow
def test_two_replicas_one_acts_sigkill_mid_maintenance_other_finishes_with_one_verb(
        tmp_path: Path, api: KubeApiServer) -> None:
    """Both replicas carry the same crash point (SIGKILL of itself right after the reboot
    was sent, before its outcome is recorded): only the one that acts reaches it. The
    other waits on the lease, takes it over once the dead one stops renewing, settles the
    recorded reboot by evidence (the boot marker changed) and finishes: one verb in all."""
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    name = request(config)
    procs = {who: operator(config, kubeconfig, who, crash_at="dispatch-sent:reboot")
             for who in ("replica-a", "replica-b")}
    results = finish(procs, timeout=240)
    codes = sorted(code for code, _ in results.values())
    assert codes == [-signal.SIGKILL, 0], {w: r[1][1][-2000:] for w, r in results.items()}
    dead = next(w for w, (code, _) in results.items() if code == -signal.SIGKILL)
    alive = next(w for w in results if w != dead)
    m = stored(tmp_path, name)
    assert m.phase.value == "Complete"
    assert sent(tmp_path) == [["reboot", "w1"]]  # exactly one verb applied at the channel
    (d,) = m.status.dispatches
    assert str(procs[dead].pid) in d.runner.split("/")  # recorded by the one that died
    assert d.outcome.value == "applied" and d.settled_by == "evidence"
    # the survivor acted only after taking the lease over from the dead replica
    log = results[alive][1][1]
    assert f"acquired by {alive} (was {dead})" in log
    lease = api.object("coordination.k8s.io/v1/leases", "ops", lease_name("east"))
    assert lease is not None and lease["spec"]["leaseTransitions"] >= 1


@pytest.mark.slow
def test_a_replica_whose_stderr_is_not_read_exits_by_its_timeout(tmp_path: Path,
                                                                 api: KubeApiServer) -> None:
    """The defect behind the two-replica test's hangs: a replica waiting on a lease wrote a
    log line per API request (the HTTP client's), filled a stderr pipe its parent was not
    reading yet, and blocked in that write past its ``--timeout``. The site's Lease is held
    by another holder for an hour; the pipe is shrunk to one page and not read until the
    process has exited."""
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    request(config)
    api.add_lease("ops", lease_name("east"), "elsewhere", duration_s=3600)
    proc = operator(config, kubeconfig, "replica-a", "--retry-period", "0.01", timeout_s=3)
    assert proc.stderr is not None
    fcntl.fcntl(proc.stderr.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, err = proc.communicate(timeout=10)
    assert code == 1, err[-2000:]
    assert "not idle after 3 s (--timeout)" in err
    assert "lease held by elsewhere" in err
    assert sent(tmp_path) == []
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_replica_whose_api_server_stops_answering_exits_by_its_timeout(
        tmp_path: Path) -> None:
    """The API server accepts connections and never answers; the store is the kubernetes
    store, whose synchronous requests (600 s read timeout here) block the event loop, so
    the deadline cannot be delivered as a cancel: the watchdog ends the process."""
    with SilentServer() as silent:
        config = write_config(tmp_path)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "silent",
            "clusters": [{"name": "silent",
                          "cluster": {"server": f"http://127.0.0.1:{silent.port}"}}],
            "users": [{"name": "u", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u"}}],
        }), encoding="utf-8")
        raw = yaml.safe_load(config.read_text())
        raw["lifecycle"]["store"] = {"type": "kubernetes", "kubeconfig": str(kubeconfig),
                                     "namespace": "ops",
                                     "timeouts": {"connect_s": 5, "read_s": 600}}
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        proc = operator(config, kubeconfig, "replica-a", timeout_s=2)
        results = finish({"replica-a": proc}, timeout=120)
    code, (_, err) = results["replica-a"]
    assert code == 1, err[-2000:]
    assert "not idle after 2 s (--timeout)" in err
    assert "Traceback" not in err and "not-a-secret" not in err


@pytest.mark.slow
def test_a_replica_for_another_site_does_not_act(tmp_path: Path, api: KubeApiServer) -> None:
    config = write_config(tmp_path, site="east")
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    proc = operator(config, kubeconfig, "replica-a", "--site", "west")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--site" in err and "west" in err and "Traceback" not in err


async def _get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    return await asyncio.to_thread(fetch)


@pytest.mark.slow
async def test_metrics_health_and_readiness_endpoints(tmp_path: Path,
                                                      api: KubeApiServer) -> None:
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    name = await asyncio.to_thread(request, config)
    op = Operator(OperatorOptions(
        config=str(config), kubeconfig=str(kubeconfig), namespace="ops", identity="r1",
        http_port=0, http_host="127.0.0.1", lease_duration=2, renew_deadline=1.5,
        retry_period=0.2, interval=0.05))
    task = asyncio.create_task(op.run())
    try:
        async with asyncio.timeout(60):
            while op.server is None:
                await asyncio.sleep(0.02)
            base = f"http://127.0.0.1:{op.server.port}"
            while (await _get(base + "/readyz"))[0] != 200:
                await asyncio.sleep(0.05)
            assert (await _get(base + "/healthz"))[0] == 200
            while stored(tmp_path, name).phase.value != "Complete":
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # one more pass observes the terminal phase
            code, text = await _get(base + "/metrics")
        assert code == 200
        for series in (
            'powerplane_channel_call_seconds_count{channel_type="simulated",method="reboot"} 1.0',
            'powerplane_channel_call_seconds_count{channel_type="simulated",'
            'method="read_power_state"}',
            'powerplane_channel_calls_in_flight{channel_type="simulated"}',
            'powerplane_maintenances{phase="Complete"} 1.0',
            'powerplane_dispatches_total{outcome="accepted",verb="reboot"} 1.0',
            'powerplane_site_lease_held{site="east"} 1.0',
            "powerplane_reconcile_passes_total",
        ):
            assert series in text, (series, text)
        assert (await _get(base + "/nothing"))[0] == 404
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0


@pytest.mark.slow
@pytest.mark.parametrize("change", ["virtual", "denied"])
def test_the_operators_dispatch_asks_the_guard_and_the_policy_again(
    tmp_path: Path, api: KubeApiServer, change: str,
) -> None:
    """``cli: operator run`` in the entry-point table: the operator's host is the runtime's
    (the lifecycle's guard attached, the deployment's policy): a request accepted while it
    was allowed is refused when it executes once the node is virtual, or once its
    requester lost the right, and nothing is sent."""
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    name = request(config)
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    if change == "virtual":
        doc["nodes"]["w1"]["labels"] = {"powerplane.io/virtual-node": "true"}
    else:
        me = local_identity().user
        (tmp_path / "roles.yaml").write_text(yaml.safe_dump(
            {"roles": {"me": {"tier": "admin", "deny": ["servers:reboot"]}},
             "bindings": [{"role": "me", "users": [me]}]}), encoding="utf-8")
        doc["policy"] = {"type": "local", "file": "roles.yaml"}
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = operator(config, kubeconfig, "replica-a")
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    m = stored(tmp_path, name)
    assert m.phase.value == "Refused", m.phase
    why = m.status.refusal_reason or ""
    assert ("virtual node" in why) if change == "virtual" else ("servers:reboot" in why), why
    assert sent(tmp_path) == []


@pytest.mark.slow
def test_the_operators_dispatch_follows_its_record(tmp_path: Path, api: KubeApiServer) -> None:
    """The request's audit record is in the store before the operator records the dispatch
    and sends it."""
    config = write_config(tmp_path)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    name = request(config)
    proc = operator(config, kubeconfig, "replica-a")
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    m = stored(tmp_path, name)
    store = Store(tmp_path / "lifecycle.db")
    try:
        [record] = [r for r in store.audit("w1") if r.maintenance == name]
    finally:
        store.close()
    [dispatch] = m.status.dispatches
    assert record.action.value == "servers:reboot" and record.outcome == "accepted"
    assert record.at <= dispatch.recorded_at
    assert sent(tmp_path) == [["reboot", "w1"]]
