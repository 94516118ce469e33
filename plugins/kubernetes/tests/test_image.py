"""The operator image, built and run: ``./dev image``'s build (``plugins/kubernetes/image``)
makes ``powerplane:VERSION`` without a registry, podman loads it into a storage of its own,
and the image's own ``powerplane operator run --until-idle`` (user 65532, read-only root
file system, the deployment file and kubeconfig mounted read-only) drives a cordon that a
person requested through the test API server: the node is cordoned by the operator's
``PATCH`` and the NodeMaintenance reaches ``Cordoned``.

podman runs it with ``runc`` and the limits it already has: on a host whose cgroups are
hybrid (v1 controllers and a v2 mount holding one), ``crun`` refuses to start a container,
and without ``CAP_SYS_RESOURCE`` podman's default ``nofile``/``nproc`` limits cannot be
set. Skipped, saying what is missing, without root, ``mmdebstrap``, ``buildah``,
``podman`` or ``runc``; ``POWERPLANE_IMAGE_TEST=require`` (CI) makes that a failure.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from powerplane import PowerHost, load_config
from powerplane.lifecycle import Lifecycle
from powerplane.lifecycle.ceremony import Ceremony
from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_kubernetes.testing.seed import seed

IMAGE_DIR = Path(__file__).resolve().parents[1] / "image"
CP = "node-role.kubernetes.io/control-plane"
NODES = ("cp1", "cp2", "cp3", "w1")
FAST = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
        "--interval", "0.05"]


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("powerplane_image_build",
                                                  IMAGE_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lacking() -> list[str]:
    out = list(_builder().missing())
    out += [tool for tool in ("podman", "runc") if shutil.which(tool) is None]
    return out


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A short path (podman's sockets live under its run root) others can read."""
    path = Path(tempfile.mkdtemp(prefix="pp-image-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_the_image_tag_is_the_one_the_manifests_name() -> None:
    assert _builder().image_ref() == m.IMAGE


def write_config(where: Path) -> Path:
    """The deployment the image runs: the kubernetes cluster port and store, reached through
    ``kubeconfig`` beside it (mounted together at /etc/powerplane)."""
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": dict.fromkeys(NODES, "on")}},
        "nodes": {n: {"site": "east", "labels": {CP: ""} if n.startswith("cp") else {},
                      "channels": [{"channel": "lab", "target": n}]} for n in NODES},
        "lifecycle": {
            "store": {"type": "kubernetes", "namespace": "maint", "kubeconfig": "kubeconfig"},
            "cluster": {"type": "kubernetes", "kubeconfig": "kubeconfig"},
            "tick_s": 0.05,
        },
    }
    path = where / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_image_runs_the_operator_through_a_cordon(scratch: Path) -> None:
    lacking = _lacking()
    if lacking:
        if os.environ.get("POWERPLANE_IMAGE_TEST") == "require":
            pytest.fail("the image test is required here but lacks " + ", ".join(lacking))
        pytest.skip("building and running the image needs " + ", ".join(lacking))
    build = _builder()
    started = time.monotonic()
    oci, _docker = build.build(out=scratch / "out")
    built_s = time.monotonic() - started

    podman = ["podman", "--root", str(scratch / "storage"), "--runroot", str(scratch / "run"),
              "--storage-driver", "vfs", "--runtime", "runc"]
    subprocess.run([*podman, "load", "-q", "-i", str(oci)], check=True, capture_output=True,
                   text=True)
    user = subprocess.run([*podman, "image", "inspect", "--format", "{{.Config.User}}",
                           m.IMAGE], check=True, capture_output=True, text=True).stdout
    assert user.strip() == "65532:65532"

    etc = scratch / "etc"
    etc.mkdir(mode=0o755)
    with KubeApiServer(linger=False) as api:
        # each client holds the roles printed for it: the operator's, and the person's
        # (powerplane-maintainer, its locks Role, powerplane-admin for the admission policy)
        api.grant("operator", m.cluster_role(), m.lease_role("ops"),
                  m.operator_lock_role("maint"))
        api.grant("cli", m.maintainer_role(), m.maintainer_lock_role("maint"),
                  m.people_roles()[0])
        api.write_kubeconfig(etc / "kubeconfig", client="operator")
        config = write_config(etc)
        for path in etc.iterdir():
            path.chmod(0o644)  # the image's user reads them
        m.manifests("ops", deployment=load_config(config))  # fit for the cluster
        seed(api, {n: ({CP: ""} if n.startswith("cp") else {}) for n in NODES},
             {"pods": {"w1": ["web-1"]}})

        async def person() -> str:
            # the same file, its kubeconfig a client of its own
            api.write_kubeconfig(etc / "kubeconfig", client="cli")
            try:
                async with PowerHost(load_config(config)) as host:
                    lc = Lifecycle.for_host(host)
                    try:
                        made = await lc.request("w1", "cordon", Ceremony(
                            reason="replace the PSU in slot 2"))
                    finally:
                        lc.close()
            finally:
                api.write_kubeconfig(etc / "kubeconfig", client="operator")
                (etc / "kubeconfig").chmod(0o644)
            return made.name

        name = asyncio.run(person())
        # limits no higher than this process has (podman's defaults are higher, and raising
        # one needs CAP_SYS_RESOURCE, which this sandbox does not grant even to root)
        nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 4096)
        started = time.monotonic()
        proc = subprocess.run(
            [*podman, "run", "--rm", "--network", "host", "--read-only",
             "--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}",
             "-v", f"{etc}:/etc/powerplane:ro", m.IMAGE,
             "--config", "/etc/powerplane/powerplane.yaml", "operator", "run",
             "--kubeconfig", "/etc/powerplane/kubeconfig", "--namespace", "ops",
             "--identity", "image", "--until-idle", "--timeout", "120", *FAST],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        ran_s = time.monotonic() - started
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        final = api.object("powerplane.io/v1alpha1/nodemaintenances", None, name)
        assert final is not None and final["status"]["phase"] == "Cordoned", final
        node = api.object("v1/nodes", None, "w1")
        assert node is not None and node["spec"].get("unschedulable") is True
        cordons = [r for r in api.requests_to("PATCH", "/api/v1/nodes/w1")
                   if r.client == "operator"]
        assert len(cordons) == 1, cordons
    print(f"\nimage built in {built_s:.0f} s; its operator ran the cordon in {ran_s:.0f} s",
          file=sys.stderr)
