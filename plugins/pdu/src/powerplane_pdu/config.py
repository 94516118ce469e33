"""Config of a ``pdu`` channel: one PDU (SNMP or Redfish), optional extra feeds, verb policy.

::

    rack-a:
      type: pdu
      protocol: snmp              # snmp | redfish
      profile: apc-rpdu           # a profile name, or auto (detected from sysObjectID)
      host: 10.0.0.5
      community: {file: /run/secrets/pdu-community}
      feeds:                      # other PDUs feeding the same machines (the B feed)
        b: {protocol: snmp, profile: apc-rpdu, host: 10.0.0.6,
            community: {file: /run/secrets/pdu-community}}
      timeouts: {connect_s: 1, read_s: 1}   # read_s: per SNMP request (and attempt)
      retries: 1
      reboot_delay_s: 5
      on_when_already_on: refuse  # refuse | cycle

A node's target names its outlets: ``{outlets: [3, 4]}`` on this PDU, plus
``{feeds: {b: [3, 4]}}`` for outlets on a feed.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from powerplane import SecretRef, StrictFloat, StrictInt, Timeouts, TlsVerify
from powerplane_pdu.profiles import PROFILES, WITHDRAWN

__all__ = ["AuthProtocol", "PduChannelConfig", "PduSpec", "PrivProtocol"]


class AuthProtocol(str, Enum):
    """SNMPv3 authentication protocol."""

    MD5 = "md5"
    """HMAC-MD5-96."""
    SHA = "sha"
    """HMAC-SHA-96 (SHA-1)."""
    SHA224 = "sha224"
    """HMAC-SHA-2 224."""
    SHA256 = "sha256"
    """HMAC-SHA-2 256."""
    SHA384 = "sha384"
    """HMAC-SHA-2 384."""
    SHA512 = "sha512"
    """HMAC-SHA-2 512."""


class PrivProtocol(str, Enum):
    """SNMPv3 privacy (encryption) protocol."""

    DES = "des"
    """CBC-DES."""
    TRIPLE_DES = "3des"
    """3DES-EDE."""
    AES = "aes"
    """CFB128-AES-128."""
    AES192 = "aes192"
    """CFB128-AES-192 (Reeder key localization)."""
    AES256 = "aes256"
    """CFB128-AES-256 (Reeder key localization)."""


class PduSpec(BaseModel):
    """One PDU and how to reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Literal["snmp", "redfish"] = "snmp"
    """How the PDU is driven."""

    # -- SNMP --------------------------------------------------------------------------
    profile: str = "auto"
    """SNMP vendor profile name, or ``auto`` to detect it from ``sysObjectID``."""
    host: str | None = None
    """SNMP agent address."""
    port: StrictInt = Field(161, ge=1, le=65535)
    """SNMP agent UDP port."""
    version: Literal["1", "2c", "3"] = "2c"
    """SNMP version."""
    community: SecretRef | None = None
    """v1/v2c community (a secret reference)."""
    user: str | None = None
    """v3 USM user name."""
    auth_protocol: AuthProtocol | None = None
    """v3 authentication protocol (with ``auth_key``)."""
    auth_key: SecretRef | None = None
    """v3 authentication key (a secret reference)."""
    priv_protocol: PrivProtocol | None = None
    """v3 privacy protocol (with ``priv_key``)."""
    priv_key: SecretRef | None = None
    """v3 privacy key (a secret reference)."""
    context: str = ""
    """v3 context name."""
    timeouts: Timeouts = Timeouts(connect_s=1, read_s=1)
    """Bounds on one request. SNMP: ``read_s`` is the wait for each response (per
    attempt; UDP has no connection, ``connect_s`` does not apply). Redfish: ``connect_s``
    bounds connecting (TCP and TLS), ``read_s`` each read and write."""
    retries: StrictInt = Field(1, ge=0, le=10)
    """SNMP retransmissions after the first request."""
    max_varbinds: StrictInt = Field(24, ge=1, le=256)
    """Most outlets written or read in one SNMP request."""
    settle_s: StrictFloat = Field(5.0, ge=0, le=600, allow_inf_nan=False)
    """Seconds a switched outlet may take to read back its new state (PDUs sequence
    outlets); polled until then, an outlet that never reads it is not reported switched."""

    # -- Redfish -----------------------------------------------------------------------
    endpoint: str | None = None
    """Redfish service root URL, e.g. ``https://10.0.0.7``."""
    rack_pdu: str = "1"
    """Id of the PDU under ``/redfish/v1/PowerEquipment/RackPDUs``."""
    username: str | None = None
    """Redfish user name."""
    password: SecretRef | None = None
    """Redfish password (a secret reference)."""
    auth: Literal["basic", "session"] = "session"
    """Redfish authentication: HTTP basic on each request, or one session token."""
    verify: TlsVerify = True
    """TLS verification: true, false, or a CA bundle path."""

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "timeout_s" in data:
            raise ValueError(
                "'timeout_s' was replaced by 'timeouts: {connect_s: ..., read_s: ...}' "
                "(read_s is the per-request SNMP timeout)"
            )
        return data

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @model_validator(mode="after")
    def _complete(self) -> PduSpec:
        if self.protocol == "snmp":
            if not self.host:
                raise ValueError("protocol snmp needs 'host'")
            if self.profile in WITHDRAWN:
                raise ValueError(f"profile {self.profile!r} is {WITHDRAWN[self.profile]}")
            if self.profile != "auto" and self.profile not in PROFILES:
                valid = ", ".join(sorted(PROFILES))
                raise ValueError(
                    f"unknown profile {self.profile!r}; expected auto or one of: {valid}"
                )
            if self.version in ("1", "2c") and self.community is None:
                raise ValueError(f"SNMP v{self.version} needs 'community' (a secret reference)")
            if self.version == "3":
                if not self.user:
                    raise ValueError("SNMP v3 needs 'user'")
                if (self.auth_protocol is None) != (self.auth_key is None):
                    raise ValueError("'auth_protocol' and 'auth_key' go together")
                if (self.priv_protocol is None) != (self.priv_key is None):
                    raise ValueError("'priv_protocol' and 'priv_key' go together")
                if self.priv_key is not None and self.auth_key is None:
                    raise ValueError("SNMP v3 privacy needs authentication too")
        else:
            if not self.endpoint:
                raise ValueError("protocol redfish needs 'endpoint'")
            if (self.username is None) != (self.password is None):
                raise ValueError("'username' and 'password' go together")
        return self


class PduChannelConfig(PduSpec):
    """Config of a ``pdu`` channel: its PDU, other feeds, and how verbs behave."""

    feeds: dict[str, PduSpec] = Field(default_factory=dict)
    """Other PDUs (A/B feeds) whose outlets a target may name, by feed name."""
    reboot_delay_s: StrictFloat = Field(5.0, ge=0, allow_inf_nan=False)
    """Seconds between switching off and on again in a reboot."""
    on_when_already_on: Literal["refuse", "cycle"] = "refuse"
    """Power-on when every outlet is already on: refuse (say why), or power-cycle."""
    standby_watts: StrictFloat = Field(20.0, ge=0, allow_inf_nan=False)
    """A metered outlet drawing more than this reads as a machine that is on."""
    standby_amps: StrictFloat = Field(0.2, ge=0, allow_inf_nan=False)
    """The same threshold for profiles that meter current."""
