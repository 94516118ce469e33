"""The suite, subclassed, passes against core's simulated channel in three shapes."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_targets import sim_target

from powerplane_conformance import ConformanceSuite


class TestSimulatedConformance(ConformanceSuite):
    """Full readback, every verb but terminate, two machines (one on, one off)."""

    conformance_subjects = ["n-m1", "n-m2"]

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls) -> dict[str, Any]:
        return sim_target(conformance={
            "expected_capabilities": {"lab": ["reboot", "shutdown", "power-on"]},
        })


class TestBlindSimulatedConformance(ConformanceSuite):
    """A channel that cannot see power off (readback on-only), with transitions."""

    conformance_subjects = ["n-m1", "n-m2"]

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls) -> dict[str, Any]:
        return sim_target({"readback": "on-only", "transition_ms": 30})


class TestHardRebootOnlyConformance(ConformanceSuite):
    """A channel that advertises only a hard reboot: the rest is skipped or refused."""

    conformance_subjects = ["n-m1"]

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls) -> dict[str, Any]:
        return sim_target({"verbs": ["reboot"], "graceful": False}, machines={"m1": "on"})
