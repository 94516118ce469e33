"""The ``redfish`` channel config: where the BMC is, how to log in, how each verb is carried.

One channel is one BMC endpoint (one Redfish service). Its nodes name a system of that
service as their target (``/redfish/v1/Systems/1``), or omit the target when the
service has exactly one system.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from powerplane import SecretRef, StrictFloat, Timeouts, TlsVerify

__all__ = [
    "LIMITS_MARGIN_S",
    "AuthMode",
    "RebootMode",
    "RedfishConfig",
    "ResetType",
    "ShutdownMode",
]


class ResetType(str, Enum):
    """The Redfish ``ResetType`` values this plugin knows (DSP0268 ``Resource.ResetType``)."""

    ON = "On"
    """Turn the system on."""
    FORCE_ON = "ForceOn"
    """Turn the system on at once."""
    FORCE_OFF = "ForceOff"
    """Turn the system off at once, not graceful (a power cut)."""
    GRACEFUL_SHUTDOWN = "GracefulShutdown"
    """Ask the OS to shut down in sequence, then power off."""
    GRACEFUL_RESTART = "GracefulRestart"
    """Ask the OS to restart in sequence."""
    FORCE_RESTART = "ForceRestart"
    """Restart at once, not graceful."""
    POWER_CYCLE = "PowerCycle"
    """Power off, then on again, not graceful."""
    NMI = "Nmi"
    """Send a non-maskable interrupt (not a power verb: never mapped)."""
    PUSH_POWER_BUTTON = "PushPowerButton"
    """Simulate the power button (its effect depends on the state: never mapped)."""
    SUSPEND = "Suspend"
    """Suspend the system (not a power verb: never mapped)."""
    PAUSE = "Pause"
    """Pause execution (not a power verb: never mapped)."""
    RESUME = "Resume"
    """Resume execution (not a power verb: never mapped)."""
    FULL_POWER_CYCLE = "FullPowerCycle"
    """Cycle power of the whole system and its enclosure (never mapped)."""


class AuthMode(str, Enum):
    """How the channel authenticates to the Redfish service."""

    SESSION = "session"
    """A Redfish session (``X-Auth-Token``), logged out on close and after errors."""
    BASIC = "basic"
    """HTTP basic authentication on every request."""
    AUTO = "auto"
    """A session where the service offers one, else basic authentication."""


class ShutdownMode(str, Enum):
    """How ``shutdown`` is carried."""

    GRACEFUL = "graceful"
    """``GracefulShutdown`` only; the OS decides when power goes."""
    GRACEFUL_THEN_FORCE = "graceful-then-force"
    """``GracefulShutdown``; ``ForceOff`` once if not off after ``shutdown_wait_s``."""
    FORCE = "force"
    """``ForceOff``: a power cut."""


class RebootMode(str, Enum):
    """How ``reboot`` is carried."""

    GRACEFUL = "graceful"
    """``GracefulRestart``."""
    FORCE = "force"
    """``ForceRestart``, or ``PowerCycle`` where the service has no ``ForceRestart``."""
    GRACEFUL_THEN_FORCE = "graceful-then-force"
    """A shutdown as in ``graceful-then-force`` (observed through ``PowerState``), then ``On``."""


class RedfishConfig(BaseModel):
    """Config keys of a ``redfish`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str
    """Base URL of the Redfish service: scheme and authority (``https://10.0.0.5:8443``)."""
    username: str
    """Account name on the BMC."""
    password: SecretRef
    """The account's password, as a secret reference ``{env: NAME}`` or ``{file: PATH}``."""
    verify: TlsVerify = True
    """TLS verification: ``true`` (system CAs), ``false`` (none), or a CA bundle path."""
    auth: AuthMode = AuthMode.AUTO
    """``session``, ``basic`` or ``auto`` (a session where offered, else basic)."""
    timeouts: Timeouts = Timeouts(connect_s=5, read_s=30)
    """Bounds on one request: ``connect_s`` to open the connection (TCP and TLS) to the BMC,
    ``read_s`` to wait for its answer once a request was sent (seconds)."""
    shutdown: ShutdownMode = ShutdownMode.GRACEFUL
    """How shutdown is carried: ``graceful``, ``graceful-then-force`` or ``force``."""
    shutdown_wait_s: StrictFloat = Field(30.0, gt=0, allow_inf_nan=False)
    """In ``graceful-then-force``: how long to wait for the system to read off before ``ForceOff``.

    The wait runs inside the verb's call, so it must fit in the host's ``limits.timeout_s``
    with the last request after it (see :meth:`RedfishConfig.check_limits`).
    """
    reboot: RebootMode = RebootMode.GRACEFUL
    """How reboot is carried: ``graceful``, ``force`` or ``graceful-then-force``."""
    poll_interval_s: StrictFloat = Field(1.0, gt=0, allow_inf_nan=False)
    """How often ``PowerState`` is read while waiting in ``graceful-then-force``."""
    reset_types: list[ResetType] | None = None
    """Operator override: the reset types this BMC accepts, used instead of what it advertises.

    The capability set then records its source as *declared*, not discovered.
    """

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("expected a URL starting with https:// or http://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _wait_fits_cadence(self) -> RedfishConfig:
        if self.poll_interval_s > self.shutdown_wait_s:
            raise ValueError("poll_interval_s must not exceed shutdown_wait_s")
        return self

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        """Problems of this channel with the host's ``limits.timeout_s``, as (field, message).

        ``graceful-then-force`` waits inside the verb's call and then sends one more reset
        (``ForceOff``, or ``On`` after a reboot's shutdown), which needs up to
        ``timeouts.total_s`` (``connect_s + read_s``) of its own. All of it must fit in
        ``limits.timeout_s`` with a margin of :data:`LIMITS_MARGIN_S`: otherwise the host
        gives up first, the forced fallback is never sent, and the call ends with its
        outcome unknown. A shutdown waits once; a reboot waits up to twice (for the graceful
        shutdown, then for the ``ForceOff``).
        """
        problems: list[tuple[str, str]] = []
        last = self.timeouts.total_s
        uses = [
            (verb, waits)
            for verb, waits, on in (
                ("shutdown", 1, self.shutdown is ShutdownMode.GRACEFUL_THEN_FORCE),
                ("reboot", 2, self.reboot is RebootMode.GRACEFUL_THEN_FORCE),
            )
            if on
        ]
        for verb, waits in uses:
            needed = waits * self.shutdown_wait_s + last + LIMITS_MARGIN_S
            if needed <= timeout_s:
                continue
            wait_words = "shutdown_wait_s" if waits == 1 else "twice shutdown_wait_s"
            room = (timeout_s - last - LIMITS_MARGIN_S) / waits
            fix = (f"lower shutdown_wait_s to at most {room:g} s, or " if room > 0 else
                   "lower timeouts.read_s or timeouts.connect_s, or ")
            problems.append((
                "shutdown_wait_s",
                f"{verb}: graceful-then-force needs up to {needed:g} s ({wait_words}, "
                f"{waits * self.shutdown_wait_s:g} s, then timeouts.connect_s + timeouts.read_s, "
                f"{last:g} s, for its last reset, and a {LIMITS_MARGIN_S:g} s margin), more "
                f"than limits.timeout_s ({timeout_s:g} s): the host would give up before the "
                f"forced fallback is sent; {fix}raise limits.timeout_s to at least {needed:g} s",
            ))
        return problems


LIMITS_MARGIN_S = 1.0
"""The room :meth:`RedfishConfig.check_limits` keeps for the first reset's answer and the
last readback of ``graceful-then-force``, beyond its wait and its last request."""


def parse_target(raw: Any) -> str | None:
    """A system path (``/redfish/v1/Systems/1``); None for a service with one system."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.startswith("/") or raw.strip("/") == "":
        raise ValueError(
            "expected a system path such as /redfish/v1/Systems/1 "
            "(or no target, when the service has exactly one system)"
        )
    return raw.rstrip("/")
