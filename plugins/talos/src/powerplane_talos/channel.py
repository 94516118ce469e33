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
from pathlib import Path
from typing import Protocol

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelTimeout,
    ConfigError,
    ConfigProblem,
    Reading,
    SecretRef,
    Source,
    Unreachable,
    Verb,
    require,
)
from powerplane_talos.config import RebootMode, TalosConfig, Transport
from powerplane_talos.grpc_transport import GrpcTransport
from powerplane_talos.talosconfig import (
    ContextNotFound,
    Credentials,
    decode_pem,
    load_talosconfig,
    normalize_key_pem,
    render_talosconfig,
)
from powerplane_talos.talosctl_transport import TalosctlTransport

__all__ = ["TalosChannel", "TalosTransport", "inline_credentials", "talosconfig_credentials"]

DARK = "a dark Talos machine is indistinguishable from a network fault"


class TalosTransport(Protocol):
    """What both transports offer."""

    async def reboot(self, node: str, mode: RebootMode) -> str: ...

    async def shutdown(self, node: str, force: bool) -> str: ...

    async def version(self, node: str) -> str: ...

    async def boot_time(self, node: str) -> int | None: ...

    async def close(self) -> None: ...


def _credentials(name: str, config: TalosConfig) -> Credentials:
    """The channel's credentials, read now, as it opens: the talosconfig file (see
    :func:`talosconfig_credentials`) or the inline references (:func:`inline_credentials`)."""
    if config.talosconfig is not None:
        return talosconfig_credentials(name, config)
    return inline_credentials(name, config)


def talosconfig_credentials(name: str, config: TalosConfig) -> Credentials:
    """Read the ``talosconfig`` file (when the channel opens, never at load) and check it:
    it exists, parses and has the context (its ``endpoints`` and ``nodes`` lists of
    addresses), and its ``ca``, ``crt`` and ``key`` are PEMs of what they claim with the
    key the certificate's. A mistake is a :class:`ConfigError` at
    ``channels.<name>.talosconfig`` (``.context`` for a context the file lacks), naming
    the file, never a value."""
    from powerplane_talos import pem

    path = config.talosconfig
    assert path is not None
    where = f"channels.{name}"
    if not Path(path).expanduser().exists():
        raise ConfigError([ConfigProblem(f"{where}.talosconfig",
                                         f"talosconfig file {path!r} does not exist")])
    try:
        creds = load_talosconfig(path, config.context)
        pem.check_credentials(creds)
    except ContextNotFound as exc:
        field = "context" if config.context else "talosconfig"
        raise ConfigError([ConfigProblem(f"{where}.{field}", str(exc))]) from None
    except ValueError as exc:
        raise ConfigError([ConfigProblem(f"{where}.talosconfig", str(exc))]) from None
    return creds


def inline_credentials(name: str, config: TalosConfig) -> Credentials:
    """Resolve the inline ``ca``, ``crt`` and ``key`` references (at use, never at load)
    and check each is a PEM of what it claims and the key the certificate's. A reference
    that cannot be resolved or holds something else is a :class:`ConfigError` at
    ``channels.<name>.<field>``, naming the reference, never a value."""
    from powerplane_talos import pem

    assert config.endpoint is not None and config.ca is not None
    where = f"channels.{name}"

    def read(field: str, ref: SecretRef) -> bytes:
        what = f"the secret {ref}"
        try:
            body = decode_pem(ref.reveal(), what)
            if field == "ca":
                pem.check_ca(body, what)
            elif field == "crt":
                pem.check_certificate(body, what)
            else:
                pem.check_key(body, what)
        except ConfigError as exc:  # SecretError: names the reference, never a value
            raise ConfigError([ConfigProblem(f"{where}.{field}", _text(exc))]) from None
        except ValueError as exc:
            raise ConfigError([ConfigProblem(f"{where}.{field}", str(exc))]) from None
        return body

    ca = read("ca", config.ca)
    crt = read("crt", config.crt) if config.crt is not None else None
    key = normalize_key_pem(read("key", config.key)) if config.key is not None else None
    if crt is not None and key is not None:
        assert config.key is not None
        try:
            pem.check_pair(pem.check_certificate(crt, "crt"), pem.check_key(key, "key"),
                           f"the secret {config.key}")
        except ValueError as exc:
            raise ConfigError([ConfigProblem(f"{where}.key", str(exc))]) from None
    return Credentials((config.endpoint,), ca, crt, key, source=f"{where} (inline)")


def _text(error: ConfigError) -> str:
    """A config error's problems, without a path of their own (the field gives it)."""
    return "; ".join(p.message if not p.path else str(p) for p in error.problems)


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
