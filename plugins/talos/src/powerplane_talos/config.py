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
    timeouts: {connect_s: 10, read_s: 10}

Loading the config checks its shape without reading a file or resolving a secret, each
problem at the path of its field: ``talosconfig`` or inline ``endpoint`` and ``ca``, not
both; ``context`` only with ``talosconfig``; ``crt`` and ``key`` together; the endpoint
parses; the talosctl binary exists. What is behind a path or a reference is read when the
channel opens (so a command pays only for the channels it touches, and a broken
talosconfig on a channel a node does not use never fails that node's ``state``;
``powerplane check`` opens every channel): the talosconfig file exists, parses and has
the context, the inline ``ca``, ``crt`` and ``key`` references resolve (a ``{k8s: ...}``
reference is not fetched, an ``{env: ...}`` one not read, by loading the file), and
either way the PEMs are of what they claim with the key the certificate's
(:func:`powerplane_talos.channel.talosconfig_credentials`, ``inline_credentials``). A bad
one is a :class:`~powerplane.ConfigError` at ``channels.<name>.<field>`` (exit 2),
naming the file or the reference, never a value.
"""

from __future__ import annotations

import re
import shutil
from enum import Enum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from powerplane import SecretRef, StrictBool, Timeouts
from powerplane_talos.talosconfig import split_endpoint

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
    shutdown_force: StrictBool = False
    """Send ``force`` with shutdown (skip the node-side cordon and drain; advertised as hard)."""
    timeouts: Timeouts = Timeouts(connect_s=10, read_s=10)
    """``connect_s`` bounds connecting (TCP, TLS); ``read_s`` bounds waiting for Talos's
    answer once a request was sent. A talosctl call (connect and answer in one
    subprocess) is bounded by ``total_s``, their sum."""
    talosctl: str = "talosctl"
    """The talosctl binary (a name on PATH or a path), for ``transport: talosctl``."""
    talosctl_env: tuple[str, ...] = ()
    """Names of further variables talosctl gets (e.g. ``HTTPS_PROXY``); it gets only
    ``PATH``, ``HOME``, ``TMPDIR``, ``TZ`` and the locale otherwise."""

    @field_validator("talosctl_env")
    @classmethod
    def _env_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @field_validator("talosconfig")
    @classmethod
    def _talosconfig_named(cls, value: str | None) -> str | None:
        """A path, not read here: the file is read when the channel opens."""
        if value is not None and not value.strip():
            raise ValueError("expected the path of a talosconfig file, not an empty string")
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
        if self.transport is Transport.TALOSCTL and shutil.which(self.talosctl) is None:
            raise _at("talosctl", f"talosctl binary {self.talosctl!r} not found (not an "
                      "executable path, nor a name on PATH)", self.talosctl)
        if self.talosconfig is not None:
            if inline:
                raise ValueError(
                    f"give either 'talosconfig' or inline 'endpoint'/'ca'/'crt'/'key', "
                    f"not both (found {', '.join(inline)})"
                )
            return self  # the file: read when the channel opens (talosconfig_credentials)
        if self.context is not None:
            raise _at("context", "'context' needs 'talosconfig'", self.context)
        if self.endpoint is None or self.ca is None:
            raise ValueError(
                "expected 'talosconfig', or 'endpoint' and 'ca' (with 'crt' and 'key')"
            )
        if (self.crt is None) != (self.key is None):
            missing = "key" if self.key is None else "crt"
            raise _at(missing, "'crt' and 'key' must be given together", None)
        return self  # the PEMs behind the references: checked at use (channel.credentials)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _at(field: str, message: str, value: Any) -> ValidationError:
    """A validation error located at ``field`` (a model validator's own errors sit at the
    model, which would hide which key is wrong)."""
    return ValidationError.from_exception_data(
        "TalosConfig",
        [InitErrorDetails(
            type=PydanticCustomError("value_error", "{message}", {"message": message}),
            loc=(field,),
            input=value,
        )],
    )


def parse_target(raw: Any) -> str:
    """A Talos target is the node's address (as sent in the ``nodes`` metadata)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("expected the node's address (a non-empty string)")
    return raw.strip()
