"""The gating policy on its own: a pure function of the check's declaration, the
channel's claims and the target file (no session, no pytest machinery)."""

from __future__ import annotations

from typing import Any

from powerplane.capabilities import CapabilitySet, Verb
from powerplane_conformance.checks import CheckSpec
from powerplane_conformance.gate import Gate, gate

CAPS = CapabilitySet.of(hard=[Verb.REBOOT, Verb.SHUTDOWN])


def decide(spec: CheckSpec, verb: Verb | None, ident: str = "X", **kw: Any) -> Gate | None:
    args: dict[str, Any] = {"channel": "lab", "node": "n1", "caps": CAPS, "terminated": False,
                            "allow_destructive": True, "allow_terminate": False}
    args.update(kw)
    return gate(spec, verb, ident, **args)


def test_an_advertised_verb_runs() -> None:
    assert decide(CheckSpec("{VERB}_READBACK", verbs=(Verb.REBOOT,), destructive=True),
                  Verb.REBOOT) is None


def test_a_verb_not_advertised_is_a_skip() -> None:
    got = decide(CheckSpec("{VERB}_READBACK", verbs=(Verb.POWER_ON,)), Verb.POWER_ON)
    assert got == Gate("skip", "channel lab does not advertise power-on")


def test_the_refusal_check_skips_an_advertised_verb_and_runs_an_absent_one() -> None:
    spec = CheckSpec("UNADVERTISED_REFUSED", verbs=tuple(Verb), absent=True, destructive=True)
    skipped = decide(spec, Verb.REBOOT)
    assert skipped is not None and skipped.outcome == "skip"
    assert "applies only to verbs it does not advertise" in skipped.reason
    assert decide(spec, Verb.POWER_ON) is None


def test_failed_discovery_is_not_tested_except_for_the_discovery_check() -> None:
    spec = CheckSpec("READBACK_ANSWERS", common=True)
    got = decide(spec, None, "READBACK_ANSWERS", caps="Unreachable: refused")
    assert got == Gate("not_tested", "discovery failed on channel 'lab': Unreachable: refused")
    assert decide(CheckSpec("CAPABILITIES_DISCOVERED", common=True), None,
                  "CAPABILITIES_DISCOVERED", caps="Unreachable: refused") is None


def test_a_terminated_node_is_not_tested() -> None:
    got = decide(CheckSpec("READBACK_ANSWERS", common=True), None, terminated=True)
    assert got == Gate("not_tested", "n1 was terminated by an earlier check")


def test_destructive_checks_wait_for_allow_destructive() -> None:
    spec = CheckSpec("{VERB}_READBACK", verbs=(Verb.REBOOT,), destructive=True)
    assert decide(spec, Verb.REBOOT, allow_destructive=False) == Gate(
        "not_tested", "allow_destructive is off in the target file")
    # the channel's claims come first: a verb it does not advertise is a SKIP either way
    got = decide(CheckSpec("{VERB}_READBACK", verbs=(Verb.POWER_ON,), destructive=True),
                 Verb.POWER_ON, allow_destructive=False)
    assert got is not None and got.outcome == "skip"


def test_terminate_needs_allow_terminate_but_its_refusal_does_not() -> None:
    caps = CapabilitySet.of(hard=[Verb.TERMINATE])
    spec = CheckSpec("{VERB}_READBACK", verbs=(Verb.TERMINATE,), destructive=True)
    got = decide(spec, Verb.TERMINATE, caps=caps)
    assert got is not None and got.outcome == "not_tested" and "allow_terminate" in got.reason
    assert decide(spec, Verb.TERMINATE, caps=caps, allow_terminate=True) is None
    refusal = CheckSpec("UNADVERTISED_REFUSED", verbs=tuple(Verb), absent=True)
    assert decide(refusal, Verb.TERMINATE) is None


def test_a_per_channel_check_is_gated_by_the_target_file_only() -> None:
    spec = CheckSpec("{VERB}_CONCURRENT", verbs=(Verb.POWER_ON,), destructive=True,
                     per_channel=True)
    assert decide(spec, Verb.POWER_ON, caps=None, node=None) is None
    assert decide(spec, Verb.POWER_ON, caps=None, node=None, allow_destructive=False) == Gate(
        "not_tested", "allow_destructive is off in the target file")
