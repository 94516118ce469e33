"""The project's conformance suite, run against a pdu channel on snmpsim (SNMPv3 authPriv)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pdu_peers import AUTH_KEY, PRIV_KEY, SnmpSim


def test_conformance_suite_passes_with_the_declared_snmp_limits(
    snmpsim: SnmpSim, secret: Callable[[str], dict[str, str]]
) -> None:
    channel: dict[str, Any] = {
        "type": "pdu", "protocol": "snmp", "profile": "apc-rpdu2",
        "host": "127.0.0.1", "port": snmpsim.port, "version": "3",
        "user": "ppuser", "context": "conformance",
        "auth_protocol": "sha", "auth_key": secret(AUTH_KEY),
        "priv_protocol": "aes", "priv_key": secret(PRIV_KEY),
        "timeouts": {"connect_s": 0.5, "read_s": 0.5}, "retries": 0, "reboot_delay_s": 0.1,
    }
    target = {
        "channels": {"rack": channel},
        "nodes": {
            "n1": {"channels": [{"channel": "rack", "target": {"outlets": [1]}}]},
            "n3": {"channels": [{"channel": "rack", "target": {"outlets": [3]}}]},
        },
        "conformance": {
            "allow_destructive": True,
            "settle_timeout_s": 3,
            "repeat": 1,
            "expected_capabilities": {"rack": ["reboot", "shutdown", "power-on"]},
            "negative": {"rack": {
                "secret_key": "auth_key", "address_key": "host", "address_format": "{host}",
                "port_key": "port", "timeout_s": 0.5,
                "unknown_target": {"outlets": [99]},
            }},
            "xfail": {
                "POWER_ON_IDEMPOTENT": "by design: power-on of outlets that are all on is "
                "refused (on_when_already_on: refuse); it cannot boot a machine",
                "CLOSED_PORT_UNREACHABLE": "SNMP is UDP: a closed port is silent, so it "
                "fails as ChannelTimeout, not Unreachable",
            },
        },
    }
    api = pytest.importorskip("powerplane_conformance.api", reason="conformance not installed")
    summary = api.run_suite(target, in_subprocess=True)
    failed = [(r["id"], r["message"][:300]) for r in summary.data["results"]
              if r["outcome"] == "fail"]
    assert not failed, failed
    assert summary.data["verdict"] == "pass"
    counts = summary.data["counts"]
    assert counts["pass"] >= 20 and counts["xfail"] >= 2, counts
    assert summary.data["results"]
