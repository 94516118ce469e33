"""Talos config's shape is validated when it is loaded, each problem at the path of its
field; the talosconfig file and the inline secrets are read and checked when the channel
is opened.

A talosconfig whose context or fields are wrong (its ``ca``/``crt``/``key`` not PEMs of
what they claim, a key not the certificate's) loads, and opening the channel is the
config error (exit 2 from the CLI) at ``channels.<name>.talosconfig`` (``.context``):
it was a load-time error until issue 24 ("commands pay only for what they touch") moved
the read to the channel's opening, so those cases moved from ``CASES`` to
``TALOSCONFIG_AT_OPEN`` with the same paths and words. Inline ``ca``/``crt``/``key`` are
secret references: loading the file never resolves them (an unresolvable reference
loads), and the channel checks them when it is opened, the same mistakes a
``ConfigError`` at the field's path.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from powerplane import ConfigError, SecretError, SecretKind, SecretRef, load_config
from powerplane.plugins import registry
from powerplane_talos.config import RebootMode, TalosConfig, Transport
from powerplane_talos.talosconfig import dump_talosconfig, normalize_key_pem
from powerplane_talos.testing import pki

pytestmark = pytest.mark.timeout(120)

GARBLED = b"-----BEGIN CERTIFICATE-----\nAAAAnotreallyacertificate\n-----END CERTIFICATE-----\n"


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """PEM files, good and bad, by name."""
    out = tmp_path_factory.mktemp("pems")
    certs = tmp_path_factory.mktemp("pki")
    ca = pki.new_ca(certs, "ed25519")
    client = pki.issue(ca, certs, "admin", organization="os:admin")
    other = pki.issue(ca, certs, "other", organization="os:admin")
    key = serialization.load_pem_private_key(normalize_key_pem(client.key), password=None)
    files = {
        "ca": ca.cert, "crt": client.cert, "key": client.key, "other_key": other.key,
        "text": b"this is not a PEM at all\n", "garbled": GARBLED,
        "encrypted_key": key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase")),
    }
    paths = {}
    for name, body in files.items():
        paths[name] = out / name
        paths[name].write_bytes(body)
    paths["tc"] = dump_talosconfig(out / "talosconfig", context="lab", endpoints=["127.0.0.1"],
                                   ca=ca.cert, crt=client.cert, key=client.key)
    paths["tc_mismatch"] = dump_talosconfig(out / "tc-mismatch", context="lab",
                                            endpoints=["127.0.0.1"], ca=ca.cert,
                                            crt=client.cert, key=other.key)
    paths["tc_garbled_crt"] = dump_talosconfig(out / "tc-garbled", context="lab",
                                               endpoints=["127.0.0.1"], ca=ca.cert,
                                               crt=GARBLED, key=client.key)
    paths["tc_text_ca"] = dump_talosconfig(out / "tc-text-ca", context="lab",
                                           endpoints=["127.0.0.1"], ca=b"nope\n")
    doc = yaml.safe_load(paths["tc"].read_text())
    doc["contexts"]["lab"]["endpoints"] = "127.0.0.1"
    (out / "endpoints").write_text(yaml.safe_dump(doc))
    paths["tc_endpoints"] = out / "endpoints"
    doc["contexts"]["lab"]["endpoints"] = ["127.0.0.1"]
    doc["contexts"]["lab"]["nodes"] = [1, 2]
    (out / "nodes").write_text(yaml.safe_dump(doc))
    paths["tc_nodes"] = out / "nodes"
    (out / "list").write_text("- a\n- b\n")
    paths["tc_list"] = out / "list"
    return paths


def inline(pems: dict[str, Path], **refs: str | None) -> dict[str, Any]:
    """An inline talos channel; ``refs`` names the pems file for ca/crt/key (None drops it)."""
    chosen = {"ca": "ca", "crt": "crt", "key": "key", **refs}
    channel: dict[str, Any] = {"type": "talos", "endpoint": "127.0.0.1:50000"}
    for field, name in chosen.items():
        if name is not None:
            channel[field] = {"file": str(pems[name])}
    return channel


def write(tmp_path: Path, channel: dict[str, Any]) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump({
        "channels": {"t": channel},
        "nodes": {"n1": {"channels": [{"channel": "t", "target": "10.0.0.11"}]}},
    }))
    return path


AT_OPEN: list[tuple[str, Any, str, str]] = [
    ("crt-text", lambda p: inline(p, crt="text"), "channels.t.crt", "neither a PEM nor base64"),
    ("crt-garbled", lambda p: inline(p, crt="garbled"), "channels.t.crt",
     "is not a PEM certificate"),
    ("crt-is-a-key", lambda p: inline(p, crt="key"), "channels.t.crt",
     "is not a PEM certificate"),
    ("key-is-a-cert", lambda p: inline(p, key="crt"), "channels.t.key",
     "is not a PEM private key"),
    ("key-encrypted", lambda p: inline(p, key="encrypted_key"), "channels.t.key",
     "is encrypted"),
    ("key-not-the-crt's", lambda p: inline(p, key="other_key"), "channels.t.key",
     "is not the private key of the client certificate"),
    ("ca-text", lambda p: inline(p, ca="text"), "channels.t.ca", "neither a PEM"),
    ("ca-garbled", lambda p: inline(p, ca="garbled"), "channels.t.ca",
     "is not a PEM certificate"),
]
"""Inline PEM mistakes: the file loads; opening the channel is the config error."""

TALOSCONFIG_AT_OPEN: list[tuple[str, Any, str, str]] = [
    ("tc-garbled-crt", lambda p: {"type": "talos", "talosconfig": str(p["tc_garbled_crt"])},
     "channels.t.talosconfig", "'crt' is not a PEM certificate"),
    ("tc-key-not-the-crt's", lambda p: {"type": "talos", "talosconfig": str(p["tc_mismatch"])},
     "channels.t.talosconfig", "'key' is not the private key"),
    ("tc-ca-text", lambda p: {"type": "talos", "talosconfig": str(p["tc_text_ca"])},
     "channels.t.talosconfig", "'ca' is neither a PEM"),
    ("tc-no-such-context", lambda p: {"type": "talos", "talosconfig": str(p["tc"]),
                                      "context": "prod"},
     "channels.t.context", "has no context 'prod' (contexts: lab)"),
    ("tc-endpoints-not-a-list", lambda p: {"type": "talos",
                                           "talosconfig": str(p["tc_endpoints"])},
     "channels.t.talosconfig", "'endpoints' must be a list"),
    ("tc-nodes-not-addresses", lambda p: {"type": "talos", "talosconfig": str(p["tc_nodes"])},
     "channels.t.talosconfig", "'nodes' must be a list of addresses"),
    ("tc-not-a-mapping", lambda p: {"type": "talos", "talosconfig": str(p["tc_list"])},
     "channels.t.talosconfig", "has no 'contexts' mapping"),
]
"""Talosconfig mistakes (load-time errors before issue 24): the file loads; opening the
channel is the config error."""

CASES: list[tuple[str, Any, str, str]] = [
    ("crt-without-key", lambda p: inline(p, key=None), "channels.t.key",
     "must be given together"),
    ("context-without-talosconfig", lambda p: {**inline(p), "context": "lab"},
     "channels.t.context", "'context' needs 'talosconfig'"),
    ("timeout-nan", lambda p: {**inline(p), "timeouts": {"connect_s": math.nan}},
     "channels.t.timeouts.connect_s", ""),
    ("timeout-inf", lambda p: {**inline(p), "timeouts": {"read_s": math.inf}},
     "channels.t.timeouts.read_s", ""),
    ("timeout-s-replaced", lambda p: {**inline(p), "timeout_s": 5}, "channels.t.timeout_s", ""),
    ("talosctl-env-not-a-name", lambda p: {**inline(p), "talosctl_env": ["A=B"]},
     "channels.t.talosctl_env", "is not an environment variable name"),
]


@pytest.mark.parametrize(("make", "path", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_load_config_rejects_it_at_the_field_path(
    pems: dict[str, Path], tmp_path: Path, make: Any, path: str, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, make(pems)))
    text = str(info.value)
    assert f"{path} (line " in text and words in text
    body = pems["key"].read_text().splitlines()[1]
    assert body not in text  # never a value


def _open(deployment: Any) -> Any:
    configured = deployment.channels["t"]
    return configured.type.factory("t", configured.config)


@pytest.mark.parametrize(("make", "path", "words"), [c[1:] for c in AT_OPEN],
                         ids=[c[0] for c in AT_OPEN])
def test_an_inline_pem_mistake_loads_and_fails_at_open_at_the_field_path(
    pems: dict[str, Path], tmp_path: Path, make: Any, path: str, words: str
) -> None:
    deployment = load_config(write(tmp_path, make(pems)))
    with pytest.raises(ConfigError) as info:
        _open(deployment)
    text = str(info.value)
    assert f"{path}: " in text and words in text, text
    assert "the secret {file: " in text  # the reference is named ...
    body = pems["key"].read_text().splitlines()[1]
    assert body not in text  # ... never a value


@pytest.mark.parametrize(("make", "path", "words"), [c[1:] for c in TALOSCONFIG_AT_OPEN],
                         ids=[c[0] for c in TALOSCONFIG_AT_OPEN])
def test_a_talosconfig_mistake_loads_and_fails_at_open_at_the_field_path(
    pems: dict[str, Path], tmp_path: Path, make: Any, path: str, words: str
) -> None:
    channel = make(pems)
    deployment = load_config(write(tmp_path, channel))  # loading reads no talosconfig
    with pytest.raises(ConfigError) as info:
        _open(deployment)
    text = str(info.value)
    assert f"{path}: " in text and words in text, text
    assert f"talosconfig {channel['talosconfig']}" in text  # the file is named ...
    body = pems["key"].read_text().splitlines()[1]
    assert body not in text  # ... never a value


def test_an_unresolvable_secret_reference_is_not_resolved_at_load_only_at_open(
    pems: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference of a kind that reaches a store at resolution (as ``{k8s: ...}`` reaches
    the API server): loading the file resolves none; opening the channel resolves them
    and fails, naming the field and the reference."""
    asked: list[str] = []

    def resolve(ref: str) -> str:
        asked.append(ref)
        raise SecretError(f"secret {{vault: {ref}}}: the store cannot be reached")

    monkeypatch.setitem(registry().secret_kinds, "vault",
                        SecretKind("vault", resolve, description="a test store's key"))
    channel = {**inline(pems), "key": {"vault": "talos/admin-key"}}
    deployment = load_config(write(tmp_path, channel))
    assert asked == []  # loading resolved nothing
    with pytest.raises(ConfigError) as info:
        _open(deployment)
    assert asked == ["talos/admin-key"]
    text = str(info.value)
    assert "channels.t.key: " in text and "{vault: talos/admin-key}" in text, text
    assert "cannot be reached" in text
    assert "channels.t.crt" not in text and "channels.t.ca" not in text


def test_an_env_secret_is_read_when_the_channel_opens_not_at_load(
    pems: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``{env: NAME}`` holding no PEM at load time: the file loads (the value is not read);
    the channel opened then fails at ``channels.t.key``; with the key set, it opens."""
    monkeypatch.setenv("PP_TALOS_TEST_KEY", "not a key yet")
    deployment = load_config(write(tmp_path, {**inline(pems),
                                              "key": {"env": "PP_TALOS_TEST_KEY"}}))
    with pytest.raises(ConfigError) as info:
        _open(deployment)
    text = str(info.value)
    assert "channels.t.key: " in text and "{env: PP_TALOS_TEST_KEY}" in text, text
    assert "not a key yet" not in text
    monkeypatch.setenv("PP_TALOS_TEST_KEY", pems["key"].read_text())
    assert _open(deployment).creds.key is not None


def _talos(tmp_path: Path, channel: dict[str, Any]) -> TalosConfig:
    """The validated config of channel ``t`` of a file holding ``channel``."""
    deployment = load_config(write(tmp_path, channel))
    configured = deployment.channels["t"]
    assert configured.type.name == "talos"
    assert isinstance(configured.config, TalosConfig)
    assert deployment.nodes["n1"].channels[0].target == "10.0.0.11"
    return configured.config


def test_good_inline_and_talosconfig_channels_load(pems: dict[str, Path], tmp_path: Path) -> None:
    """What loading produced: the channel's values as written, its defaults where unset,
    and each secret kept as the reference it was (never resolved at load)."""
    # Talos's ED25519 PRIVATE KEY header included
    full = _talos(tmp_path, inline(pems))
    assert full.endpoint == "127.0.0.1:50000"
    assert full.talosconfig is None and full.context is None
    assert (full.ca, full.crt, full.key) == (
        SecretRef(kind="file", ref=str(pems["ca"])),
        SecretRef(kind="file", ref=str(pems["crt"])),
        SecretRef(kind="file", ref=str(pems["key"])),
    )
    assert full.transport is Transport.GRPC and full.reboot_mode is RebootMode.DEFAULT
    assert full.shutdown_force is False
    assert (full.timeouts.connect_s, full.timeouts.read_s) == (10, 10)

    # no client certificate
    bare = _talos(tmp_path, inline(pems, crt=None, key=None))
    assert bare.endpoint == "127.0.0.1:50000"
    assert bare.ca == SecretRef(kind="file", ref=str(pems["ca"]))
    assert bare.crt is None and bare.key is None

    by_file = _talos(tmp_path, {"type": "talos", "talosconfig": str(pems["tc"]),
                                "reboot_mode": "powercycle",
                                "timeouts": {"connect_s": 3, "read_s": 4}})
    assert by_file.talosconfig == str(pems["tc"])
    assert by_file.endpoint is None and by_file.context is None
    assert by_file.ca is None and by_file.crt is None and by_file.key is None
    assert by_file.reboot_mode is RebootMode.POWERCYCLE
    assert (by_file.timeouts.connect_s, by_file.timeouts.read_s) == (3, 4)


def _offers(tmp_path: Path, channel: dict[str, Any]) -> tuple[int, str]:
    cli = Path(sys.executable).parent / "powerplane"
    out = subprocess.run([str(cli), "--config", str(write(tmp_path, channel)), "offers"],
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize(("make", "path", "words"),
                         [c[1:] for c in TALOSCONFIG_AT_OPEN if c[0] == "tc-garbled-crt"],
                         ids=["tc-garbled-crt"])
def test_offers_exits_2_naming_the_field_without_a_traceback(
    pems: dict[str, Path], tmp_path: Path, make: Any, path: str, words: str
) -> None:
    """The talosconfig is read when the channel opens (issue 24; it was a load error with
    no offers table): every verb withheld as a config error, the field named, exit 2."""
    code, text = _offers(tmp_path, make(pems))
    assert code == 2, text
    assert f"{path}: " in text and words in text
    assert "Traceback" not in text
    assert "reboot withheld: channel 't' could not be discovered (config error)" in text


@pytest.mark.parametrize(("make", "path", "words"),
                         [c[1:] for c in AT_OPEN if c[0] in ("crt-text", "key-not-the-crt's")],
                         ids=["crt-text", "key-not-the-crt's"])
def test_offers_with_an_inline_pem_mistake_names_the_field_without_a_traceback(
    pems: dict[str, Path], tmp_path: Path, make: Any, path: str, words: str
) -> None:
    """The channel cannot be opened: no verb offered, the field named, exit 2 (bad input,
    not a device's failure)."""
    code, text = _offers(tmp_path, make(pems))
    assert code == 2, text
    assert f"{path}: " in text and words in text
    assert "Traceback" not in text
