"""The assertions of the suite: each an id and one sentence a person can read.

Every check of :class:`~powerplane_conformance.suite.ConformanceSuite` proves exactly
one assertion; its id is what a report, a JUnit property and an ``xfail`` entry name.
"""

from __future__ import annotations

from dataclasses import dataclass

from powerplane import Verb

__all__ = ["ASSERTIONS", "Assertion", "assertion_id"]

_VERB_IDS = {Verb.REBOOT: "REBOOT", Verb.SHUTDOWN: "SHUTDOWN", Verb.POWER_ON: "POWER_ON",
             Verb.TERMINATE: "TERMINATE"}
_ENDS = {Verb.REBOOT: "on", Verb.SHUTDOWN: "off", Verb.POWER_ON: "on", Verb.TERMINATE: "off"}


@dataclass(frozen=True)
class Assertion:
    """One thing a conformant channel shall do."""

    id: str
    """Upper-case id: ``POWER_ON_READBACK``."""
    text: str
    """The rule in one sentence: "A channel that advertises power-on shall ..."."""


def assertion_id(template: str, verb: Verb | None) -> str:
    """``{VERB}_READBACK`` with power-on -> ``POWER_ON_READBACK``."""
    return template.replace("{VERB}", _VERB_IDS[verb]) if verb is not None else template


def _catalogue() -> dict[str, Assertion]:
    items: list[Assertion] = [
        Assertion("CAPABILITIES_DISCOVERED",
                  "A channel shall answer capabilities(target) with a capability set."),
        Assertion("CAPABILITIES_EXPECTED",
                  "The discovered verbs shall equal the target file's expected_capabilities."),
        Assertion("CONFIG_REJECTS_MALFORMED",
                  "The channel type's config model shall reject a malformed config with "
                  "errors that name the path of the bad key."),
        Assertion("READBACK_ANSWERS",
                  "A channel shall answer read_power_state(target) with a reading."),
        Assertion("BLIND_NEVER_OFF",
                  "A channel that declares it cannot see power off shall never read off."),
        Assertion("POWER_ON_IDEMPOTENT",
                  "Power-on of a machine that is on shall be accepted and leave it on."),
        Assertion("SHUTDOWN_IDEMPOTENT",
                  "Shutdown of a machine that is off shall be harmless: accepted (or, for a "
                  "channel that cannot see off, unreachable) and the machine stays off."),
        Assertion("READBACK_NOT_STALE",
                  "After a shutdown a channel shall not go on reading on while a fresh "
                  "session to the same device reads the change."),
        Assertion("UNADVERTISED_REFUSED",
                  "A verb the channel does not advertise shall fail with NotSupported before "
                  "any I/O, never be accepted."),
        Assertion("UNKNOWN_TARGET_ERROR",
                  "A call for a target the device does not have shall fail with a clear "
                  "powerplane error."),
        Assertion("WRONG_CREDENTIALS_REJECTED",
                  "A channel given wrong credentials shall fail with AuthenticationFailed."),
        Assertion("SECRET_NOT_DISCLOSED",
                  "No secret shall appear in any error message, log line, report or argv."),
        Assertion("CLOSED_PORT_UNREACHABLE",
                  "A channel pointed at a closed port shall fail with Unreachable within its "
                  "connect timeout."),
        Assertion("SILENT_SERVER_TIMEOUT",
                  "A channel pointed at a server that accepts and never answers shall fail "
                  "with ChannelTimeout within its bound."),
        Assertion("STATE_RESTORED",
                  "After the suite, every machine shall read the power state it had before."),
    ]
    for verb in (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON, Verb.TERMINATE):
        name, end = verb.value, _ENDS[verb]
        title = name[0].upper() + name[1:]
        items.append(Assertion(
            assertion_id("{VERB}_READBACK", verb),
            f"A channel that advertises {name} shall accept it and, where it can see, read "
            f"{end} within settle_timeout_s (transitional states are not done).",
        ))
        if verb is Verb.TERMINATE:
            continue
        items.append(Assertion(
            assertion_id("{VERB}_REPEATED", verb),
            f"{title} repeated `repeat` times shall be accepted and read {end} every time.",
        ))
        items.append(Assertion(
            assertion_id("{VERB}_CONCURRENT", verb),
            f"{title} sent concurrently to distinct targets of one channel shall be accepted "
            f"for each and read {end} for each.",
        ))
    return {a.id: a for a in items}


ASSERTIONS: dict[str, Assertion] = _catalogue()
"""Every assertion by id."""
