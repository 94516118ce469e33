from __future__ import annotations

import dataclasses

import pytest

from powerplane import CapabilitySet, Source, Verb


def test_verb_parse_accepts_every_spelling() -> None:
    assert Verb.parse("power-on") is Verb.POWER_ON
    assert Verb.parse("POWER_ON") is Verb.POWER_ON
    assert Verb.parse(" reboot ") is Verb.REBOOT
    assert Verb.POWER_ON.method == "power_on"


def test_verb_parse_rejects_unknown_with_valid_values() -> None:
    with pytest.raises(ValueError, match="expected one of: reboot, shutdown, power-on, terminate"):
        Verb.parse("hibernate")


def test_capability_set_is_immutable() -> None:
    caps = CapabilitySet.of([Verb.REBOOT], [Verb.SHUTDOWN])
    with pytest.raises(TypeError):
        caps.verbs[Verb.POWER_ON] = True  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.detail = "x"  # type: ignore[misc]


def test_capability_set_marks_graceful_and_hard() -> None:
    caps = CapabilitySet.of(graceful=[Verb.SHUTDOWN], hard=[Verb.REBOOT, Verb.POWER_ON])
    assert caps.is_graceful(Verb.SHUTDOWN)
    assert not caps.is_graceful(Verb.REBOOT)
    assert caps.advertises(Verb.POWER_ON)
    assert not caps.advertises(Verb.TERMINATE)
    assert not caps.is_graceful(Verb.TERMINATE)
    assert caps.as_dict() == {"reboot": "hard", "shutdown": "graceful", "power-on": "hard"}
    assert list(caps) == [Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON]


def test_capability_sets_compare_and_hash_by_value() -> None:
    a = CapabilitySet.of([Verb.REBOOT], source=Source.DECLARED, detail="d")
    b = CapabilitySet.of([Verb.REBOOT], source=Source.DECLARED, detail="d")
    c = CapabilitySet.of([Verb.REBOOT], source=Source.DISCOVERED, detail="d")
    assert a == b and hash(a) == hash(b)
    assert a != c


def test_empty_set_says_why() -> None:
    caps = CapabilitySet.empty("service advertises no reset types")
    assert len(caps) == 0
    assert caps.detail == "service advertises no reset types"
