"""The Kubernetes peer for demos, benchmarks and other distributions' tests.

:func:`start` runs the kmock API server (:mod:`.testing.apiserver`) on loopback, writes a
kubeconfig that reaches it into ``where`` and returns the ``lifecycle`` section that points
the ``kubernetes`` cluster port and the ``longhorn`` storage port at it. It is not offered
to ``powerplane demo`` through ``register_demo_peers``: a demo peer plays a power channel
(``powerplane.testing.Role``: bmc, inband, pdu, cloud), and an API server is none of them.
Needs the ``test`` extra (kmock).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerplane_kubernetes.testing.apiserver import KubeApiServer

__all__ = ["StartedCluster", "start"]


@dataclass
class StartedCluster:
    """A started API server and the ``lifecycle`` keys that reach it."""

    server: KubeApiServer
    kubeconfig: Path
    lifecycle: dict[str, Any]
    """``{"cluster": {type: kubernetes, kubeconfig: ...}, "storage": {type: longhorn}}``."""

    def stop(self) -> None:
        self.server.stop()


def start(where: Path, *, longhorn: bool = True) -> StartedCluster:
    """Start the API server and write ``where/kubeconfig`` (the cluster admin's: the server
    enforces RBAC, and a demo or a benchmark acts as the admin)."""
    from powerplane_kubernetes.testing.apiserver import KubeApiServer

    server = KubeApiServer(longhorn=longhorn).start()
    kubeconfig = server.write_kubeconfig(where / "kubeconfig")
    lifecycle: dict[str, Any] = {"cluster": {"type": "kubernetes", "kubeconfig": str(kubeconfig)}}
    if longhorn:
        lifecycle["storage"] = {"type": "longhorn"}
    return StartedCluster(server, kubeconfig, lifecycle)
