"""The suite against a real loopback peer over TCP: the network negative checks pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from powerplane_conformance import ConformanceSuite


class TestLineProtocolConformance(ConformanceSuite):
    """Every check, including closed port, silent server and wrong credentials."""

    conformance_subjects = ("n1", "n2")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(
        cls, lineproto_peer: tuple[int, str], tmp_path_factory: pytest.TempPathFactory
    ) -> dict[str, Any]:
        port, password = lineproto_peer
        secret: Path = tmp_path_factory.mktemp("line") / "password"
        secret.write_text(password, encoding="utf-8")
        return {
            "channels": {"dev": {"type": "lineproto", "address": f"127.0.0.1:{port}",
                                 "password": {"file": str(secret)}}},
            "nodes": {"n1": {"channels": [{"channel": "dev", "target": "m1"}]},
                      "n2": {"channels": [{"channel": "dev", "target": "m2"}]}},
            "conformance": {
                "nodes": ["n1", "n2"],
                "allow_destructive": True,
                "settle_timeout_s": 2,
                "repeat": 2,
                "expected_capabilities": {"dev": ["reboot", "shutdown", "power-on"]},
                "negative": {"dev": {"address_key": "address", "secret_key": "password",
                                     "timeout_key": "timeout_s", "timeout_s": 0.5}},
            },
        }
