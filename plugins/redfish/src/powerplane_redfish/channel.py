"""The ``redfish`` channel: reboot, shutdown, power-on and readback of Redfish systems.

Capabilities are read from the BMC (``ResetType@Redfish.AllowableValues`` on the system's
``#ComputerSystem.Reset`` action, else the ``@Redfish.ActionInfo`` resource it points at),
never assumed, and mapped to verbs by :mod:`powerplane_redfish.mapping`. Every body is read
through its declared model (:mod:`powerplane_redfish.resources`: ``ComputerSystem``, the
reset action, ``ActionInfo``, ``Manager``); a body that does not fit is a
:class:`~powerplane.ProtocolError`. Discovery is
cached per target, so a steady-state verb costs one POST. ``capabilities_batch`` discovers
many systems of one service with one ``$expand`` GET of the Systems collection where the
service root's ``ProtocolFeaturesSupported.ExpandQuery`` advertises it, else with bounded
concurrent GETs; each system is judged from its own payload only. Readback reads ``PowerState``.
The boot marker (:meth:`RedfishChannel.boot_marker`) reads ``LastResetTime``, else
``BootProgress.LastStateTime``, where the BMC publishes them.

Both transports (:mod:`powerplane_redfish.connection`: the direct client for basic
authentication, sushy for session and auto) are synchronous, so every method is a plain ``def``:
the host runs them in worker threads, bounded per endpoint through
:meth:`RedfishChannel.endpoint`. Nothing is read that a call does not need: a named system
is read by its path, without the service root (read only to find the only system of a
service, or its ``$expand`` support for a batch).

Every reset POST passes :func:`powerplane.about_to_send` right before it is written (so the
channel type declares ``gated_sends``): once the host has given up on a call, nothing more
leaves, not even the ``ForceOff`` of ``graceful-then-force``. Once a reset of a verb was
sent, a later failure of the same call (a readback that times out, a system that does not
read off) is :class:`~powerplane.OutcomeUnknown`, never a plain failure: retrying could
send the verb twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelError,
    ConfigError,
    OutcomeUnknown,
    PowerplaneError,
    ProtocolError,
    Reading,
    Source,
    Verb,
    require,
)
from powerplane_redfish.config import RedfishConfig, ResetType, ShutdownMode, parse_target
from powerplane_redfish.connection import Connection, Session
from powerplane_redfish.mapping import Plan, parse_reset_types, plan
from powerplane_redfish.resources import (
    RESET_ACTION,
    ActionInfo,
    ComputerSystem,
    Manager,
    ResetAction,
    parse,
)

__all__ = ["RedfishChannel", "boot_marker_of", "parse_target"]

_RESET = RESET_ACTION
_ALLOWABLE = "ResetType@Redfish.AllowableValues"
_ACTION_INFO = "@Redfish.ActionInfo"

DISCOVERY_CONCURRENCY = 4
"""Systems read at once by ``capabilities_batch`` where the service cannot inline them (the
host's default ``limits.per_endpoint``: a BMC serves few requests at a time)."""


@dataclass(frozen=True)
class _System:
    """What discovery found for one target."""

    path: str
    reset_target: str | None
    plan: Plan


class RedfishChannel:
    """One Redfish service (one BMC endpoint) and the systems behind it."""

    def __init__(self, name: str, config: RedfishConfig) -> None:
        self.name = name
        self.config = config
        self.connection = Connection(name, config)
        self._systems: dict[str | None, _System] = {}

    # -- plumbing ----------------------------------------------------------------------------
    def endpoint(self, target: str | None) -> str:
        """The BMC every call of this channel reaches (calls are bounded per endpoint)."""
        return self.config.endpoint

    def _system(self, target: str | None) -> _System:
        found = self._systems.get(target)
        return found if found is not None else self._discover(target)

    def _discover(self, target: str | None) -> _System:
        with self.connection.use(target) as session:
            path = target if target is not None else self._only_system(session)
            found = self._from_system(session, path, self._get_system(session, path))
        self._systems[target] = found
        return found

    def _from_system(self, session: Session, path: str, system: ComputerSystem) -> _System:
        """What one system's own payload (and its ActionInfo, if it points at one) allows."""
        action = system.actions.reset
        reset_target = action.target if action is not None else None
        if self.config.reset_types is not None:
            return self._declared(path, reset_target)
        return self._discovered(session, path, action, reset_target)

    def _expand_query(self, service: Mapping[str, Any]) -> str | None:
        """The ``$expand`` query that inlines a collection's members, where the service
        root's ``ProtocolFeaturesSupported.ExpandQuery`` says it takes one: ``.`` (NoLinks:
        the hyperlinks outside ``Links``, which a collection's ``Members`` are), else ``*``
        (ExpandAll); one level, with ``$levels`` only where Levels is supported (one level
        is the default). None: no expansion is advertised (``~``, Links only, inlines
        nothing a collection's members need)."""
        features = service.get("ProtocolFeaturesSupported")
        expand = features.get("ExpandQuery") if isinstance(features, Mapping) else None
        if not isinstance(expand, Mapping):
            return None
        if expand.get("NoLinks") is True:
            option = "."
        elif expand.get("ExpandAll") is True:
            option = "*"
        else:
            return None
        return f"$expand={option}($levels=1)" if expand.get("Levels") is True else (
            f"$expand={option}")

    def _expanded_members(self) -> dict[str, dict[str, Any]]:
        """System path -> its own payload, inlined in one GET of the Systems collection;
        empty when the service advertises no expansion or the GET fails. Only members that
        came back as a ComputerSystem naming their own path count (a member left as a
        link is read on its own)."""
        try:
            # the service root is open to all: reading it proves no credentials
            with self.connection.use(None, proves=False) as session:
                service = session.service_root()
                query = self._expand_query(service)
                systems = service.get("Systems")
                path = systems.get("@odata.id") if isinstance(systems, Mapping) else None
                if query is None or not isinstance(path, str):
                    return {}
                body = session.get_json(f"{path.rstrip('/')}?{query}")
        except ChannelError:
            return {}
        found: dict[str, dict[str, Any]] = {}
        for member in body.get("Members", []):
            if not isinstance(member, dict):
                continue
            odata_id, kind = member.get("@odata.id"), member.get("@odata.type")
            if (isinstance(odata_id, str) and isinstance(kind, str)
                    and "ComputerSystem" in kind and "Id" in member):
                found[odata_id.rstrip("/")] = member
        return found

    def _from_payload(self, target: str, body: Mapping[str, Any]) -> CapabilitySet:
        """Discovery of ``target`` from its own payload, inlined by ``$expand``; a payload
        that does not fit the model is read on its own instead."""
        try:
            system = parse(ComputerSystem, dict(body), target)
        except ValueError:
            return self.capabilities(target)
        with self.connection.use(target) as session:
            found = self._from_system(session, target, system)
        self._systems[target] = found
        return found.plan.caps

    def _only_system(self, session: Session) -> str:
        """The one system of the service (its Systems collection read through the root)."""
        systems = session.service_root().get("Systems")
        path = systems.get("@odata.id") if isinstance(systems, Mapping) else None
        if not isinstance(path, str):
            raise ValueError("the service root links no Systems collection")
        members = sorted(
            m["@odata.id"].rstrip("/")
            for m in session.get_json(path).get("Members", [])
            if isinstance(m, Mapping) and isinstance(m.get("@odata.id"), str)
        )
        if len(members) == 1:
            return str(members[0])
        if not members:
            raise ConfigError(f"channel {self.name!r}: the Redfish service has no systems")
        raise ConfigError(
            f"channel {self.name!r}: the Redfish service has {len(members)} systems, so each "
            f"node must name its target; systems: {', '.join(members)}"
        )

    def _plan(self, allowed: frozenset[ResetType], source: Source, where: str) -> Plan:
        return plan(allowed, self.config.shutdown, self.config.reboot, source=source, where=where)

    def _declared(self, path: str, reset_target: str | None) -> _System:
        declared = frozenset(self.config.reset_types or ())
        target = reset_target or f"{path}/Actions/ComputerSystem.Reset"
        return _System(path, target, self._plan(declared, Source.DECLARED, "declared in config"))

    def _get_system(self, session: Session, path: str) -> ComputerSystem:
        return self.connection.get_resource(session, path, ComputerSystem)

    def _discovered(
        self,
        session: Session,
        path: str,
        action: ResetAction | None,
        reset_target: str | None,
    ) -> _System:
        if action is None or reset_target is None:
            caps = CapabilitySet.empty(f"{path} has no {_RESET} action with a target")
            return _System(path, None, Plan(caps))
        values = action.allowable_values
        where = f"{path} {_ALLOWABLE}"
        if values is None and action.action_info is not None:
            info = self.connection.get_resource(session, action.action_info, ActionInfo)
            values = info.reset_types()
            where = f"ActionInfo {action.action_info}"
        if values is None:
            caps = CapabilitySet.empty(
                f"the service advertises no reset types for {path} (neither {_ALLOWABLE} "
                f"nor a ResetType in {_ACTION_INFO}); declare them with reset_types in config"
            )
            return _System(path, reset_target, Plan(caps))
        allowed = parse_reset_types(values)
        return _System(path, reset_target, self._plan(allowed, Source.DISCOVERED, where))

    def _reset(self, system: _System, reset: ResetType, target: str | None) -> None:
        if system.reset_target is None:
            raise ProtocolError(f"{system.path} has no reset action", channel=self.name,
                                target=target)
        self.connection.post_reset(target, system.reset_target, reset.value)

    def _power_state(self, system: _System, target: str | None) -> str | None:
        with self.connection.use(target) as session:
            return self._get_system(session, system.path).power_state

    def _await_off(self, system: _System, target: str | None) -> tuple[bool, str | None]:
        """Read ``PowerState`` until it is ``Off`` or ``shutdown_wait_s`` has passed."""
        deadline = time.monotonic() + self.config.shutdown_wait_s
        while True:
            state = self._power_state(system, target)
            if state == "Off":
                return True, state
            left = deadline - time.monotonic()
            if left <= 0:
                return False, state
            time.sleep(min(self.config.poll_interval_s, left))

    def _graceful_then_force(self, system: _System, target: str | None) -> tuple[bool, str]:
        """Send the plan's shutdown; force off once if it is graceful and did not finish.

        Returns whether the system read off in the end, and what a person should know.
        """
        first = system.plan.shutdown
        assert first is not None
        wait = self.config.shutdown_wait_s
        self._reset(system, first, target)
        try:
            off, state = self._await_off(system, target)
        except ChannelError as exc:
            raise self._after_sent(f"{first.value} was accepted", exc, target) from exc
        if off or first is not ResetType.GRACEFUL_SHUTDOWN:
            note = "" if off else f"{first.value} sent; not off within {wait:g} s"
            return off, note
        seen = f"PowerState {state}" if state else "no PowerState"
        if system.plan.force_off is None:
            return False, (
                f"the graceful shutdown did not finish within {wait:g} s ({seen}); "
                "the service does not accept ForceOff, so none was sent"
            )
        try:
            self._reset(system, system.plan.force_off, target)
        except ChannelError as exc:
            raise self._after_sent(
                f"{first.value} was accepted and did not finish within {wait:g} s ({seen})",
                exc, target) from exc
        return False, (
            f"the graceful shutdown did not finish within {wait:g} s ({seen}); ForceOff sent"
        )

    def _after_sent(self, what: str, exc: ChannelError, target: str | None) -> OutcomeUnknown:
        """The outcome of a call that failed after one of its resets was accepted."""
        if isinstance(exc, OutcomeUnknown):
            return exc
        return OutcomeUnknown(f"{what}; then: {exc.message}", channel=self.name,
                              target=target)

    # -- the channel protocol ----------------------------------------------------------------
    def capabilities(self, target: str | None) -> CapabilitySet:
        """Discover (again) what the BMC accepts for ``target`` and map it to verbs."""
        return self._discover(target).plan.caps

    def capabilities_batch(
        self, targets: Sequence[str | None]
    ) -> list[CapabilitySet | PowerplaneError]:
        """``capabilities`` for many systems of this service, one outcome per target.

        Where the service root's ``ProtocolFeaturesSupported.ExpandQuery`` advertises it,
        the Systems collection is read once with ``$expand`` and each system is judged from
        its own inlined payload (its ActionInfo, where it points at one, read as usual);
        a system the expansion did not inline, and every system of a service without
        expansion, is read on its own, at most :data:`DISCOVERY_CONCURRENCY` at once.
        """
        unique = list(dict.fromkeys(targets))
        named = [t for t in unique if t is not None]
        inlined = self._expanded_members() if len(named) > 1 else {}

        def one(target: str | None) -> CapabilitySet | PowerplaneError:
            try:
                body = inlined.get(target) if target is not None else None
                if body is not None and target is not None:
                    return self._from_payload(target, body)
                return self.capabilities(target)
            except PowerplaneError as exc:
                return exc

        if len(unique) > 1:
            with ThreadPoolExecutor(max_workers=min(DISCOVERY_CONCURRENCY, len(unique)),
                                    thread_name_prefix="redfish-discovery") as pool:
                outcomes = dict(zip(unique, pool.map(one, unique), strict=True))
        else:
            outcomes = {t: one(t) for t in unique}
        return [outcomes[t] for t in targets]

    def power_on(self, target: str | None) -> Acceptance:
        """``On`` (or ``ForceOn``): one POST once discovered."""
        system = self._system(target)
        require(system.plan.caps, Verb.POWER_ON, self.name)
        assert system.plan.power_on is not None
        self._reset(system, system.plan.power_on, target)
        return Acceptance()

    def shutdown(self, target: str | None) -> Acceptance:
        """``GracefulShutdown`` or ``ForceOff`` as configured; see ``graceful-then-force``."""
        system = self._system(target)
        require(system.plan.caps, Verb.SHUTDOWN, self.name)
        first = system.plan.shutdown
        assert first is not None
        if (
            self.config.shutdown is ShutdownMode.GRACEFUL_THEN_FORCE
            and first is ResetType.GRACEFUL_SHUTDOWN
        ):
            _, note = self._graceful_then_force(system, target)
            return Acceptance(note)
        self._reset(system, first, target)
        return Acceptance()

    def reboot(self, target: str | None) -> Acceptance:
        """``GracefulRestart``, ``ForceRestart``/``PowerCycle``, or shutdown-then-on."""
        system = self._system(target)
        require(system.plan.caps, Verb.REBOOT, self.name)
        if system.plan.reboot is not None:
            self._reset(system, system.plan.reboot, target)
            return Acceptance()
        # graceful-then-force: an observed shutdown (forced if it does not finish), then On.
        off, note = self._graceful_then_force(system, target)
        if not off:
            try:
                off, _ = self._await_off(system, target)
            except ChannelError as exc:
                raise self._after_sent(f"reboot: {note}", exc, target) from exc
        if not off:
            # the shutdown requests were accepted: the machine may be going off
            raise OutcomeUnknown(
                f"reboot: the system did not read off within {self.config.shutdown_wait_s:g} s"
                f" ({note}); On was not sent",
                channel=self.name,
                target=target,
            )
        assert system.plan.power_on is not None
        try:
            self._reset(system, system.plan.power_on, target)
        except ChannelError as exc:
            raise self._after_sent(f"reboot: the system read off ({note or 'shut down'})",
                                   exc, target) from exc
        return Acceptance(f"{note}; then {system.plan.power_on.value} sent" if note else "")

    def read_power_state(self, target: str | None) -> Reading:
        """``PowerState``: On -> on, Off -> off, anything else or absent -> unknown."""
        system = self._system(target)
        state = self._power_state(system, target)
        if state == "On":
            return Reading.on()
        if state == "Off":
            return Reading.off()
        if state is None:
            return Reading.unknown(f"{system.path} reports no PowerState")
        return Reading.unknown(f"PowerState is {state} (not settled)")

    def boot_marker(self, target: str | None) -> str | None:
        """A value that changes on every boot of the system, from the BMC's own properties.

        One GET of the ComputerSystem; what it holds is read by :func:`boot_marker_of`:
        ``"LastResetTime=<value>"`` where the system publishes ``LastResetTime``, else
        ``"BootProgress.LastStateTime=<value>"`` while ``BootProgress.LastState`` is
        ``OSRunning``, else None. A failed read raises the mapped error, never a marker.
        """
        system = self._system(target)
        with self.connection.use(target) as session:
            body = self._get_system(session, system.path)
        return boot_marker_of(body)

    def identity(self, target: str | None) -> dict[str, str]:
        """What the device says it is: the system's Manufacturer, Model, SerialNumber and
        BiosVersion, and its first manager's FirmwareVersion, where published (for the
        conformance report)."""
        system = self._system(target)
        with self.connection.use(target) as session:
            body = self._get_system(session, system.path)
            published = (("manufacturer", body.manufacturer), ("model", body.model),
                         ("serial", body.serial_number), ("bios", body.bios_version))
            out = {key: value for key, value in published if value}
            if body.links.managed_by:
                first = body.links.managed_by[0].odata_id
                manager = self.connection.get_resource(session, first, Manager)
                if manager.firmware_version is not None:
                    out["firmware"] = manager.firmware_version
        return out

    def close(self) -> None:
        """Log the Redfish session out and close the connection."""
        self.connection.close()


def boot_marker_of(system: ComputerSystem | Mapping[str, Any]) -> str | None:
    """The boot marker in a ComputerSystem body, named by the property it came from.

    - ``LastResetTime`` (ComputerSystem v1_12_0, Redfish 2020.2: "the date and time when
      the system last came out of a reset or was rebooted"), preferred:
      ``"LastResetTime=2021-03-13T04:02:57+06:00"``.
    - Else ``BootProgress.LastStateTime`` (v1_13_0, 2020.3: "when the last boot state was
      updated"), only while ``BootProgress.LastState`` is ``OSRunning``:
      ``"BootProgress.LastStateTime=..."``. That time moves at every boot stage, so during
      a boot (or with the system off) it cannot tell one boot from the next: None then.
    - None where the system publishes neither (older schemas, many BMCs, the sushy-tools
      emulator). A value is used as published, never parsed or made up.

    A marker from one property never equals one from the other, so a comparison that
    finds the source changed has not seen a boot, only a different property.
    Limit: the value is the BMC's. OpenBMC's bmcweb fills ``LastResetTime`` from the
    chassis power-state change time (a power off changes it too; a warm
    ``GracefulRestart`` or ``ForceRestart``, which leaves chassis power on, does not).
    """
    if not isinstance(system, ComputerSystem):
        system = parse(ComputerSystem, system, "the ComputerSystem body")
    if system.last_reset_time:
        return f"LastResetTime={system.last_reset_time}"
    progress = system.boot_progress
    if progress is not None and progress.last_state == "OSRunning" and progress.last_state_time:
        return f"BootProgress.LastStateTime={progress.last_state_time}"
    return None
