"""What a ``BareMetalHost`` object says, read as the baremetal-operator acts on it.

Pure functions over the object as the API server returns it (a dict); no I/O. The facts
are the operator's own (metal3-io/baremetal-operator, ``internal/controller/metal3.io``):

* ``manageHostPower``, the one place the operator changes power, runs only in the steady
  states: ``provisioned`` and ``externally provisioned`` (``actionManageSteadyState``) and
  ``available`` (``actionManageAvailable``; ``ready`` is its older name). There it first
  reads the hardware into ``status.poweredOn``, then drives the power to ``spec.online``
  (re-applied on every reconcile: a host powered off behind its back comes back on, #790);
* a reboot annotation counts without ``force`` only for a provisioned host
  (``hasRebootAnnotation(info, !isProvisioned)``), so reboot is offered there only;
* a power-off is soft unless a reboot annotation asks for hard, or ``status.errorCount`` is
  above 0 (then hard); a soft power-off that fails is retried hard ("Continuing with hard
  poweroff after soft poweroff fails"): Ironic's ``soft_power_off_timeout`` (600 s by
  default) is the worst case before the hard fallback;
* ``spec.disablePowerOff`` makes the operator reboot where it would power off: no shutdown;
* the ``baremetalhost.metal3.io/detached`` annotation (or ``operationalStatus: detached``)
  and ``baremetalhost.metal3.io/paused`` stop it from managing the host at all;
* ``status.poweredOn`` is the operator's last reading of the hardware.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from powerplane import CapabilitySet, Reading, Source, Verb

__all__ = [
    "ACTS_ON_ONLINE",
    "DETACHED",
    "NODE_LABEL",
    "PAUSED",
    "REBOOT_PREFIX",
    "REBOOT_STATES",
    "SOFT_OFF_TIMEOUT_S",
    "BmcEndpoint",
    "bmc_endpoint",
    "bmc_of",
    "capabilities_of",
    "host_name",
    "reading_of",
    "reboot_mode",
    "reboot_requested",
    "serves_node",
    "unmanaged_reason",
]

ACTS_ON_ONLINE = frozenset({"provisioned", "externally provisioned", "available", "ready"})
"""The provisioning states in which the operator drives power to ``spec.online``."""
REBOOT_STATES = frozenset({"provisioned", "externally provisioned"})
"""The states in which it honours a reboot annotation without ``force``."""
DETACHED = "baremetalhost.metal3.io/detached"
PAUSED = "baremetalhost.metal3.io/paused"
REBOOT_PREFIX = "reboot.metal3.io"
NODE_LABEL = "powerplane.io/node"
"""A label on a BareMetalHost naming the node it serves (wins over ``spec.consumerRef``)."""
SOFT_OFF_TIMEOUT_S = 600.0
"""Ironic's ``[conductor]soft_power_off_timeout`` by default: the worst case of a soft
power-off before the operator falls back to hard."""


def host_name(obj: Mapping[str, Any]) -> str:
    """``NAMESPACE/NAME`` of a BareMetalHost object."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _state(obj: Mapping[str, Any]) -> str | None:
    prov = _status(obj).get("provisioning")
    state = prov.get("state") if isinstance(prov, Mapping) else None
    return state if isinstance(state, str) and state else None


def unmanaged_reason(obj: Mapping[str, Any]) -> str | None:
    """Why the operator does not drive this host's power now (None: it does)."""
    name = host_name(obj)
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    status = _status(obj)
    if meta.get("deletionTimestamp"):
        return f"BareMetalHost {name} is being deleted"
    if DETACHED in notes or status.get("operationalStatus") == "detached":
        return (f"BareMetalHost {name} is detached ({DETACHED}): the baremetal-operator "
                "does not manage its power")
    if PAUSED in notes:
        return (f"BareMetalHost {name} is paused ({PAUSED}): the baremetal-operator does not "
                "reconcile it")
    state = _state(obj)
    if state is None:
        return (f"BareMetalHost {name} has no status.provisioning.state yet: the "
                "baremetal-operator has not reported it")
    if status.get("operationalStatus") == "error":
        kind = status.get("errorType") or "unknown error"
        return (f"BareMetalHost {name} is in operational status error ({kind}): the "
                "baremetal-operator must recover it first")
    if state not in ACTS_ON_ONLINE:
        return (f"BareMetalHost {name} is {state!r}: the baremetal-operator acts on "
                "spec.online only in the states provisioned, externally provisioned and "
                "available")
    return None


def capabilities_of(obj: Mapping[str, Any] | None, name: str, *, reboot_mode: str = "soft",
                    soft_off_timeout_s: float = SOFT_OFF_TIMEOUT_S) -> CapabilitySet:
    """What the operator will do for this host now (``obj`` None: no such BareMetalHost)."""
    if obj is None:
        return CapabilitySet.empty(f"no BareMetalHost {name}")
    why = unmanaged_reason(obj)
    if why is not None:
        return CapabilitySet.empty(why)
    state = _state(obj)
    spec = obj.get("spec") or {}
    status = _status(obj)
    hard_off = bool(status.get("errorCount") or 0)
    graceful: list[Verb] = []
    hard: list[Verb] = [Verb.POWER_ON]
    withheld: dict[Verb, str] = {}
    if spec.get("disablePowerOff"):
        withheld[Verb.SHUTDOWN] = ("spec.disablePowerOff is set: the baremetal-operator "
                                   "reboots this host where it would power it off")
    elif hard_off:
        hard.append(Verb.SHUTDOWN)
    else:
        graceful.append(Verb.SHUTDOWN)
    if state in REBOOT_STATES:
        (graceful if reboot_mode == "soft" and not hard_off else hard).append(Verb.REBOOT)
    else:
        withheld[Verb.REBOOT] = (f"BareMetalHost {name} is {state!r}: the baremetal-operator "
                                 "honours the reboot annotation only for provisioned hosts")
    off = ("a hard power-off (status.errorCount > 0)" if hard_off else
           f"a soft power-off, hard after Ironic's soft power-off timeout (worst case "
           f"{soft_off_timeout_s:g} s)")
    return CapabilitySet.of(
        graceful=graceful, hard=hard, source=Source.DISCOVERED, withheld=withheld,
        detail=f"BareMetalHost {name} ({state}) through the baremetal-operator: "
               f"spec.online; shutdown is {off}")


def reading_of(obj: Mapping[str, Any], name: str) -> Reading:
    """``status.poweredOn`` where the operator reads the hardware; unknown elsewhere (a
    host it does not manage now is one it cannot see: never reported off)."""
    why = unmanaged_reason(obj)
    if why is not None:
        return Reading.unknown(why)
    powered = _status(obj).get("poweredOn")
    if not isinstance(powered, bool):
        return Reading.unknown(f"BareMetalHost {name}: the baremetal-operator has not "
                               "reported status.poweredOn")
    detail = f"status.poweredOn of BareMetalHost {name}"
    return Reading.on(detail) if powered else Reading.off(detail)


def reboot_requested(obj: Mapping[str, Any]) -> list[str]:
    """The reboot annotations on the host (any requester's)."""
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    return sorted(k for k in notes if k == REBOOT_PREFIX or k.startswith(REBOOT_PREFIX + "/"))


def reboot_mode(value: str) -> str:
    """The mode a reboot annotation's value asks for (the operator's reading: not JSON or
    no mode is soft)."""
    try:
        parsed = json.loads(value) if value else {}
    except ValueError:
        return "soft"
    mode = parsed.get("mode") if isinstance(parsed, dict) else None
    return "hard" if mode == "hard" else "soft"


# -- the BMC address ---------------------------------------------------------------------
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class BmcEndpoint:
    """A BMC's host and, where it is known, port."""

    host: str
    port: int | None = None

    def matches(self, other: BmcEndpoint) -> bool:
        """Same host, and the same port where both know theirs."""
        if self.host != other.host:
            return False
        return self.port is None or other.port is None or self.port == other.port


def _norm_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def bmc_endpoint(address: str, *, kind: str | None = None) -> BmcEndpoint | None:
    """The endpoint an address names: a BareMetalHost's ``spec.bmc.address``
    (``ipmi://h:623``, ``redfish+https://h/redfish/v1/Systems/1``, ``idrac-virtualmedia://h``,
    a bare ``h`` meaning IPMI) or a channel's address (a URL, ``h:p`` or ``h``).
    ``kind``: ``ipmi`` for an IPMI address without a port (623). None: not an address."""
    text = address.strip()
    if not text:
        return None
    if "://" not in text:
        if text.count(":") > 1 and not text.startswith("["):  # a bare IPv6 address
            return BmcEndpoint(_norm_host(text), 623 if kind == "ipmi" else None)
        parsed = urlsplit(f"//{text}")
        scheme = "ipmi" if kind == "ipmi" else ""
    else:
        parsed = urlsplit(text)
        scheme = parsed.scheme.lower()
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError:
        return None
    if not host:
        return None
    if port is None:
        if scheme == "ipmi" or scheme.startswith("ipmi"):
            port = 623
        elif "+" in scheme:
            port = _DEFAULT_PORTS.get(scheme.rsplit("+", 1)[1])
        elif scheme in _DEFAULT_PORTS:
            port = _DEFAULT_PORTS[scheme]
        elif scheme and scheme != "ipmi":
            port = 443  # redfish://, idrac-redfish://, ilo5-redfish://: HTTPS
    return BmcEndpoint(_norm_host(host), port)


def bmc_of(obj: Mapping[str, Any]) -> BmcEndpoint | None:
    """The endpoint of a BareMetalHost's ``spec.bmc.address`` (a bare host is IPMI)."""
    bmc = (obj.get("spec") or {}).get("bmc") or {}
    address = bmc.get("address") if isinstance(bmc, Mapping) else None
    if not isinstance(address, str):
        return None
    return bmc_endpoint(address, kind=None if "://" in address else "ipmi")


# -- the node a host serves --------------------------------------------------------------
def serves_node(obj: Mapping[str, Any], node: str) -> bool:
    """Whether this BareMetalHost serves ``node``: its label ``powerplane.io/node`` names it,
    or, without that label, its ``spec.consumerRef.name`` does."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if NODE_LABEL in labels:
        return bool(labels[NODE_LABEL] == node)
    ref = (obj.get("spec") or {}).get("consumerRef") or {}
    return isinstance(ref, Mapping) and ref.get("name") == node
