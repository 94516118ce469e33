"""The suite against the redfish plugin on the sushy-tools emulator (delay zero), using the
emulator the redfish distribution ships for tests. Skipped where it is not installed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from powerplane_conformance import ConformanceSuite

emulator_mod = pytest.importorskip("powerplane_redfish.testing.emulator")

PASSWORD_ENV = "PP_CONFORMANCE_EMU_PASSWORD"


def _declares_timeouts() -> bool:
    """Whether the installed redfish plugin embeds ``timeouts: Timeouts`` and declares its
    address (the one plugin shape), so the suite derives the negatives itself."""
    from powerplane.testing import process_registry

    ctype = process_registry().channel_types.get("redfish")
    return ctype is not None and ctype.timeouts_field() is not None \
        and getattr(ctype, "address", None) is not None


def _timeouts(connect_s: float, read_s: float) -> dict[str, Any]:
    if _declares_timeouts():
        return {"timeouts": {"connect_s": connect_s, "read_s": read_s}}
    return {"connect_timeout_s": connect_s, "read_timeout_s": read_s}


def _negative_hints() -> dict[str, Any]:
    """No hints but the short timeout where the plugin declares what the suite needs; the
    old hand-written hints otherwise."""
    if _declares_timeouts():
        return {"timeout_s": 1}
    return {"address_key": "endpoint", "address_format": "https://{host}:{port}",
            "secret_key": "password", "timeout_s": 1,
            "timeout_key": ["connect_timeout_s", "read_timeout_s"]}


class TestRedfishEmulatorConformance(ConformanceSuite):
    """Every check, the network negatives included, against two emulated systems."""

    conformance_subjects = ("n0", "n1")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(
        cls, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[dict[str, Any]]:
        emu = emulator_mod.SushyEmulator(tmp_path_factory.mktemp("emulator"), systems=2)
        with emu:
            os.environ[PASSWORD_ENV] = emu.password
            yield {
                "channels": {"bmc": {
                    "type": "redfish", "endpoint": emu.endpoint, "username": emu.username,
                    "password": {"env": PASSWORD_ENV}, "verify": str(emu.tls.ca),
                    "auth": "basic", **_timeouts(connect_s=5, read_s=10)}},
                "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": path}]}
                          for i, path in enumerate(emu.system_paths)},
                "conformance": {
                    "allow_destructive": True, "settle_timeout_s": 10, "repeat": 2,
                    "expected_capabilities": {"bmc": ["reboot", "shutdown", "power-on"]},
                    "negative": {"bmc": _negative_hints()},
                },
            }
        os.environ.pop(PASSWORD_ENV, None)
