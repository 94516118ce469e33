"""The conformance section is validated with path-named errors."""

from __future__ import annotations

import pytest
from conformance_targets import sim_target

from powerplane.capabilities import Verb
from powerplane.errors import ConfigError
from powerplane_conformance.settings import load_target


def test_defaults_are_safe() -> None:
    data = sim_target()
    data["conformance"] = {"nodes": ["n-m1"]}
    target = load_target(data)
    assert target.settings.allow_destructive is False
    assert target.settings.allow_terminate is False
    assert target.settings.settle_timeout_s == 30
    assert target.nodes == ["n-m1"]


def test_verbs_parse_in_any_spelling() -> None:
    target = load_target(sim_target(conformance={
        "expected_capabilities": {"lab": ["POWER_ON", "reboot"]}}))
    assert target.settings.expected_capabilities["lab"] == [Verb.POWER_ON, Verb.REBOOT]


def test_every_problem_is_reported_with_its_path() -> None:
    with pytest.raises(ConfigError) as err:
        load_target(sim_target(conformance={"settle_timeout_s": 0, "repeat": 0,
                                             "allow_destructive": "sometimes"}))
    paths = {p.path for p in err.value.problems}
    assert paths == {"conformance.settle_timeout_s", "conformance.repeat",
                     "conformance.allow_destructive"}


def test_node_without_channel_is_refused() -> None:
    data = sim_target()
    data["nodes"]["bare"] = {}
    data["conformance"]["nodes"] = ["bare"]
    with pytest.raises(ConfigError) as err:
        load_target(data)
    assert [p.path for p in err.value.problems] == ["conformance.nodes[0]"]
