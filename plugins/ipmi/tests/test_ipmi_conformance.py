"""The conformance suite against the ipmi plugin on both peers, default settings.

The network negatives the suite builds from a channel config key (closed port, silent
server) do not apply: an IPMI channel's address is each node's target, not a channel key,
and the suite's fakes are TCP. test_ipmi_sim.py proves both over UDP instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ipmi_support import need_ipmi_sim

from powerplane_conformance import ConformanceSuite
from powerplane_ipmi.peer import IpmiSim
from powerplane_ipmi.testing import PyghmiBmc

VERBS = ["reboot", "shutdown", "power-on"]


def target(peers: list[Any]) -> dict[str, Any]:
    return {
        "channels": {"bmc": {
            "type": "ipmi", "username": "oper",
            "password": {"file": str(peers[0].secret_file("oper"))}}},
        "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": p.address}]}
                  for i, p in enumerate(peers)},
        "limits": {"timeout_s": 30},
        "conformance": {
            "allow_destructive": True, "settle_timeout_s": 10, "repeat": 2,
            "expected_capabilities": {"bmc": {"reboot": "hard", "shutdown": "graceful",
                                              "power-on": "hard"}},
            # no negative: hints: the type declares its address (the target, host:port over
            # UDP), its secret fields and its timeouts
        },
    }


@pytest.mark.slow
class TestIpmiSimConformance(ConformanceSuite):
    """Every check against two ipmi_sim BMCs (one machine each)."""

    conformance_subjects = ("n0", "n1")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls, tmp_path_factory: pytest.TempPathFactory
                           ) -> Iterator[dict[str, Any]]:
        need_ipmi_sim()
        shared = {"oper": "pp-conf-" + tmp_path_factory.getbasetemp().name[-6:],
                  "usr": "pp-conf-u", "admin": "pp-conf-a"}
        base = Path(tmp_path_factory.mktemp("conf-sim"))
        sims = [IpmiSim(base / f"b{i}", passwords=shared) for i in (0, 1)]
        try:
            for s in sims:
                s.start()
            yield target(sims)
        finally:
            for s in sims:
                s.stop()


@pytest.mark.slow
class TestPyghmiSimulatorConformance(ConformanceSuite):
    """Every check against two of pyghmi's BMC simulators."""

    conformance_subjects = ("n0", "n1")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls, tmp_path_factory: pytest.TempPathFactory
                           ) -> Iterator[dict[str, Any]]:
        users = {"oper": ("pp-conf-pyghmi", 3), "usr": ("pp-conf-pyghmi-u", 2)}
        base = Path(tmp_path_factory.mktemp("conf-pyghmi"))
        bmcs = [PyghmiBmc(base / f"b{i}", users=users) for i in (0, 1)]
        try:
            for b in bmcs:
                b.start()
            yield target(bmcs)
        finally:
            for b in bmcs:
                b.stop()


def test_the_secret_and_unknown_target_checks_run_with_no_hint(tmp_path: Path) -> None:
    """The channel type derives a valid unknown target (the BMC's host, a free UDP port):
    SECRET_NOT_DISCLOSED and UNKNOWN_TARGET_ERROR pass by default, never NOT TESTED."""
    import json

    import yaml
    from ipmi_support import cli

    need_ipmi_sim()
    with IpmiSim(tmp_path / "b0") as sim:
        doc = target([sim])
        doc["conformance"] = {"allow_destructive": False}
        f = tmp_path / "t.yaml"
        f.write_text(yaml.safe_dump(doc))
        report = tmp_path / "r.json"
        out = cli("conformance", "--target", str(f), "--report", str(report))
        assert out.returncode == 0, out.stdout + out.stderr
        data = json.loads(report.read_text())
    text = json.dumps(data)
    for check in ("SECRET_NOT_DISCLOSED", "UNKNOWN_TARGET_ERROR"):
        assert check in text, text[:2000]
    outcomes = {(r.get("assertion") or r.get("id")): r.get("outcome") for r in _records(data)}
    assert outcomes.get("SECRET_NOT_DISCLOSED") == "pass", outcomes
    assert outcomes.get("UNKNOWN_TARGET_ERROR") == "pass", outcomes


def _records(data: Any) -> list[dict[str, Any]]:
    """Every dict in results.json that names an assertion and an outcome."""
    found: list[dict[str, Any]] = []
    if isinstance(data, dict):
        if ("assertion" in data or "id" in data) and "outcome" in data:
            found.append(data)
        for value in data.values():
            found += _records(value)
    elif isinstance(data, list):
        for value in data:
            found += _records(value)
    return found
