"""A baremetal-operator stand-in on the test API server, and the BareMetalHost CRD it serves.

:func:`baremetalhost_crd` is ``metal3.io/v1alpha1`` ``BareMetalHost`` with a minimal
structural schema written from the real CRD's fields the ``metal3`` channel and the stand-in
use (``spec.online``, ``spec.consumerRef``, ``spec.bmc``, ``spec.disablePowerOff``,
``status.poweredOn``, ``status.provisioning.state``, ``status.operationalStatus`` with the
real enum, ``status.errorType``, ``status.errorCount``), the ``status`` subresource on:
a field it does not have is pruned from a write, as the API server prunes.

:class:`BareMetalOperator` behaves as the real operator is documented to (and as its
``manageHostPower`` does), a thread that looks at every BareMetalHost every ``tick_s``:

* it keeps a machine per host (the hardware: :attr:`BareMetalOperator.machines`), read into
  ``status.poweredOn`` whenever the two differ (the operator's ``UpdateHardwareState``);
* in ``provisioned``, ``externally provisioned`` and ``available``/``ready`` it drives the
  machine to ``spec.online``, re-applied on every look (a machine powered off behind its
  back, :meth:`BareMetalOperator.power_behind_back`, comes back on), after ``delay_s``;
* a reboot annotation (``reboot.metal3.io`` or ``reboot.metal3.io/{key}``; for a host that
  is not provisioned only with ``"force": true``) means off: a keyed one keeps the machine
  off until its requester removes it; the plain one it removes itself once the machine is
  off, then powers it on again; the mode (soft, hard; hard when ``status.errorCount`` > 0)
  is recorded in :attr:`BareMetalOperator.actions`;
* a host detached, paused, in operational status ``error`` or in any other provisioning
  state is left alone: nothing is done, and why is recorded in
  :attr:`BareMetalOperator.refused` (once per host and reason).

``liar`` makes it lie, for the conformance suite to catch: ``"phantom-power"`` writes
``status.poweredOn`` as a new ``spec.online`` asks at once and never changes the machine
(its hardware read puts the truth back ``refresh_s`` later); ``"drop-reboot"`` removes
every reboot annotation without a power cycle.

It writes through the test API server's own world changes (stamped ``resourceVersion``s,
watch events), in the server's loop, and only when something changes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_metal3.hosts import (
    ACTS_ON_ONLINE,
    REBOOT_PREFIX,
    REBOOT_STATES,
    host_name,
    reboot_mode,
    reboot_requested,
    unmanaged_reason,
)

__all__ = ["BMH_RESOURCE", "BareMetalOperator", "Liar", "baremetalhost_crd"]

BMH_RESOURCE = "metal3.io/v1alpha1/baremetalhosts"
"""The resource key of BareMetalHosts on the test API server."""

Liar = Literal["phantom-power", "drop-reboot"]

_STRING: dict[str, Any] = {"type": "string"}
_BOOL: dict[str, Any] = {"type": "boolean"}


def baremetalhost_crd() -> dict[str, Any]:
    """The BareMetalHost CustomResourceDefinition (a minimal structural schema)."""
    spec = {
        "type": "object",
        "required": ["online"],
        "properties": {
            "online": _BOOL,
            "consumerRef": {"type": "object", "properties": {
                k: _STRING for k in ("apiVersion", "kind", "name", "namespace", "uid")}},
            "bmc": {"type": "object", "required": ["address", "credentialsName"],
                    "properties": {"address": _STRING, "credentialsName": _STRING,
                                   "disableCertificateVerification": _BOOL}},
            "bootMACAddress": _STRING,
            "externallyProvisioned": _BOOL,
            "disablePowerOff": _BOOL,
        },
    }
    status = {
        "type": "object",
        "properties": {
            "operationalStatus": {"type": "string", "enum": [
                "", "OK", "discovered", "error", "delayed", "detached", "servicing"]},
            "errorType": _STRING,
            "errorCount": {"type": "integer"},
            "poweredOn": _BOOL,
            "lastUpdated": {"type": "string", "format": "date-time"},
            "provisioning": {"type": "object", "properties": {"state": _STRING,
                                                              "ID": _STRING}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "baremetalhosts.metal3.io"},
        "spec": {
            "group": "metal3.io",
            "names": {"kind": "BareMetalHost", "listKind": "BareMetalHostList",
                      "plural": "baremetalhosts", "singular": "baremetalhost",
                      "shortNames": ["bmh", "bmhost"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"},
                    "spec": spec, "status": status}}},
            }],
        },
    }


@dataclass
class _Pending:
    on: bool
    due: float
    mode: str


@dataclass
class BareMetalOperator:
    """The stand-in operator over ``api`` (started by :meth:`start`, or ``with``)."""

    api: KubeApiServer
    delay_s: float = 0.2
    """How long a power change takes before the machine (and then the status) shows it."""
    tick_s: float = 0.05
    liar: Liar | None = None
    refresh_s: float = 0.1
    """With ``liar="phantom-power"``: how long after its report the hardware read puts the
    truth back."""
    machines: dict[str, bool] = field(default_factory=dict)
    """``NAMESPACE/NAME`` -> the machine is powered."""
    actions: list[str] = field(default_factory=list)
    """What it did, in order (``"m/h0: power off (soft)"``)."""
    refused: list[str] = field(default_factory=list)
    """Why it did nothing for a host asked for a change (once per host and reason)."""
    lies: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._refreshed: dict[str, float] = {}
        self._lied: dict[str, bool] = {}
        self.failure: BaseException | None = None

    # -- the world ---------------------------------------------------------------------------
    def add_host(self, namespace: str, name: str, *, state: str = "provisioned",
                 online: bool = True, powered: bool | None = None,
                 bmc: str = "redfish+https://192.0.2.10/redfish/v1/Systems/1",
                 consumer: str | None = None, labels: Mapping[str, str] | None = None,
                 annotations: Mapping[str, str] | None = None,
                 operational: str = "OK", error_count: int = 0,
                 reported: bool = True, **spec: Any) -> None:
        """A BareMetalHost with its machine (``powered``: default ``online``); ``reported``
        False: no status yet (the operator has not looked)."""
        key = f"{namespace}/{name}"
        meta: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": dict(labels or {}),
                                "annotations": dict(annotations or {})}
        body: dict[str, Any] = {"metadata": meta, "spec": {
            "online": online, "bmc": {"address": bmc, "credentialsName": f"{name}-bmc-secret"},
            **spec}}
        if consumer is not None:
            body["spec"]["consumerRef"] = {"apiVersion": "cluster.x-k8s.io/v1beta1",
                                           "kind": "Machine", "name": consumer,
                                           "namespace": namespace}
        machine = online if powered is None else powered
        if reported:
            body["status"] = {"operationalStatus": operational, "poweredOn": machine,
                              "errorCount": error_count, "provisioning": {"state": state},
                              "lastUpdated": _now()}
        with self._lock:
            self.machines[key] = machine
        self.api._put(BMH_RESOURCE, namespace, body)

    def set_state(self, namespace: str, name: str, state: str, *,
                  operational: str | None = None) -> None:
        """Move a host to another provisioning state (and operational status)."""
        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status.setdefault("provisioning", {})["state"] = state
            if operational is not None:
                status["operationalStatus"] = operational
        self.api._change(BMH_RESOURCE, namespace, name, change)

    def power_behind_back(self, namespace: str, name: str, on: bool) -> None:
        """The machine's power changed without the operator (a person at the BMC)."""
        with self._lock:
            self.machines[f"{namespace}/{name}"] = on

    def host(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored BareMetalHost."""
        return self.api.object(BMH_RESOURCE, namespace, name)

    # -- the loop ----------------------------------------------------------------------------
    def start(self) -> BareMetalOperator:
        self._thread = threading.Thread(target=self._run, name="baremetal-operator",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> BareMetalOperator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
            except Exception as exc:  # the server stopped under it, at the end of a test
                self.failure = exc
            self._stop.wait(self.tick_s)

    def reconcile(self) -> None:
        """One look at every BareMetalHost."""
        for obj in self.api.objects(BMH_RESOURCE):
            self._one(obj)

    def _refuse(self, key: str, why: str) -> None:
        line = f"{key}: {why}"
        if line not in self.refused:
            self.refused.append(line)

    def _one(self, obj: dict[str, Any]) -> None:
        key = host_name(obj)
        namespace, _, name = key.partition("/")
        with self._lock:
            machine = self.machines.setdefault(key, bool((obj.get("spec") or {}).get("online")))
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        reboots = reboot_requested(obj)
        wanted_change = spec.get("online") is not machine or bool(reboots)
        why = unmanaged_reason(obj)
        if why is not None:
            if wanted_change:
                self._refuse(key, why)
            self._pending.pop(key, None)
            return
        state = (status.get("provisioning") or {}).get("state")
        assert state in ACTS_ON_ONLINE
        now = time.monotonic()
        if self.liar == "drop-reboot" and reboots:
            self._write(namespace, name, lambda o: [
                (o["metadata"].get("annotations") or {}).pop(k, None) for k in reboots])
            self.lies.append(f"{key}: dropped {', '.join(reboots)} without a reboot")
            return
        if self.liar == "phantom-power":
            online = bool(spec.get("online"))
            if self._lied.get(key) is not online:  # a new ask: report it done, do nothing
                self._lied[key] = online
                self._refreshed[key] = now
                if status.get("poweredOn") is not online:
                    self._set_powered(namespace, name, online)
                    self.lies.append(f"{key}: reported poweredOn {online}, did nothing")
            elif now - self._refreshed[key] >= self.refresh_s and \
                    status.get("poweredOn") is not machine:
                self._set_powered(namespace, name, machine)  # the hardware read, late
            return
        # the hardware read (UpdateHardwareState)
        if status.get("poweredOn") is not machine:
            self._set_powered(namespace, name, machine)
            return
        counted = [k for k in reboots if state in REBOOT_STATES or _forced(notes[k])]
        for k in reboots:
            if k not in counted:
                self._refuse(key, f"{k} ignored: a host {state!r} reboots only with force")
        if not machine and REBOOT_PREFIX in counted:
            # the plain annotation is the operator's to remove, once the host is off
            self._write(namespace, name,
                        lambda o: o["metadata"]["annotations"].pop(REBOOT_PREFIX, None))
            self.actions.append(f"{key}: removed {REBOOT_PREFIX}")
            return
        desired = bool(spec.get("online")) and not counted
        if machine is desired:
            self._pending.pop(key, None)
            return
        mode = "hard" if any(reboot_mode(notes[k]) == "hard" for k in counted) else "soft"
        if status.get("errorCount"):
            mode = "hard"
        pending = self._pending.get(key)
        if pending is None or pending.on is not desired:
            self._pending[key] = _Pending(desired, now + self.delay_s, mode)
            return
        if now < pending.due:
            return
        del self._pending[key]
        with self._lock:
            self.machines[key] = desired
        what = "power on" if desired else f"power off ({pending.mode})"
        self.actions.append(f"{key}: {what}")

    def _set_powered(self, namespace: str, name: str, on: bool) -> None:
        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status["poweredOn"] = on
            status["lastUpdated"] = _now()
        self._write(namespace, name, change)

    def _write(self, namespace: str, name: str, fn: Any) -> None:
        self.api._change(BMH_RESOURCE, namespace, name, fn)


def _forced(value: str) -> bool:
    try:
        parsed = json.loads(value) if value else {}
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("force") is True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
