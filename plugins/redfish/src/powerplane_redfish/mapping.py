"""From the reset types a service accepts to the verbs a channel advertises, and back.

The mapping (never sushy's fallback, which assumes every reset type when the service
says nothing):

- power-on from ``On`` or ``ForceOn``;
- shutdown from ``GracefulShutdown`` (graceful) or ``ForceOff`` (hard);
- reboot from ``GracefulRestart`` (graceful), ``ForceRestart`` or ``PowerCycle`` (hard).

The configured mode of each verb decides which of those the channel will send, so the
set advertises exactly what the channel does: with ``shutdown: force`` a service that
accepts only ``GracefulShutdown`` gets no shutdown advertised, and a ``force`` shutdown
is advertised hard even where the service could also shut down gracefully.

Every verb the plan does not advertise gets its own reason in the capability set's
``withheld``: which reset type is missing, what the service allows instead, and the config
setting that would carry the verb ("GracefulRestart is not allowed by this BMC; it allows
ForceRestart, PowerCycle: set reboot: force").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from powerplane import CapabilitySet, Source, Verb
from powerplane_redfish.config import RebootMode, ResetType, ShutdownMode

__all__ = ["Plan", "parse_reset_types", "plan"]

_ON = (ResetType.ON, ResetType.FORCE_ON)
_HARD_RESTART = (ResetType.FORCE_RESTART, ResetType.POWER_CYCLE)
_ORDER = tuple(ResetType)


@dataclass(frozen=True)
class Plan:
    """What the channel sends for each verb on one system, and the capability set it implies."""

    caps: CapabilitySet
    power_on: ResetType | None = None
    """The reset type for power-on."""
    shutdown: ResetType | None = None
    """The first reset type for shutdown (``GracefulShutdown`` or ``ForceOff``)."""
    force_off: ResetType | None = None
    """``ForceOff`` where the service accepts it (the fallback of graceful-then-force)."""
    reboot: ResetType | None = None
    """The reset type for reboot; None in ``graceful-then-force`` (shutdown, then on)."""


def _first(allowed: frozenset[ResetType], choices: Iterable[ResetType]) -> ResetType | None:
    return next((c for c in choices if c in allowed), None)


def plan(
    allowed: Iterable[ResetType],
    shutdown: ShutdownMode,
    reboot: RebootMode,
    *,
    source: Source,
    where: str,
) -> Plan:
    """The plan for a system whose service accepts ``allowed`` (``where`` says how we know)."""
    ok = frozenset(allowed)
    graceful: list[Verb] = []
    hard: list[Verb] = []
    notes: list[str] = []

    power_on = _first(ok, _ON)
    if power_on is not None:
        hard.append(Verb.POWER_ON)
    else:
        notes.append("power-on: neither On nor ForceOn accepted")

    force_off = ResetType.FORCE_OFF if ResetType.FORCE_OFF in ok else None
    has_graceful_off = ResetType.GRACEFUL_SHUTDOWN in ok
    first_off: ResetType | None = None
    if shutdown is ShutdownMode.FORCE:
        first_off = force_off
        if force_off is None:
            notes.append("shutdown: mode force but ForceOff not accepted")
    elif has_graceful_off:
        first_off = ResetType.GRACEFUL_SHUTDOWN
    elif shutdown is ShutdownMode.GRACEFUL_THEN_FORCE and force_off is not None:
        first_off = force_off
        notes.append("shutdown: GracefulShutdown not accepted, ForceOff only")
    else:
        notes.append(f"shutdown: mode {shutdown.value} but GracefulShutdown not accepted")
    if (
        shutdown is ShutdownMode.GRACEFUL_THEN_FORCE
        and first_off is ResetType.GRACEFUL_SHUTDOWN
        and force_off is None
    ):
        notes.append("shutdown: ForceOff not accepted, so no forced fallback")
    if first_off is ResetType.GRACEFUL_SHUTDOWN:
        graceful.append(Verb.SHUTDOWN)
    elif first_off is not None:
        hard.append(Verb.SHUTDOWN)

    reboot_type: ResetType | None = None
    if reboot is RebootMode.GRACEFUL:
        if ResetType.GRACEFUL_RESTART in ok:
            reboot_type = ResetType.GRACEFUL_RESTART
            graceful.append(Verb.REBOOT)
        else:
            notes.append("reboot: mode graceful but GracefulRestart not accepted")
    elif reboot is RebootMode.FORCE:
        reboot_type = _first(ok, _HARD_RESTART)
        if reboot_type is not None:
            hard.append(Verb.REBOOT)
        else:
            notes.append("reboot: mode force but neither ForceRestart nor PowerCycle accepted")
    elif first_off is not None and power_on is not None:
        (graceful if first_off is ResetType.GRACEFUL_SHUTDOWN else hard).append(Verb.REBOOT)
    else:
        notes.append("reboot: mode graceful-then-force needs a shutdown and a power-on")

    accepted = ", ".join(sorted(t.value for t in ok)) or "none"
    detail = f"{where}: {accepted}"
    if notes:
        detail += f" ({'; '.join(notes)})"
    withheld = _withheld(
        ok, shutdown, reboot, source=source, advertised=frozenset(graceful + hard),
        shutdown_then_on=first_off is not None and power_on is not None,
    )
    caps = CapabilitySet.of(graceful, hard, source=source, detail=detail, withheld=withheld)
    return Plan(caps, power_on, first_off, force_off, reboot_type)


def _names(types: Iterable[ResetType]) -> str:
    return ", ".join(t.value for t in types)


def _shutdown_then_on_fix(
    ok: frozenset[ResetType], shutdown: ShutdownMode, shutdown_then_on: bool
) -> str | None:
    """The setting that makes reboot a shutdown then On, where the service allows that."""
    if shutdown_then_on:
        return "set reboot: graceful-then-force (an observed shutdown, then On)"
    if _first(ok, _ON) is None:
        return None
    if ResetType.GRACEFUL_SHUTDOWN in ok:
        return "set shutdown: graceful and reboot: graceful-then-force"
    if ResetType.FORCE_OFF in ok and shutdown is not ShutdownMode.FORCE:
        return "set shutdown: force and reboot: graceful-then-force (a power cut, then On)"
    return None


def _withheld(
    ok: frozenset[ResetType],
    shutdown: ShutdownMode,
    reboot: RebootMode,
    *,
    source: Source,
    advertised: frozenset[Verb],
    shutdown_then_on: bool,
) -> dict[Verb, str]:
    """Per verb the plan cannot carry: what is missing, what is allowed instead, the fix."""
    declared = source is Source.DECLARED
    by = "in the declared reset_types" if declared else "allowed by this BMC"
    allows = "they list" if declared else "it allows"
    allowed = [t for t in _ORDER if t in ok]
    everything = _names(allowed) or "no reset type"
    out: dict[Verb, str] = {}

    if Verb.POWER_ON not in advertised:
        out[Verb.POWER_ON] = (
            f"neither On nor ForceOn is {by} ({allows} {everything})"
        )

    if Verb.SHUTDOWN not in advertised:
        if shutdown is ShutdownMode.FORCE:
            text = f"ForceOff is not {by}"
            text += (f"; {allows} GracefulShutdown: set shutdown: graceful"
                     if ResetType.GRACEFUL_SHUTDOWN in ok else f" ({allows} {everything})")
        elif shutdown is ShutdownMode.GRACEFUL:
            text = f"GracefulShutdown is not {by}"
            text += (f"; {allows} ForceOff: set shutdown: force (a power cut)"
                     if ResetType.FORCE_OFF in ok else f" ({allows} {everything})")
        else:
            text = (f"neither GracefulShutdown nor ForceOff is {by} "
                    f"({allows} {everything})")
        out[Verb.SHUTDOWN] = text

    if Verb.REBOOT not in advertised:
        hard = [t for t in _HARD_RESTART if t in ok]
        graceful_restart = ResetType.GRACEFUL_RESTART in ok
        fix = _shutdown_then_on_fix(ok, shutdown, shutdown_then_on)
        if reboot is RebootMode.GRACEFUL:
            text = f"GracefulRestart is not {by}"
            if hard:
                text += f"; {allows} {_names(hard)}: set reboot: force"
            elif fix is not None:
                text += f"; {allows} {everything}: {fix}"
            else:
                text += f" ({allows} {everything})"
        elif reboot is RebootMode.FORCE:
            text = f"neither ForceRestart nor PowerCycle is {by}"
            if graceful_restart:
                text += f"; {allows} GracefulRestart: set reboot: graceful"
            elif fix is not None:
                text += f"; {allows} {everything}: {fix}"
            else:
                text += f" ({allows} {everything})"
        else:
            why = "; ".join(out[v] for v in (Verb.SHUTDOWN, Verb.POWER_ON) if v in out)
            text = f"reboot: graceful-then-force is a shutdown, then On, and {why}"
            if graceful_restart:
                text += "; or set reboot: graceful"
            elif hard:
                text += "; or set reboot: force"
        out[Verb.REBOOT] = text
    return out


def parse_reset_types(values: Iterable[object]) -> frozenset[ResetType]:
    """The known reset types among ``values`` (unknown and OEM values are ignored)."""
    known = {t.value: t for t in ResetType}
    return frozenset(known[v] for v in values if isinstance(v, str) and v in known)
