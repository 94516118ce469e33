"""``powerplane.testing``'s registries for tests (:mod:`powerplane.testing.registries`):
``registered`` puts a plugin in a registry for one ``with`` block and takes it out however
the block ends; ``plugin_registry`` builds a registry of a test's own, the process-wide one
and the environment left as they were."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from powerplane import SecretKind, hookimpl
from powerplane.plugins import ENV_RESTRICT
from powerplane.testing import plugin_registry, process_registry, registered


class _VaultPlugin:
    """Registers one secret kind, ``testvault-registries``."""

    @hookimpl
    def register_secret_kinds(self, register: Callable[[SecretKind], None]) -> None:
        register(SecretKind("testvault-registries", lambda value: "s3cret", lambda v: None,
                            "PATH"))


KIND = "testvault-registries"


def test_registered_adds_for_the_block_and_removes_after() -> None:
    reg = process_registry()
    assert KIND not in reg.secret_kinds
    with registered(_VaultPlugin(), name="registries-vault") as inside:
        assert inside is reg
        assert KIND in reg.secret_kinds
        assert "registries-vault" in [p.name for p in reg.plugins]
    assert KIND not in reg.secret_kinds
    assert "registries-vault" not in [p.name for p in reg.plugins]


def test_registered_removes_when_the_block_raises() -> None:
    reg = process_registry()
    with pytest.raises(RuntimeError), registered(_VaultPlugin(), name="registries-vault"):
        raise RuntimeError("the test failed")
    assert KIND not in reg.secret_kinds


def test_registered_into_a_registry_of_the_test_s_own() -> None:
    own = plugin_registry(only=[])
    with registered(_VaultPlugin(), name="registries-vault", into=own):
        assert KIND in own.secret_kinds
        assert KIND not in process_registry().secret_kinds
    assert KIND not in own.secret_kinds


def test_plugin_registry_selects_and_adds_leaving_the_process_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_RESTRICT, raising=False)
    reg = plugin_registry(only=["simulated"], add={"registries-vault": _VaultPlugin()},
                          distribution="powerplane-redfish")
    assert reg is not process_registry()
    assert "simulated" in reg.channel_types
    assert "redfish" not in reg.channel_types  # installed, not selected
    assert KIND in reg.secret_kinds
    assert [p.distribution for p in reg.plugins if p.name == "registries-vault"] == [
        "powerplane-redfish"]
    assert ENV_RESTRICT not in os.environ
    assert KIND not in process_registry().secret_kinds


def test_plugin_registry_keeps_a_restriction_the_environment_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_RESTRICT, "simulated,redfish")
    plugin_registry(only=[])
    assert os.environ[ENV_RESTRICT] == "simulated,redfish"
