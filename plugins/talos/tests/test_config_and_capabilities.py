"""Config validation, talosconfig handling, capabilities and registration of the talos type."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from powerplane import ConfigError, NotSupported, Source, Verb, parse_config
from powerplane.plugins import registry
from powerplane_talos import TalosChannel, TalosConfig
from powerplane_talos.config import parse_target
from powerplane_talos.talosconfig import (
    DEFAULT_PORT,
    decode_pem,
    dump_talosconfig,
    load_talosconfig,
    normalize_key_pem,
    split_endpoint,
)
from powerplane_talos.testing import pki
from powerplane_talos.tls import client_context


@pytest.fixture(scope="module")
def talosconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    certs = tmp_path_factory.mktemp("pki")
    ca = pki.new_ca(certs)
    client = pki.issue(ca, certs, "admin", organization="os:admin")
    return dump_talosconfig(tmp_path_factory.mktemp("tc") / "talosconfig", context="lab",
                            endpoints=["127.0.0.1:1"], ca=ca.cert, crt=client.cert,
                            key=client.key)


def test_the_talos_type_is_registered_through_its_entry_point() -> None:
    found = registry().get("talos")
    assert found is not None and found.config is TalosConfig


def test_talos_key_header_is_converted_so_python_ssl_loads_it(tmp_path: Path) -> None:
    ca = pki.new_ca(tmp_path, "ed25519")
    client = pki.issue(ca, tmp_path, "admin", organization="os:admin")
    assert b"BEGIN ED25519 PRIVATE KEY" in client.key
    assert b"BEGIN PRIVATE KEY" in normalize_key_pem(client.key)
    client_context(ca.cert, client.cert, client.key)  # loads: no exception


def test_talosconfig_stores_base64_pems_and_reads_them_back(talosconfig: Path) -> None:
    creds = load_talosconfig(talosconfig)
    assert creds.context == "lab" and creds.endpoints == ("127.0.0.1:1",)
    assert creds.key is not None and b"BEGIN PRIVATE KEY" in creds.key
    assert decode_pem(base64.b64encode(creds.ca).decode(), "ca") == creds.ca
    with pytest.raises(ValueError, match="no context 'nope'"):
        load_talosconfig(talosconfig, "nope")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10.0.0.2", ("10.0.0.2", DEFAULT_PORT)), ("10.0.0.2:50001", ("10.0.0.2", 50001)),
     ("[fd00::2]:50000", ("fd00::2", 50000)), ("https://talos.lan:443", ("talos.lan", 443))],
)
def test_endpoints_parse_with_the_talos_default_port(text: str, expected: tuple) -> None:
    assert split_endpoint(text) == expected


def test_config_errors_name_the_field_path(tmp_path: Path) -> None:
    # a missing talosconfig loads (the file is read when the channel opens, issue 24) and
    # opening the channel is the error at the field's path
    deployment = parse_config({"channels": {"t": {"type": "talos",
                                                  "talosconfig": str(tmp_path / "missing")}}})
    configured = deployment.channels["t"]
    with pytest.raises(ConfigError) as info:
        configured.type.factory("t", configured.config)
    assert "channels.t.talosconfig" in str(info.value)
    assert "does not exist" in str(info.value)
    with pytest.raises(ConfigError, match="expected 'talosconfig', or 'endpoint' and 'ca'"):
        parse_config({"channels": {"t": {"type": "talos"}}})
    with pytest.raises(ConfigError) as info:
        parse_config({"channels": {"t": {"type": "talos", "talosconfig": str(tmp_path),
                                         "reboot_mode": "gentle"}}})
    assert "channels.t.reboot_mode" in str(info.value)


def test_inline_key_must_be_a_secret_reference(talosconfig: Path) -> None:
    with pytest.raises(ConfigError, match="inline secret values are not accepted") as info:
        parse_config({"channels": {"t": {"type": "talos", "endpoint": "127.0.0.1",
                                         "ca": {"file": str(talosconfig)},
                                         "crt": {"file": str(talosconfig)},
                                         "key": "-----BEGIN PRIVATE KEY-----"}}})
    assert "BEGIN PRIVATE KEY" not in str(info.value)


@pytest.mark.parametrize(
    ("mode", "force", "graceful", "hard"),
    [("default", False, {Verb.REBOOT, Verb.SHUTDOWN}, set()),
     ("powercycle", False, {Verb.REBOOT, Verb.SHUTDOWN}, set()),
     ("force", False, {Verb.SHUTDOWN}, {Verb.REBOOT}),
     ("default", True, {Verb.REBOOT}, {Verb.SHUTDOWN})],
)
async def test_capabilities_are_intrinsic_and_never_power_on(
    talosconfig: Path, mode: str, force: bool, graceful: set[Verb], hard: set[Verb]
) -> None:
    ch = TalosChannel("t", TalosConfig(talosconfig=str(talosconfig), reboot_mode=mode,
                                       shutdown_force=force))
    caps = await ch.capabilities("10.0.0.11")
    assert {v for v in caps if caps.is_graceful(v)} == graceful
    assert {v for v in caps if not caps.is_graceful(v)} == hard
    assert not caps.advertises(Verb.POWER_ON)
    assert caps.source is Source.INTRINSIC and not caps.sees_power_off
    with pytest.raises(NotSupported):
        await ch.power_on("10.0.0.11")  # before any I/O: the endpoint is a closed port
    await ch.close()


def test_target_is_a_node_address() -> None:
    assert parse_target(" 10.0.0.11 ") == "10.0.0.11"
    with pytest.raises(ValueError, match="node's address"):
        parse_target({"outlets": [1]})


@pytest.mark.perf
def test_plugin_discovery_does_not_import_grpclib_or_protobuf() -> None:
    import subprocess
    import sys

    code = ("import sys, powerplane_talos.plugin; "
            "print(sorted(m for m in ('grpclib', 'google.protobuf', 'cryptography') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]", f"perf (plugin load): imported {out.stdout.strip()}"
