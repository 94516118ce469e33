"""The ``ipmi`` channel config: how to log in to a fleet's BMCs and how each verb is carried.

One channel holds one set of credentials for many BMCs: each node's target is its BMC's
address, ``HOST`` or ``HOST:PORT`` (UDP, default 623), so the per-endpoint session budget
is per BMC. Secrets (``password``, ``kg``) are references, read when a session is opened.
"""

from __future__ import annotations

import ipaddress
import re
from enum import Enum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from powerplane import SecretRef, StrictBool, StrictFloat, Timeouts

__all__ = [
    "DEFAULT_PORT",
    "DISCARD_PORT",
    "LIMITS_MARGIN_S",
    "BmcAddress",
    "IpmiConfig",
    "Privilege",
    "RebootMode",
    "ShutdownMode",
    "parse_target",
    "unknown_target",
]

DEFAULT_PORT = 623
"""The IPMI over LAN (RMCP) UDP port."""


class Privilege(str, Enum):
    """The session privilege the channel asks for (IPMI 2.0 section 6.8, privilege levels)."""

    USER = "user"
    """Read-only: chassis status. A ``user`` session advertises no verb."""
    OPERATOR = "operator"
    """The least that chassis control (power on, off, reset, soft-off) needs."""
    ADMINISTRATOR = "administrator"
    """Everything operator may do, and BMC configuration; more than power control needs."""

    @property
    def level(self) -> int:
        """The IPMI privilege level number (2 user, 3 operator, 4 administrator)."""
        return {"user": 2, "operator": 3, "administrator": 4}[self.value]


class ShutdownMode(str, Enum):
    """How ``shutdown`` is carried (Chassis Control, IPMI 2.0 section 28.3)."""

    GRACEFUL = "graceful"
    """Soft-off (05h, "initiate soft-shutdown via ACPI"); the OS decides when power goes."""
    FORCE = "force"
    """Power down (00h): a power cut."""
    GRACEFUL_THEN_FORCE = "graceful-then-force"
    """Soft-off; power down once if Get Chassis Status does not read off within
    ``shutdown_wait_s``."""


class RebootMode(str, Enum):
    """How ``reboot`` is carried."""

    FORCE = "force"
    """Hard reset (03h): a restart without the OS's say."""
    GRACEFUL_THEN_FORCE = "graceful-then-force"
    """Soft-off, wait for off (power down once if it does not come), then power up (01h).

    The only graceful restart IPMI can observe: a warm restart is invisible in the chassis
    power state, so the channel goes through off, which it can see.
    """


class IpmiConfig(BaseModel):
    """Config keys of an ``ipmi`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str
    """The BMC account (1 to 16 bytes of UTF-8, the IPMI user name limit)."""
    password: SecretRef
    """The account's password, as a secret reference ``{env: NAME}`` or ``{file: PATH}``."""
    kg: SecretRef | None = None
    """The BMC key (K_g) where the BMC has one set, as a secret reference; none by default."""
    privilege: Privilege = Privilege.OPERATOR
    """The session privilege asked for: ``operator`` (default), ``administrator`` or ``user``."""
    cipher_suite: Literal[0, 3, 17] | None = None
    """The RMCP+ cipher suite: unset for 17 where the BMC offers it, then 3; or ``17``, ``3``.

    ``0`` (no authentication, no integrity, no confidentiality) is refused, naming the
    suites the BMC offers; even with ``allow_insecure`` this channel never opens it, since
    pyghmi implements suites 3 and 17 only.
    """
    allow_insecure: StrictBool = False
    """Accept an IPMI 1.5 session (MD5 challenge, no confidentiality) on a BMC that offers
    no IPMI 2.0; logs a warning naming the risk. Off by default: such sessions are refused."""
    shutdown: ShutdownMode = ShutdownMode.GRACEFUL
    """How shutdown is carried: ``graceful`` (soft-off), ``force`` or ``graceful-then-force``."""
    reboot: RebootMode = RebootMode.FORCE
    """How reboot is carried: ``force`` (hard reset) or ``graceful-then-force``."""
    shutdown_wait_s: StrictFloat = Field(30.0, gt=0, le=3600)
    """In ``graceful-then-force``: how long to wait for the chassis to read off after soft-off."""
    poll_interval_s: StrictFloat = Field(1.0, gt=0, le=60)
    """How often Get Chassis Status is read while waiting in ``graceful-then-force``."""
    timeouts: Timeouts = Timeouts(connect_s=2, read_s=3)
    """``connect_s``: bound on reaching the BMC and opening a session (the sessionless
    probe, RMCP+ open, RAKP 1 to 4); ``read_s``: bound on the BMC's answer to one command
    in a session. Seconds each."""

    @field_validator("username")
    @classmethod
    def _username_fits(cls, value: str) -> str:
        size = len(value.encode("utf-8"))
        if not 1 <= size <= 16:
            raise ValueError(f"expected 1 to 16 bytes (IPMI user names); got {size}")
        return value

    @field_validator("cipher_suite", mode="before")
    @classmethod
    def _suite_known(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and value not in (0, 3, 17)):
            raise ValueError(
                f"expected 17 or 3 (or no value: 17 where the BMC offers it, then 3); got "
                f"{value!r}: this channel speaks the suites pyghmi implements, 3 (HMAC-SHA1, "
                "AES-128) and 17 (HMAC-SHA256, AES-128)"
            )
        return value

    @model_validator(mode="after")
    def _wait_fits_cadence(self) -> IpmiConfig:
        if self.poll_interval_s > self.shutdown_wait_s:
            raise ValueError("poll_interval_s must not exceed shutdown_wait_s")
        return self

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        """Problems of this channel with the host's ``limits.timeout_s``, as (field, message).

        ``graceful-then-force`` waits inside the verb's call and then sends one more chassis
        command (power down, or power up after a reboot's shutdown). Its wait and that last
        command must fit in ``limits.timeout_s``, or the host gives up first and the forced
        fallback is never sent.
        """
        problems: list[tuple[str, str]] = []
        # a session (connect_s) and the last command with one read before it (2 x read_s)
        last = self.timeouts.total_s + self.timeouts.read_s
        for verb, on, waits in (
            ("shutdown", self.shutdown is ShutdownMode.GRACEFUL_THEN_FORCE, 1),
            ("reboot", self.reboot is RebootMode.GRACEFUL_THEN_FORCE, 2),
        ):
            if not on:
                continue
            needed = waits * self.shutdown_wait_s + last + LIMITS_MARGIN_S
            if needed > timeout_s:
                problems.append((
                    "shutdown_wait_s",
                    f"{verb}: graceful-then-force needs up to {needed:g} s "
                    f"({waits} x shutdown_wait_s, then a session and its last command, and a "
                    f"{LIMITS_MARGIN_S:g} s margin), more than limits.timeout_s "
                    f"({timeout_s:g} s): lower shutdown_wait_s or raise limits.timeout_s",
                ))
        return problems


LIMITS_MARGIN_S = 1.0
"""Room :meth:`IpmiConfig.check_limits` keeps beyond the wait and the last command."""

_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_DIGITS = re.compile(r"[0-9]{1,5}", re.ASCII)
_DOTTED = re.compile(r"[0-9.]+", re.ASCII)


def _host_problem(raw: str) -> str | None:
    """Why ``raw`` is not an IPv4 dotted quad, an IPv6 address or an RFC 1123 host name."""
    host = _clip(raw)
    if not raw:
        return "no host before the port"
    if not raw.isascii():
        return f"{host!r} has characters outside ASCII (a BMC address is ASCII)"
    if ":" in raw:
        try:
            ipaddress.IPv6Address(raw)
        except ValueError:
            return f"{host!r} is not a valid IPv6 address"
        return None
    if _DOTTED.fullmatch(raw):
        try:
            ipaddress.IPv4Address(raw)
        except ValueError:
            return (f"{host!r} is not a valid IPv4 address (four numbers 0 to 255, dotted)")
        return None
    name = raw[:-1] if raw.endswith(".") else raw
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return (f"{host!r} is not an IP address or host name (RFC 1123: labels of letters, "
                "digits and inner hyphens, 1 to 63 characters each, 253 in all)")
    if labels[-1].isdigit():
        return (f"{host!r} is not an IP address or host name (its last label is all digits, "
                "which no host name may be: RFC 1123 section 2.1)")
    return None


class BmcAddress(str):
    """A BMC's address as a node names it: ``HOST`` or ``HOST:PORT`` (``[v6]:PORT``)."""

    host: str
    port: int

    def __new__(cls, host: str, port: int) -> BmcAddress:
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self = super().__new__(cls, shown)
        self.host = host
        self.port = port
        return self


def parse_target(raw: Any) -> BmcAddress:
    """Parse a node's target: the BMC address, ``HOST`` or ``HOST:PORT`` (default 623)."""
    hint = "expected the BMC's address, HOST or HOST:PORT (UDP, default 623)"
    if isinstance(raw, BmcAddress):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{hint}; got {type(raw).__name__}")
    text = raw.strip()
    shown = _clip(text)
    port = DEFAULT_PORT
    host = text
    bracketed = text.startswith("[")
    if bracketed:
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{hint}; unclosed '[' in {shown!r}")
        host, rest = text[1:end], text[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{hint}; got {shown!r}")
            port = _port(rest[1:], text, hint)
    elif text.count(":") == 1:
        host, _, tail = text.partition(":")
        port = _port(tail, text, hint)
    if bracketed and ":" not in host:
        raise ValueError(f"{hint}; only an IPv6 address goes in brackets, got {shown!r}")
    problem = _host_problem(host)
    if problem is not None:
        raise ValueError(f"{hint}; {problem}")
    return BmcAddress(host, port)


def _clip(text: str, keep: int = 60) -> str:
    """``text`` as an error shows it: at most ``keep`` characters, and how many there were."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def _port(text: str, whole: str, hint: str) -> int:
    """The port: 1 to 5 ASCII digits, 1 to 65535 (``str.isdigit`` would take ``²`` or ``٦``)."""
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise ValueError(f"{hint}; port {_clip(text, 12)!r} in {_clip(whole)!r} is not a "
                         "number 1 to 65535 (ASCII digits)")
    return int(text)


DISCARD_PORT = 9
"""UDP discard: the port an unknown target uses on a host that is not this one."""


def unknown_target(raw: Any) -> str:
    """A well-formed target no BMC answers at: the same host, a UDP port nothing listens on.

    For the conformance suite's negatives (an unknown target must be a clear error, and
    its error must disclose no secret). An IPMI target is the BMC's own address, so "a
    target the device does not have" is the BMC's host on another port: on a loopback
    host a port just found free, elsewhere the discard port (9), which no BMC serves.
    """
    import socket

    addr = parse_target(raw)
    port = DISCARD_PORT
    if _is_loopback(addr.host):
        family = socket.AF_INET6 if ":" in addr.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.bind((addr.host, 0))
            port = int(sock.getsockname()[1])
    if port == addr.port:
        port = DISCARD_PORT if addr.port != DISCARD_PORT else DEFAULT_PORT + 1
    return str(BmcAddress(addr.host, port))


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() in ("localhost", "localhost.")
