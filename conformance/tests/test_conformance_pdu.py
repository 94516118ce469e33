"""The suite against the pdu plugin on snmpsim (its demo peer: an APC rPDU2 profile).

The pdu channel refuses power-on for an outlet that is already on, by design (switching on
again cannot boot a machine that shut itself down); that is a declared defect here. The
wrong-community check, now derived from the community's SecretRef type, meets SNMPv2c's
silence, and the closed UDP port (the address declares transport="udp") is reported as
silence too: both declared.
Skipped where powerplane-pdu is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from powerplane_conformance import ConformanceSuite

pdu_peer = pytest.importorskip("powerplane_pdu.peer")


class TestPduSnmpsimConformance(ConformanceSuite):
    conformance_subjects = ("n0", "n1")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(
        cls, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[dict[str, Any]]:
        peer = pdu_peer.start(tmp_path_factory.mktemp("pdu"))
        try:
            yield {
                "channels": {"rack": peer.config},
                "nodes": {f"n{i}": {"channels": [{"channel": "rack", "target": t}]}
                          for i, t in enumerate(peer.targets[:2])},
                "conformance": {
                    "allow_destructive": True, "settle_timeout_s": 10, "repeat": 1,
                    "xfail": {"POWER_ON_IDEMPOTENT": "refuses power-on of an outlet that "
                                                     "is already on (by design)",
                              "WRONG_CREDENTIALS_REJECTED": "SNMPv2c: an agent drops a "
                              "request with a wrong community without a word, so a timeout "
                              "is all a manager can see",
                              "CLOSED_PORT_UNREACHABLE": "SNMP is UDP: the agent library "
                              "reports a closed port as silence (ChannelTimeout)"},
                },
            }
        finally:
            peer.stop()
