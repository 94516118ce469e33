"""The ``pdu`` channel: a machine's outlets, on one PDU or several feeds, switched as one.

Verbs are hard, always: a PDU cuts and restores power; it cannot ask an operating system
to shut down, and it sees the outlet, not the machine.

* shutdown = every outlet off; power-on = every outlet on;
* reboot = every outlet off, ``reboot_delay_s``, every outlet that went off on again;
* power-on when every outlet already reads on cannot boot a machine that shut itself
  down: ``on_when_already_on: refuse`` (the default) refuses and says why, ``cycle``
  power-cycles instead.

Every switch is read back: after the write, the channel polls the same outlets (every
0.2 s, up to the feed's ``settle_s``) until each reads the state it was switched to. An
outlet that does not is not reported switched: its outcome is
:class:`~powerplane.OutcomeUnknown` naming the outlet and what it reads (the write left;
a PDU that sequences outlets may still apply it).

A partial failure is never success: the verb raises a :class:`~powerplane.ChannelError`
(of the first failing outlet's class) whose message names every outlet with its outcome,
and whose ``outcomes`` maps each outlet label to it.

Readback is honest: every outlet off -> off; outlets energized -> on only where the
outlets are metered and one draws above the standby threshold, else unknown ("outlet
energized; machine not visible"); mixed or unreadable -> unknown naming the outlets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelError,
    ConfigError,
    OutcomeUnknown,
    PowerplaneError,
    Reading,
    RefusedByDevice,
    Source,
    Verb,
    require,
)
from powerplane_pdu.config import PduChannelConfig, PduSpec
from powerplane_pdu.outlets import (
    MAIN,
    OutletId,
    OutletReading,
    OutletRef,
    OutletTarget,
    PduDriver,
)
from powerplane_pdu.profiles import OutletState
from powerplane_pdu.redfish import RedfishPdu
from powerplane_pdu.snmp import SnmpPdu

__all__ = ["ENERGIZED_NOT_VISIBLE", "PduChannel", "make_driver"]

ENERGIZED_NOT_VISIBLE = "outlet energized; machine not visible"

POLL_S = 0.2
"""Interval between readbacks of a switched outlet."""

CAPABILITIES = CapabilitySet.of(
    hard=[Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON],
    source=Source.INTRINSIC,
    detail="switched PDU outlets: power cut and restore only (hard)",
    sees_power_off=True,
)


def make_driver(channel: str, feed_label: str, spec: PduSpec) -> PduDriver:
    """The driver for one PDU spec."""
    if spec.protocol == "snmp":
        return SnmpPdu(channel, feed_label, spec)
    return RedfishPdu(channel, feed_label, spec)


Outcome = PowerplaneError | str


class PduChannel:
    """A ``pdu`` channel: its own PDU plus any feeds, each with one driver."""

    def __init__(self, name: str, config: PduChannelConfig) -> None:
        self.name = name
        self.config = config
        # the main PDU's own keys, as values (not dumped): each secret reference keeps the
        # kind it was validated with, a plugin's kind included
        main = PduSpec.model_validate({key: getattr(config, key) for key in PduSpec.model_fields})
        self.drivers: dict[str, PduDriver] = {MAIN: make_driver(name, name, main)}
        for feed, spec in config.feeds.items():
            self.drivers[feed] = make_driver(name, f"{name}.{feed}", spec)

    # -- plumbing ------------------------------------------------------------------------
    def _check_feeds(self, target: OutletTarget) -> None:
        unknown = sorted({r.feed for r in target.outlets} - set(self.drivers))
        if unknown:
            raise ConfigError(
                f"channel {self.name!r}: target names feed(s) {', '.join(unknown)} "
                f"not declared under 'feeds'"
            )

    def endpoint(self, target: OutletTarget) -> str:
        """The PDU(s) a call on ``target`` reaches (bounded per endpoint by the host)."""
        feeds = dict.fromkeys(r.feed for r in target.outlets)
        return "+".join(self.drivers[f].endpoint for f in feeds if f in self.drivers)

    def requests(self) -> int:
        """Requests sent to every PDU of this channel so far."""
        return sum(d.requests for d in self.drivers.values())

    def _label(self, ref: OutletRef) -> str:
        return ref.label(self.name)

    async def _switch(
        self, refs: Sequence[OutletRef], on: bool
    ) -> dict[OutletRef, PowerplaneError | None]:
        """Write every outlet, then read each written one back until it reads the new state."""
        groups: dict[str, list[OutletRef]] = {}
        for ref in refs:
            groups.setdefault(ref.feed, []).append(ref)

        async def feed(name: str, members: list[OutletRef]) -> dict[OutletRef, Any]:
            driver = self.drivers[name]
            got = await driver.switch([r.outlet for r in members], on)
            outcomes = {r: got.get(r.outlet) for r in members}
            written = [r for r in members if outcomes[r] is None]
            if written:
                outcomes.update(await self._confirm(driver, written, on))
            return outcomes

        parts = await asyncio.gather(*(feed(n, m) for n, m in groups.items()))
        merged: dict[OutletRef, PowerplaneError | None] = {}
        for part in parts:
            merged.update(part)
        return merged

    async def _confirm(
        self, driver: PduDriver, refs: list[OutletRef], on: bool
    ) -> dict[OutletRef, PowerplaneError | None]:
        """Poll ``refs`` until each reads ``on``/off or ``settle_s`` passed; per outlet None
        (seen switched) or :class:`OutcomeUnknown` naming what it reads."""
        want = OutletState.ON if on else OutletState.OFF
        loop = asyncio.get_running_loop()
        deadline = loop.time() + driver.settle_s
        last: dict[OutletRef, Any] = {}
        pending = list(refs)
        while True:
            got = await _read_states(driver, [r.outlet for r in pending])
            for ref in pending:
                last[ref] = got.get(ref.outlet)
            pending = [
                r for r in pending
                if not (isinstance(last[r], OutletReading) and last[r].state is want)
            ]
            left = deadline - loop.time()
            if not pending or left <= 0:
                break
            await asyncio.sleep(min(POLL_S, left))
        result: dict[OutletRef, PowerplaneError | None] = dict.fromkeys(refs)
        for ref in pending:
            value = last.get(ref)
            if isinstance(value, OutletReading):
                seen = f"reads {value.detail or value.state.value}"
            elif isinstance(value, PowerplaneError):
                seen = f"could not be read back ({_bare(value)})"
            else:
                seen = "could not be read back"
            result[ref] = OutcomeUnknown(
                f"{self._label(ref)} was switched {want.value} but {seen} "
                f"{driver.settle_s:g} s later",
                channel=self.name,
            )
        return result

    async def _read(
        self, refs: Sequence[OutletRef], *, state_only: bool = False
    ) -> dict[OutletRef, Any]:
        """Read ``refs``, one request per PDU (per ``max_varbinds``); ``state_only``: no
        load where the driver can leave it out (a power-on's check needs the state only)."""
        groups: dict[str, list[OutletRef]] = {}
        for ref in refs:
            groups.setdefault(ref.feed, []).append(ref)

        async def feed(name: str, members: list[OutletRef]) -> dict[OutletRef, Any]:
            driver = self.drivers[name]
            outlets = [r.outlet for r in members]
            got = await (_read_states(driver, outlets) if state_only else driver.read(outlets))
            return {r: got.get(r.outlet) for r in members}

        parts = await asyncio.gather(*(feed(n, m) for n, m in groups.items()))
        merged: dict[OutletRef, OutletReading | PowerplaneError] = {}
        for part in parts:
            merged.update(part)
        return merged

    def _conclude(
        self, verb: Verb, target: OutletTarget, outcomes: dict[OutletRef, Outcome]
    ) -> Acceptance:
        """Acceptance when every outlet succeeded, else the per-outlet error."""
        failed = [(r, o) for r, o in outcomes.items() if isinstance(o, PowerplaneError)]
        lines = [
            f"{self._label(r)}: "
            + (f"FAILED ({type(o).__name__}: {_bare(o)})" if isinstance(o, PowerplaneError) else o)
            for r, o in outcomes.items()
        ]
        if not failed:
            return Acceptance("; ".join(lines))
        unknown = [o for _, o in failed if isinstance(o, OutcomeUnknown)]
        first = unknown[0] if unknown else failed[0][1]
        # a write that may have been applied outranks any other failure
        cls = type(first) if isinstance(first, ChannelError) else ChannelError
        message = (
            f"{verb.value} failed on {len(failed)} of {len(outcomes)} outlet(s): "
            + "; ".join(lines)
        )
        error = cls(message, channel=self.name, target=str(target))
        error.outcomes = {  # type: ignore[attr-defined]
            self._label(r): (o if isinstance(o, str) else f"failed: {_bare(o)}")
            for r, o in outcomes.items()
        }
        raise error from first

    # -- the channel protocol --------------------------------------------------------------
    async def capabilities(self, target: OutletTarget) -> CapabilitySet:
        """Hard reboot, shutdown and power-on, once at least one outlet answers a read."""
        self._check_feeds(target)
        readings = await self._read(target.outlets)
        errors = [r for r in readings.values() if isinstance(r, PowerplaneError)]
        if errors and len(errors) == len(readings):
            raise errors[0]
        if errors:
            silent = ", ".join(
                self._label(r) for r, v in readings.items() if isinstance(v, PowerplaneError)
            )
            return CapabilitySet.of(
                hard=CAPABILITIES.verbs,
                source=Source.INTRINSIC,
                detail=f"{CAPABILITIES.detail}; not answering now: {silent}",
            )
        return CAPABILITIES

    async def shutdown(self, target: OutletTarget) -> Acceptance:
        """Every outlet off."""
        require(CAPABILITIES, Verb.SHUTDOWN, self.name)
        self._check_feeds(target)
        got = await self._switch(target.outlets, on=False)
        return self._conclude(
            Verb.SHUTDOWN, target, {r: got[r] or "switched off" for r in target.outlets}
        )

    async def power_on(self, target: OutletTarget) -> Acceptance:
        """Every outlet on; if every outlet is already on, refuse or cycle per config."""
        require(CAPABILITIES, Verb.POWER_ON, self.name)
        self._check_feeds(target)
        readings = await self._read(target.outlets, state_only=True)
        if self._all_on(target, readings):
            if self.config.on_when_already_on == "cycle":
                return await self._cycle(Verb.POWER_ON, target, "already on; ")
            raise self._already_on(target)
        # an outlet that could not be read (no such outlet, PDU silent) is not written
        readable = [r for r in target.outlets if isinstance(readings.get(r), OutletReading)]
        got = await self._switch(readable, on=True) if readable else {}
        return self._conclude(Verb.POWER_ON, target, self._switched_on(target, readings, got))

    def _all_on(self, target: OutletTarget, readings: dict[OutletRef, Any]) -> bool:
        return all(
            isinstance(readings.get(r), OutletReading) and readings[r].state is OutletState.ON
            for r in target.outlets
        )

    def _already_on(self, target: OutletTarget) -> RefusedByDevice:
        return RefusedByDevice(
            "every outlet is already on: switching on again cannot boot a machine that "
            "shut itself down (that needs restore-on-AC in its firmware); power-on "
            "refused (set on_when_already_on: cycle to power-cycle instead, or reboot)",
            channel=self.name,
            target=str(target),
        )

    def _switched_on(
        self, target: OutletTarget, readings: dict[OutletRef, Any],
        got: dict[OutletRef, PowerplaneError | None],
    ) -> dict[OutletRef, Outcome]:
        """Per outlet of ``target``: what reading it before and switching it on came to."""
        outcomes: dict[OutletRef, Outcome] = {}
        for ref in target.outlets:
            before = readings.get(ref)
            if not isinstance(before, OutletReading):
                error = before if isinstance(before, PowerplaneError) else None
                outcomes[ref] = (
                    _prefixed(error, "not switched on: reading it failed: ")
                    if error is not None
                    else "not read"
                )
                continue
            was_on = before.state is OutletState.ON
            outcomes[ref] = got[ref] or ("already on; switched on" if was_on else "switched on")
        return outcomes

    async def reboot(self, target: OutletTarget) -> Acceptance:
        """Every outlet off, the configured delay, then on again."""
        require(CAPABILITIES, Verb.REBOOT, self.name)
        self._check_feeds(target)
        return await self._cycle(Verb.REBOOT, target, "")

    async def _cycle(self, verb: Verb, target: OutletTarget, prefix: str) -> Acceptance:
        outcomes = await self._cycle_outlets(target.outlets, prefix)
        return self._conclude(verb, target, outcomes)

    async def _cycle_outlets(
        self, refs: Sequence[OutletRef], prefix: str = ""
    ) -> dict[OutletRef, Outcome]:
        """Off, the delay, then on for every outlet that went off; per outlet its outcome."""
        off = await self._switch(refs, on=False)
        went_off = [r for r in refs if off[r] is None]
        if went_off and self.config.reboot_delay_s:
            await asyncio.sleep(self.config.reboot_delay_s)
        on = await self._switch(went_off, on=True) if went_off else {}
        outcomes: dict[OutletRef, Outcome] = {}
        for ref in refs:
            off_error, on_error = off[ref], on.get(ref)
            if off_error is not None:
                outcomes[ref] = _prefixed(off_error, "switching off failed, on not sent: ")
            elif on_error is not None:
                outcomes[ref] = _prefixed(on_error, "switched off, then switching on failed: ")
            else:
                outcomes[ref] = f"{prefix}switched off and on again"
        return outcomes

    async def read_power_state(self, target: OutletTarget) -> Reading:
        """Off when every outlet is off; on only where metered load shows it; else unknown.

        Raises the error when no outlet could be read at all.
        """
        self._check_feeds(target)
        readings = await self._read(target.outlets)
        return self._judge(readings)

    def _judge(self, readings: dict[OutletRef, Any]) -> Reading:
        errors = {r: v for r, v in readings.items() if isinstance(v, PowerplaneError)}
        if errors and len(errors) == len(readings):
            # nothing answered: the channel failed (it did not "read unknown")
            raise next(iter(errors.values()))
        if errors:
            listed = "; ".join(f"{self._label(r)}: {_bare(e)}" for r, e in errors.items())
            return Reading.unknown(f"outlet(s) not read: {listed}")
        states = {r: v.state for r, v in readings.items()}
        if all(s is OutletState.OFF for s in states.values()):
            return Reading.off("every outlet off")
        if any(s in (OutletState.TRANSITION, OutletState.UNKNOWN) for s in states.values()):
            odd = ", ".join(
                f"{self._label(r)} {readings[r].detail or s.value}"
                for r, s in states.items()
                if s not in (OutletState.ON, OutletState.OFF)
            )
            return Reading.unknown(f"outlet(s) not settled: {odd}")
        if any(s is OutletState.OFF for s in states.values()):
            on = ", ".join(self._label(r) for r, s in states.items() if s is OutletState.ON)
            off = ", ".join(self._label(r) for r, s in states.items() if s is OutletState.OFF)
            return Reading.unknown(f"outlets mixed: on {on}; off {off}")
        return self._energized(readings)

    def _energized(self, readings: dict[OutletRef, OutletReading]) -> Reading:
        metered = {r: v for r, v in readings.items() if v.load is not None}
        if not metered:
            return Reading.unknown(ENERGIZED_NOT_VISIBLE)
        loads = ", ".join(
            f"{self._label(r)} {v.load:g} {v.unit}" for r, v in metered.items()
        )
        for value in metered.values():
            assert value.load is not None
            limit = self.config.standby_watts if value.unit == "W" else self.config.standby_amps
            if value.load > limit:
                return Reading.on(f"outlet energized and drawing: {loads}")
        return Reading.unknown(
            f"{ENERGIZED_NOT_VISIBLE}: draw at or below standby "
            f"({self.config.standby_watts:g} W / {self.config.standby_amps:g} A): {loads}"
        )

    async def invoke_batch(
        self, verb: Verb, targets: Sequence[OutletTarget]
    ) -> list[Acceptance | PowerplaneError]:
        """One verb on many targets: each step is one request per PDU for all their outlets.

        Reboot switches every outlet off, waits the delay once, and switches on again;
        each target's outcome is judged from its own outlets only.
        """
        require(CAPABILITIES, verb, self.name)
        for target in targets:
            self._check_feeds(target)
        refs = [r for t in targets for r in t.outlets]
        unique = list(dict.fromkeys(refs))
        results: list[Acceptance | PowerplaneError] = []
        if verb is Verb.SHUTDOWN:
            got = await self._switch(unique, on=False)
            for t in targets:
                results.append(self._settle(verb, t, {
                    r: got[r] or "switched off" for r in t.outlets
                }))
            return results
        if verb is Verb.REBOOT:
            cycled = await self._cycle_outlets(unique)
            return [self._settle(verb, t, {r: cycled[r] for r in t.outlets}) for t in targets]
        return await self._power_on_batch(targets, unique)

    async def _power_on_batch(
        self, targets: Sequence[OutletTarget], unique: list[OutletRef]
    ) -> list[Acceptance | PowerplaneError]:
        """Power-on for many targets: every outlet read once, then one SET per PDU.

        Each target keeps its own already-on policy, judged from its own outlets: a target
        whose outlets all read on is refused (or, with ``on_when_already_on: cycle``,
        power-cycled with the other such targets); the rest are written together.
        """
        readings = await self._read(unique, state_only=True)
        cycle = self.config.on_when_already_on == "cycle"
        was_on = [self._all_on(t, readings) for t in targets]
        all_on = [t for t, on in zip(targets, was_on, strict=True) if on]
        switching = [t for t, on in zip(targets, was_on, strict=True) if not on]
        # an outlet that could not be read (no such outlet, PDU silent) is not written
        writes = list(dict.fromkeys(
            r for t in switching for r in t.outlets
            if isinstance(readings.get(r), OutletReading)
        ))
        got = await self._switch(writes, on=True) if writes else {}
        cycled: dict[OutletRef, Outcome] = {}
        if cycle and all_on:
            cycled = await self._cycle_outlets(
                list(dict.fromkeys(r for t in all_on for r in t.outlets)), "already on; ")
        results: list[Acceptance | PowerplaneError] = []
        for t, on in zip(targets, was_on, strict=True):
            if not on:
                results.append(self._settle(Verb.POWER_ON, t,
                                            self._switched_on(t, readings, got)))
            elif cycle:
                results.append(self._settle(Verb.POWER_ON, t, {r: cycled[r] for r in t.outlets}))
            else:
                results.append(self._already_on(t))
        return results

    def _settle(
        self, verb: Verb, target: OutletTarget, outcomes: dict[OutletRef, Outcome]
    ) -> Acceptance | PowerplaneError:
        try:
            return self._conclude(verb, target, outcomes)
        except PowerplaneError as exc:
            return exc

    async def close(self) -> None:
        """Close every PDU's driver."""
        for driver in self.drivers.values():
            await driver.close()


_UNKNOWN_HEAD = str(OutcomeUnknown())


async def _read_states(
    driver: PduDriver, outlets: list[OutletId]
) -> dict[OutletId, OutletReading | PowerplaneError]:
    """The outlets' states: without the load objects where the driver is SNMP."""
    if isinstance(driver, SnmpPdu):
        return await driver.read(outlets, state_only=True)
    return await driver.read(outlets)


def _bare(error: PowerplaneError) -> str:
    """The error's own words: for :class:`OutcomeUnknown`, without the fixed wording."""
    if not isinstance(error, ChannelError):
        return str(error)
    text = error.message
    if isinstance(error, OutcomeUnknown) and text.startswith(_UNKNOWN_HEAD + " ("):
        return text[len(_UNKNOWN_HEAD) + 2 : -1]
    return text


def _prefixed(error: PowerplaneError, prefix: str) -> PowerplaneError:
    if isinstance(error, ChannelError):
        return type(error)(prefix + _bare(error), channel=error.channel, target=error.target)
    return error
