"""The ``metal3`` channel's keys, and its target.

::

    channels:
      metal3:
        type: metal3
        kubeconfig: ./kubeconfig   # absent: in the cluster the pod's service account, else
                                   # $KUBECONFIG, else ~/.kube/config (as kubectl)
        context: admin@mgmt        # absent: the kubeconfig's current context
        namespace: metal3          # the namespace of a target written NAME (absent: default)
        reboot: soft               # soft | hard: the reboot annotation's mode
        reboot_wait_s: 45          # how long a reboot waits for the operator to report off
        soft_off_timeout_s: 600    # Ironic's soft_power_off_timeout (the documented worst case)
        timeouts: {connect_s: 5, read_s: 30}
    nodes:
      worker-0:
        channels: [{channel: metal3, target: metal3/worker-0}]   # NAMESPACE/NAME
      worker-1:
        channels: [{channel: metal3, target: {node: worker-1}}]  # the host that serves it

A target is a BareMetalHost, ``NAMESPACE/NAME`` or ``NAME`` (in ``namespace``), or
``{node: NODE}``: the one BareMetalHost whose label ``powerplane.io/node`` names the node,
else whose ``spec.consumerRef.name`` does, found when the channel first asks (a target
parser never learns the node's own name, so the node is written once more). A relative
``kubeconfig`` is read from the working directory, as every channel's file is.

No BMC credential is ever read: they stay in the BareMetalHost's own Secret
(``spec.bmc.credentialsName``), for the operator alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from powerplane import StrictFloat
from powerplane_kubernetes.config import ApiAccess

__all__ = ["DEFAULT_NAMESPACE", "Metal3ChannelConfig", "Metal3Target", "parse_target"]

DEFAULT_NAMESPACE = "default"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class Metal3ChannelConfig(ApiAccess):
    """``channels.<name>: {type: metal3}``: BareMetalHosts on one cluster's API server."""

    namespace: str | None = Field(None, pattern=_NAMESPACE.pattern)
    """The namespace of a target written ``NAME`` (absent: ``default``)."""
    reboot: Literal["soft", "hard"] = "soft"
    """The reboot annotation's mode: ``soft`` (a graceful reboot: soft power-off, hard after
    Ironic's timeout) or ``hard`` (a power cycle)."""
    reboot_wait_s: StrictFloat = Field(45.0, gt=0, le=3_600, allow_inf_nan=False)
    """How long a reboot waits for the operator to report the host off before it removes
    its annotation (the host is kept off while it is there); below ``limits.timeout_s``."""
    soft_off_timeout_s: StrictFloat = Field(600.0, gt=0, le=86_400, allow_inf_nan=False)
    """Ironic's ``soft_power_off_timeout`` on this cluster: the worst case of a graceful
    shutdown before it turns hard, said in the capabilities' detail."""
    poll_s: StrictFloat = Field(0.2, gt=0, le=60, allow_inf_nan=False)
    """How often a reboot reads the host while it waits."""

    @model_validator(mode="after")
    def _kubeconfig_named(self) -> Metal3ChannelConfig:
        if self.kubeconfig is not None and not self.kubeconfig.strip():
            raise ValueError("kubeconfig: an empty path; leave the key out for the default")
        return self

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        """``reboot_wait_s`` must leave room under ``limits.timeout_s`` for the annotation's
        removal (:class:`powerplane.channel.ChecksLimits`)."""
        room = self.timeouts.connect_s + self.timeouts.read_s
        if self.reboot_wait_s + room > timeout_s:
            return [("reboot_wait_s", f"{self.reboot_wait_s:g} s and one request's bound "
                     f"({room:g} s) exceed limits.timeout_s ({timeout_s:g} s): a reboot "
                     "could be cut before its annotation is removed")]
        return []

    def access(self) -> ApiAccess:
        """The API access: this config's, else as kubectl finds one."""
        if self.kubeconfig is not None:
            return ApiAccess(kubeconfig=self.kubeconfig, context=self.context,
                             timeouts=self.timeouts)
        from powerplane_kubernetes.secrets import environment_kubeconfig

        found = environment_kubeconfig()
        return ApiAccess(kubeconfig=str(found) if found is not None else None,
                         context=self.context, timeouts=self.timeouts)


@dataclass(frozen=True)
class Metal3Target:
    """A BareMetalHost by ``namespace``/``name`` (namespace None: the channel's), or the one
    that serves ``node``."""

    name: str | None = None
    namespace: str | None = None
    node: str | None = None

    def __str__(self) -> str:
        if self.node is not None:
            return f"node:{self.node}"
        return f"{self.namespace}/{self.name}" if self.namespace else str(self.name)


def parse_target(raw: Any) -> Metal3Target:
    """``NAMESPACE/NAME``, ``NAME`` or ``{node: NODE}``."""
    if isinstance(raw, Metal3Target):
        return raw
    hint = "expected a BareMetalHost, NAMESPACE/NAME or NAME, or {node: NODE}"
    if isinstance(raw, dict):
        if set(raw) != {"node"} or not isinstance(raw["node"], str) or not raw["node"].strip():
            raise ValueError(f"{hint}; a mapping takes the one key 'node' (a node name)")
        return Metal3Target(node=raw["node"].strip())
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{hint}; got {type(raw).__name__}")
    text = raw.strip()
    namespace, _, name = text.rpartition("/")
    if namespace and not _NAMESPACE.match(namespace):
        raise ValueError(f"{hint}; {namespace[:70]!r} is not a namespace name (RFC 1123 label)")
    if len(name) > 253 or not _NAME.match(name):
        raise ValueError(f"{hint}; {name[:70]!r} is not an object name (RFC 1123 subdomain)")
    return Metal3Target(name=name, namespace=namespace or None)
