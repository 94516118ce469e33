"""The conformance suite, with its default settings, against the metal3 channel on the
stand-in baremetal-operator: an honest operator passes; a lying one is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from metal3_peers import channel_config, metal3_cluster

pytestmark = pytest.mark.timeout(600)


def _target(kubeconfig: Path) -> dict[str, Any]:
    return {
        "channels": {"m3": channel_config(kubeconfig)},
        "nodes": {
            "n1": {"channels": [{"channel": "m3", "target": "metal3/h0"}]},
            "n2": {"channels": [{"channel": "m3", "target": {"node": "worker-1"}}]},
        },
        # the defaults, and the one key a run that powers machines off and on needs
        "conformance": {"allow_destructive": True},
    }


def _run(tmp_path: Path, **operator: Any) -> dict[str, Any]:
    api_mod = pytest.importorskip("powerplane_conformance.api",
                                  reason="conformance not installed")
    with metal3_cluster(**operator) as (api, bmo):
        bmo.add_host("metal3", "h0")
        bmo.add_host("metal3", "h1", consumer="worker-1")
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        summary = api_mod.run_suite(_target(kubeconfig), in_subprocess=True)
        data: dict[str, Any] = summary.data
        data["operator"] = {"actions": list(bmo.actions), "lies": list(bmo.lies),
                            "refused": list(bmo.refused)}
        return data


def _failed(data: dict[str, Any]) -> dict[str, str]:
    return {r["id"]: r["message"][:300] for r in data["results"] if r["outcome"] == "fail"}


def test_the_suite_passes_against_the_operator(tmp_path: Path) -> None:
    data = _run(tmp_path)
    assert not _failed(data), _failed(data)
    assert data["verdict"] == "pass", data["verdict"]
    verified = {r["verb"] for r in data["results"] if r["outcome"] == "pass" and r["verb"]}
    assert {"reboot", "shutdown", "power-on"} <= verified
    assert any("power off (soft)" in a for a in data["operator"]["actions"])


@pytest.mark.parametrize("liar", ["drop-reboot", "phantom-power"])
def test_the_suite_catches_a_lying_operator(tmp_path: Path, liar: str) -> None:
    """drop-reboot removes the reboot annotation without a power cycle; phantom-power
    reports the poweredOn it was asked for and does nothing. Either way the host is never
    reported off for the reboot, so the channel does not claim it (OutcomeUnknown) and the
    suite fails REBOOT_READBACK (and REBOOT_REPEATED after it)."""
    data = _run(tmp_path, liar=liar)
    assert data["verdict"] == "fail"
    failed = _failed(data)
    assert "REBOOT_READBACK" in failed and "OutcomeUnknown" in failed["REBOOT_READBACK"]
    assert set(failed) <= {"REBOOT_READBACK", "REBOOT_REPEATED", "REBOOT_CONCURRENT"}, failed
    assert data["operator"]["lies"]
