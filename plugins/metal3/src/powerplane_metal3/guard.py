"""Direct BMC channels for hosts a BareMetalHost manages: refused, naming the BareMetalHost.

On a Metal3 cluster the baremetal-operator re-applies ``spec.online`` (#790): a shutdown
sent straight to the BMC is undone a minute later, and a channel that sent it would have
reported it done. So where the deployment says how to find BareMetalHosts (a ``metal3``
channel, with its cluster), every ``redfish``, ``ipmi`` or ``pdu`` channel whose device
address (the channel type's declared :class:`~powerplane.Address`: a config key, or each
node's target) is the endpoint of a BareMetalHost's ``spec.bmc.address`` is a problem of
that channel (or node target), naming the BareMetalHost: :func:`check_deployment`.

Where it runs. Knowing the BareMetalHosts takes a request to the API server, so it cannot
be part of loading a file (which makes no network call). The plugin registers
:func:`check_deployment` as the deployment check ``metal3.guard``
(``register_deployment_checks``), which core runs in ``powerplane check`` (exit 2 naming
each channel and BareMetalHost) and in ``PowerHost.start`` before any channel is created
(so ``powerplane invoke``, ``state`` and every other command refuse the same way before any
power request). ``python -m powerplane_metal3.guard [--config FILE]`` and
:func:`refuse_managed` run it alone. Without a ``metal3`` channel the deployment names no
cluster and nothing is asked (no request at all), nor without a ``redfish``, ``ipmi`` or
``pdu`` channel: see the README for why a direct channel to such a BMC must not be
configured then.

When the API server cannot be asked, the check raises the mapped ``ChannelError``
(``Unreachable``, ``AuthenticationFailed``, ...), never an empty list: ``powerplane check``
exits 1 with it, a host's start warns (the ``powerplane.host`` logger) and goes on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from powerplane import ConfigError, ConfigProblem, Deployment
from powerplane_metal3.hosts import BmcEndpoint, bmc_endpoint, bmc_of, host_name

__all__ = ["DIRECT_TYPES", "check_deployment", "main", "managed_conflicts", "refuse_managed"]

DIRECT_TYPES = frozenset({"redfish", "ipmi", "pdu"})
"""The channel types that reach a BMC (or what powers it) directly."""


def _target_address(target: Any) -> str | None:
    if isinstance(target, str):
        return target
    host, port = getattr(target, "host", None), getattr(target, "port", None)
    if isinstance(host, str):
        shown = f"[{host}]" if ":" in host else host
        return f"{shown}:{port}" if isinstance(port, int) else host
    return None


def _addresses(deployment: Deployment, name: str) -> list[tuple[str, str]]:
    """``(config path, address)`` of every device address channel ``name`` reaches."""
    configured = deployment.channels[name]
    address = configured.type.address_for(configured.config)
    if address is None:
        return []
    if address.source == "config":
        value = address.read(configured.config)
        return [(f"channels.{name}.{address.field}", value)] if value else []
    out = []
    for node, spec in deployment.nodes.items():
        for i, ref in enumerate(spec.channels):
            if ref.channel != name:
                continue
            raw = address.read({}, ref.target) if address.field else _target_address(ref.target)
            if raw is None and address.field is None:
                raw = _target_address(ref.target)
            if raw:
                out.append((f"nodes.{node}.channels.{i}.target", raw))
    return out


def managed_conflicts(deployment: Deployment,
                      hosts: Iterable[Mapping[str, Any]]) -> list[ConfigProblem]:
    """Each direct channel address that a BareMetalHost's ``spec.bmc.address`` names."""
    managed: list[tuple[BmcEndpoint, str, str]] = []
    for obj in hosts:
        endpoint = bmc_of(obj)
        if endpoint is not None:
            address = str(((obj.get("spec") or {}).get("bmc") or {}).get("address"))
            managed.append((endpoint, host_name(obj), address))
    problems: list[ConfigProblem] = []
    if not managed:
        return problems
    for name, configured in deployment.channels.items():
        kind = configured.type.name
        if kind not in DIRECT_TYPES:
            continue
        for path, value in _addresses(deployment, name):
            endpoint = bmc_endpoint(value, kind="ipmi" if kind == "ipmi" else None)
            if endpoint is None:
                continue
            for theirs, bmh, address in managed:
                if endpoint.matches(theirs):
                    problems.append(ConfigProblem(path, (
                        f"channel {name} ({kind}) reaches {value}, the BMC of BareMetalHost "
                        f"{bmh} (spec.bmc.address {address}): the baremetal-operator "
                        "re-applies spec.online and undoes a verb sent to the BMC; use a "
                        f"metal3 channel with target {bmh}")))
    return problems


async def _hosts(deployment: Deployment) -> list[dict[str, Any]]:
    """Every BareMetalHost each ``metal3`` channel's cluster holds (its namespace, when it
    names one; else every namespace)."""
    from powerplane_metal3.channel import BMH, Metal3Channel
    from powerplane_metal3.config import Metal3ChannelConfig

    found: dict[str, dict[str, Any]] = {}
    for name, configured in deployment.channels.items():
        if configured.type.name != "metal3" or \
                not isinstance(configured.config, Metal3ChannelConfig):
            continue
        channel = Metal3Channel(name, configured.config)
        try:
            listed = await channel.api.list_custom(BMH, configured.config.namespace or "*")
        except Exception as exc:
            from powerplane_metal3.errors import raise_mapped

            raise raise_mapped(exc, "listing BareMetalHosts for the metal3.guard deployment "
                               "check (the redfish, ipmi and pdu channels are not checked)",
                               channel=name, target=None) from exc
        finally:
            await channel.close()
        for obj in listed:
            found[host_name(obj)] = obj
    return list(found.values())


async def check_deployment(deployment: Deployment) -> list[ConfigProblem]:
    """The problems of :func:`managed_conflicts` over the cluster's BareMetalHosts (none,
    and no request, without a ``metal3`` channel: nothing says where BareMetalHosts are;
    nor without a direct channel: nothing to refuse)."""
    kinds = {c.type.name for c in deployment.channels.values()}
    if "metal3" not in kinds or not kinds & DIRECT_TYPES:
        return []
    return managed_conflicts(deployment, await _hosts(deployment))


def refuse_managed(deployment: Deployment) -> None:
    """Raise :class:`~powerplane.ConfigError` (exit 2) for the problems found, if any."""
    problems = asyncio.run(check_deployment(deployment))
    if problems:
        raise ConfigError(problems, source=deployment.source)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m powerplane_metal3.guard [--config FILE]``: 2 naming each
    channel and BareMetalHost, 1 when the cluster could not be asked, 0 when none."""
    import argparse

    from powerplane import PowerplaneError, load_config

    parser = argparse.ArgumentParser(
        prog="python -m powerplane_metal3.guard",
        description="Refuse redfish, ipmi and pdu channels for hosts a BareMetalHost manages.")
    parser.add_argument("--config", default=None,
                        help="the deployment file (default: $POWERPLANE_CONFIG, else "
                        "./powerplane.yaml)")
    args = parser.parse_args(argv)
    try:
        refuse_managed(load_config(args.config))
    except PowerplaneError as exc:
        print(f"powerplane: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
