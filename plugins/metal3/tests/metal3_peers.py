"""Helpers of the metal3 tests: the test API server with the BareMetalHost CRD, the stand-in
operator on it, a kubeconfig, and channels built as a deployment builds them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_metal3.channel import Metal3Channel
from powerplane_metal3.config import Metal3ChannelConfig
from powerplane_metal3.testing.operator import BareMetalOperator, baremetalhost_crd

CHANNEL = "powerplane"
"""The user of a kubeconfig written with ``client=CHANNEL``: a metal3 channel's own access."""
CHANNEL_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "metal3-channel"},
    "rules": [{"apiGroups": ["metal3.io"], "resources": ["baremetalhosts"],
               "verbs": ["get", "list", "patch"]}]}
"""What a metal3 channel (and its deployment check) asks of BareMetalHosts: ``operator
manifests`` prints no role for it (the hosts live in a management cluster of their own),
so a deployment binds one like this by hand."""


@contextmanager
def metal3_cluster(**operator: Any) -> Iterator[tuple[KubeApiServer, BareMetalOperator]]:
    """A test API server serving BareMetalHosts, and the stand-in operator running on it;
    the channel's user :data:`CHANNEL` holds :data:`CHANNEL_ROLE`."""
    api = KubeApiServer(longhorn=False, admission=False)
    api.install_crd(baremetalhost_crd())
    with api, BareMetalOperator(api, **operator) as bmo:
        api.grant(CHANNEL, CHANNEL_ROLE)
        yield api, bmo


def channel_config(kubeconfig: Path, **keys: Any) -> dict[str, Any]:
    """A metal3 channel's config (as a deployment writes it) reaching the test API server."""
    return {"type": "metal3", "kubeconfig": str(kubeconfig), "namespace": "metal3",
            "timeouts": {"connect_s": 2, "read_s": 5}, "reboot_wait_s": 5, "poll_s": 0.05,
            **keys}


def make_channel(kubeconfig: Path, name: str = "m3", **keys: Any) -> Metal3Channel:
    raw = channel_config(kubeconfig, **keys)
    raw.pop("type")
    return Metal3Channel(name, Metal3ChannelConfig.model_validate(raw))
