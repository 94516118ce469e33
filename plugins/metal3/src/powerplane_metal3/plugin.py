"""The plugin module: registers the ``metal3`` channel type (power through Metal3's
BareMetalHosts, :mod:`powerplane_metal3`) and the deployment check ``metal3.guard`` (a
``redfish``, ``ipmi`` or ``pdu`` channel to a BMC a BareMetalHost manages is refused,
:mod:`powerplane_metal3.guard`).

Entry point (in this distribution's ``pyproject.toml``)::

    [project.entry-points.powerplane]
    metal3 = "powerplane_metal3.plugin"

Discovery stays light: :data:`REGISTERS` names the type, so the config model is imported
(and :data:`METAL3` built) only when a deployment names a ``metal3`` channel, and the
channel (and with it lightkube and httpx2) only when a ``metal3`` channel is created.
``register_deployment_checks`` is not declared there: core calls it alone, on first use; the
check it registers imports the guard only for a deployment with a ``metal3`` channel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from powerplane import Registers, hookimpl, lazy_exports

if TYPE_CHECKING:
    from powerplane import ChannelType, ConfigProblem, Deployment, DeploymentCheck
    from powerplane_metal3.channel import Metal3Channel
    from powerplane_metal3.config import Metal3ChannelConfig, Metal3Target

    METAL3: ChannelType[Metal3ChannelConfig, Metal3Target]

__all__ = ["METAL3", "REGISTERS", "register_channel_types", "register_deployment_checks",
           "unknown_target"]

REGISTERS: Registers = {"channel": ("metal3",)}
"""What the hooks register, read by the registry without calling them."""


def _factory(name: str, config: Metal3ChannelConfig) -> Metal3Channel:
    # imported here so that plugin discovery never imports lightkube or httpx2
    from powerplane_metal3.channel import Metal3Channel

    return Metal3Channel(name, config)


def unknown_target(target: Metal3Target) -> Any:
    """For the conformance suite: a BareMetalHost (or a node) of the same namespace that the
    cluster does not have."""
    suffix = "-powerplane-conformance-unknown"
    if target.node is not None:
        return {"node": f"{target.node}{suffix}"}
    name = f"{str(target.name)[:253 - len(suffix)]}{suffix}"
    return f"{target.namespace}/{name}" if target.namespace else name


def _build() -> ChannelType[Metal3ChannelConfig, Metal3Target]:
    from powerplane import ChannelType
    from powerplane_metal3.config import Metal3ChannelConfig, parse_target

    return ChannelType(
        name="metal3",
        config=Metal3ChannelConfig,
        factory=_factory,
        target=parse_target,
        description="Metal3 BareMetalHosts: spec.online and the reboot annotation, through "
        "the baremetal-operator; readback from status.poweredOn",
        gated_sends=True,  # every PATCH of a BareMetalHost passes about_to_send()
        unknown_target=unknown_target,
    )


__getattr__, __dir__ = lazy_exports(__name__, {"METAL3": _build})
"""Each constant built on first use, once (the hooks register the same objects)."""


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the ``metal3`` channel type (BareMetalHosts through the baremetal-operator)."""
    register(__getattr__("METAL3"))


async def _guard(deployment: Deployment) -> list[ConfigProblem]:
    """The ``metal3.guard`` check: nothing imported, nothing asked, without a ``metal3``
    channel (no cluster named); else :func:`powerplane_metal3.guard.check_deployment`."""
    if not any(c.type.name == "metal3" for c in deployment.channels.values()):
        return []
    from powerplane_metal3.guard import check_deployment

    return await check_deployment(deployment)


@hookimpl
def register_deployment_checks(register: Callable[[DeploymentCheck], None]) -> None:
    """Register ``metal3.guard``: a redfish, ipmi or pdu channel to the BMC of a
    BareMetalHost (in the cluster a ``metal3`` channel names) is refused, naming it."""
    from powerplane import DeploymentCheck

    register(DeploymentCheck(
        name="metal3.guard", check=_guard,
        description="a redfish, ipmi or pdu channel to the BMC of a BareMetalHost is "
        "refused (asked of the cluster a metal3 channel names)"))
