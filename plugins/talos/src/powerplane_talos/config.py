"""The config of a ``talos`` channel: where the Talos API is, how to reach it, which modes.

Either a talosconfig file (and optionally the ``context`` to use)::

    type: talos
    talosconfig: /etc/powerplane/talosconfig

or an inline endpoint with secret references to the PEMs (each may hold the PEM or
its base64, as a talosconfig stores it)::

    type: talos
    endpoint: 10.0.0.2:50000
    ca: {file: /etc/powerplane/talos/ca.crt}
    crt: {file: /etc/powerplane/talos/admin.crt}
    key: {env: TALOS_KEY}
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from powerplane import SecretRef
from powerplane_talos.talosconfig import load_talosconfig, split_endpoint

__all__ = ["RebootMode", "TalosConfig", "Transport", "parse_target"]


class Transport(str, Enum):
    """How calls reach the Talos API."""

    GRPC = "grpc"
    """gRPC over mutual TLS with grpclib, in process (Ed25519 and ECDSA)."""
    TALOSCTL = "talosctl"
    """The ``talosctl`` binary, one subprocess per call."""


class RebootMode(str, Enum):
    """Talos's ``RebootRequest.Mode``."""

    DEFAULT = "default"
    """Graceful reboot (kexec where enabled)."""
    POWERCYCLE = "powercycle"
    """Graceful reboot through the firmware, bypassing kexec."""
    FORCE = "force"
    """Reboot without the graceful teardown (advertised as hard)."""

    @property
    def graceful(self) -> bool:
        """Whether this mode stops services before the machine goes down."""
        return self is not RebootMode.FORCE


class TalosConfig(BaseModel):
    """Config of a ``talos`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    talosconfig: str | None = None
    """Path of a talosconfig file (its endpoints and certificates are used)."""
    context: str | None = None
    """The talosconfig context to use (default: the file's current context)."""
    endpoint: str | None = None
    """Inline alternative to ``talosconfig``: the Talos API endpoint (``host[:port]``)."""
    ca: SecretRef | None = None
    """Inline: the Talos OS CA certificate (PEM or base64 PEM)."""
    crt: SecretRef | None = None
    """Inline: the client certificate (PEM or base64 PEM)."""
    key: SecretRef | None = None
    """Inline: the client key (PEM or base64 PEM; ``ED25519 PRIVATE KEY`` accepted)."""
    transport: Transport = Transport.GRPC
    """``grpc`` (in process) or ``talosctl`` (subprocess)."""
    reboot_mode: RebootMode = RebootMode.DEFAULT
    """The reboot mode sent: ``default``, ``powercycle`` or ``force``."""
    shutdown_force: bool = False
    """Send ``force`` with shutdown (skip the node-side cordon and drain; advertised as hard)."""
    timeout_s: float = Field(10.0, gt=0)
    """Deadline of each call (connect included), in seconds."""
    talosctl: str = "talosctl"
    """The talosctl binary (a name on PATH or a path), for ``transport: talosctl``."""

    @field_validator("talosconfig")
    @classmethod
    def _talosconfig_exists(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_file():
            raise ValueError(f"talosconfig file {value!r} does not exist")
        return value

    @field_validator("endpoint")
    @classmethod
    def _endpoint_parses(cls, value: str | None) -> str | None:
        if value is not None:
            split_endpoint(value)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TalosConfig:
        inline = [n for n in ("endpoint", "ca", "crt", "key") if getattr(self, n) is not None]
        if self.talosconfig is not None:
            if inline:
                raise ValueError(
                    f"give either 'talosconfig' or inline 'endpoint'/'ca'/'crt'/'key', "
                    f"not both (found {', '.join(inline)})"
                )
            load_talosconfig(self.talosconfig, self.context)
            return self
        if self.context is not None:
            raise ValueError("'context' needs 'talosconfig'")
        if self.endpoint is None or self.ca is None:
            raise ValueError(
                "expected 'talosconfig', or 'endpoint' and 'ca' (with 'crt' and 'key')"
            )
        if (self.crt is None) != (self.key is None):
            raise ValueError("'crt' and 'key' must be given together")
        return self


def parse_target(raw: Any) -> str:
    """A Talos target is the node's address (as sent in the ``nodes`` metadata)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("expected the node's address (a non-empty string)")
    return raw.strip()
