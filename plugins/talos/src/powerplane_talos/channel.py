"""The ``talos`` channel: reboot and shutdown through the Talos API, never power-on.

Capabilities are intrinsic to Talos, so discovery does no I/O: reboot (graceful
unless ``reboot_mode: force``), shutdown (graceful unless ``shutdown_force``), never
power-on, and ``sees_power_off=False``. Readback: a node that answers ``Version``
reads ``on``; one that does not reads ``unknown``, because a dark Talos machine is
indistinguishable from a network fault; it never reads ``off``.

Boot marker (:class:`powerplane.HasBootMarker`): over the gRPC transport,
``boot_time=<unix seconds>`` from ``SystemStat.boot_time``, which changes on every
boot; a failed read raises (never a marker). The talosctl transport publishes none
(``None``): no talosctl command prints it.
"""

from __future__ import annotations

import os
from typing import Protocol

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelTimeout,
    ConfigError,
    Reading,
    Source,
    Unreachable,
    Verb,
    require,
)
from powerplane_talos.config import RebootMode, TalosConfig, Transport
from powerplane_talos.grpc_transport import GrpcTransport
from powerplane_talos.talosconfig import (
    Credentials,
    decode_pem,
    load_talosconfig,
    normalize_key_pem,
    render_talosconfig,
)
from powerplane_talos.talosctl_transport import TalosctlTransport

__all__ = ["TalosChannel", "TalosTransport"]

DARK = "a dark Talos machine is indistinguishable from a network fault"


class TalosTransport(Protocol):
    """What both transports offer."""

    async def reboot(self, node: str, mode: RebootMode) -> str: ...

    async def shutdown(self, node: str, force: bool) -> str: ...

    async def version(self, node: str) -> str: ...

    async def boot_time(self, node: str) -> int | None: ...

    async def close(self) -> None: ...


def _credentials(name: str, config: TalosConfig) -> Credentials:
    try:
        if config.talosconfig is not None:
            return load_talosconfig(config.talosconfig, config.context)
        assert config.endpoint is not None and config.ca is not None
        where = f"channels.{name}"
        crt = decode_pem(config.crt.reveal(), f"{where}.crt") if config.crt else None
        key = normalize_key_pem(decode_pem(config.key.reveal(), f"{where}.key")) \
            if config.key else None
        return Credentials(
            (config.endpoint,), decode_pem(config.ca.reveal(), f"{where}.ca"), crt, key,
            source=f"{where} (inline)",
        )
    except ValueError as exc:
        raise ConfigError(f"channels.{name}: {exc}") from exc


class TalosChannel:
    """One Talos API endpoint; targets are node addresses behind it."""

    def __init__(self, name: str, config: TalosConfig) -> None:
        self.name = name
        self.config = config
        self.creds = _credentials(name, config)
        self.transport: TalosTransport
        if config.transport is Transport.GRPC:
            try:
                self.transport = GrpcTransport(name, self.creds, config.timeouts)
            except ValueError as exc:
                raise ConfigError(f"channels.{name}: {self.creds.source}: {exc}") from exc
        else:
            self.transport = TalosctlTransport(
                name, config.talosctl, self._talosconfig(), config.context,
                config.timeouts, config.talosctl_env,
            )
        mode = config.reboot_mode
        gentle = {Verb.REBOOT: mode.graceful, Verb.SHUTDOWN: not config.shutdown_force}
        graceful = [v for v, g in gentle.items() if g]
        hard = [v for v, g in gentle.items() if not g]
        self._caps = CapabilitySet.of(
            graceful, hard,
            source=Source.INTRINSIC,
            detail=f"Talos API via {config.transport.value} (reboot mode {mode.value}, "
            f"shutdown {'forced' if config.shutdown_force else 'with cordon and drain'}); "
            "Talos can never power on",
            sees_power_off=False,
        )

    def _talosconfig(self) -> str | bytes:
        if self.config.talosconfig is not None:
            return os.path.expanduser(self.config.talosconfig)
        # Inline credentials: the talosconfig stays in memory (never argv, never a file);
        # each call hands it to talosctl as an inherited memory file.
        return render_talosconfig(
            context="powerplane", endpoints=self.creds.endpoints, ca=self.creds.ca,
            crt=self.creds.crt, key=self.creds.key,
        )

    def endpoint(self, target: str) -> str:
        """The Talos API endpoint every call reaches (calls are bounded per endpoint)."""
        return self.creds.endpoints[0]

    async def capabilities(self, target: str) -> CapabilitySet:
        """Intrinsic to Talos: no I/O."""
        return self._caps

    async def reboot(self, target: str) -> Acceptance:
        require(self._caps, Verb.REBOOT, self.name)
        mode = self.config.reboot_mode
        actor = await self.transport.reboot(target, mode)
        return Acceptance(f"Talos accepted reboot (mode {mode.value})"
                          + (f"; actor {actor}" if actor.strip() else ""))

    async def shutdown(self, target: str) -> Acceptance:
        require(self._caps, Verb.SHUTDOWN, self.name)
        force = self.config.shutdown_force
        actor = await self.transport.shutdown(target, force)
        what = "forced shutdown (no cordon or drain)" if force else "shutdown (cordon, drain)"
        return Acceptance(f"Talos accepted {what}"
                          + (f"; actor {actor}" if actor.strip() else ""))

    async def power_on(self, target: str) -> Acceptance:
        require(self._caps, Verb.POWER_ON, self.name)
        raise AssertionError("unreachable: Talos never advertises power-on")

    async def read_power_state(self, target: str) -> Reading:
        """``on`` when Version answers; ``unknown`` when it does not; never ``off``."""
        try:
            tag = await self.transport.version(target)
        except (Unreachable, ChannelTimeout) as exc:
            return Reading.unknown(f"no answer ({exc.message}): {DARK}")
        return Reading.on(f"Talos {tag} answered Version" if tag else "Talos answered Version")

    async def boot_marker(self, target: str) -> str | None:
        """``boot_time=<unix seconds>`` from SystemStat; None where none is published.

        None through the talosctl transport (no talosctl command prints it) or when
        Talos sends no ``boot_time``. A failed read (a dark machine, a fault, a denied
        role) raises the mapped channel error; it is never read as a marker.
        """
        boot_time = await self.transport.boot_time(target)
        return None if boot_time is None else f"boot_time={boot_time}"

    async def close(self) -> None:
        await self.transport.close()
