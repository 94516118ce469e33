"""One transport rule for every auth mode: the same CAs trusted, no proxy from the environment.

``auth: basic`` (the direct client on ``http.client``) and ``auth: session`` / ``auto``
(sushy, on requests) are run side by side, with the same CA bundle and the same proxy
settings in the environment, against two peers over TLS: the sushy-tools emulator (basic
and auto: it logs no session in) and the DMTF mockup server with its session service on
``powerplane.testing``'s TLS (basic, session and auto):

- ``verify: <path>``: that bundle, whatever ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` say;
- ``verify: true``: the system store as OpenSSL finds it (``SSL_CERT_FILE`` here), never
  ``REQUESTS_CA_BUNDLE`` (nor certifi): a CA only that variable names is not trusted;
  both kinds build their context with one function (``tls_context``);
- ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` naming a port nobody listens on change
  nothing: the BMC is reached directly, in every mode.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from powerplane import PowerState, TLSVerificationFailed, parse_config
from powerplane.testing import closed_port, issue_cert, make_ca
from powerplane_redfish import RedfishChannel
from powerplane_redfish.connection import tls_context
from powerplane_redfish.testing.emulator import SushyEmulator

PEERS = [("emulator", "basic"), ("emulator", "auto"), ("mockup", "basic"),
         ("mockup", "session"), ("mockup", "auto")]
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                   "all_proxy")


@dataclass(frozen=True)
class Peer:
    """One TLS peer and a channel config for it in one auth mode."""

    cfg: dict[str, Any]
    system: str
    ca: Path


def channel_for(cfg: dict[str, Any], **kw: Any) -> RedfishChannel:
    configured = parse_config({"channels": {"bmc": {**cfg, **kw}}}).channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


@pytest.fixture(params=PEERS, ids=[f"{peer}-{auth}" for peer, auth in PEERS])
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Peer]:
    kind, auth = request.param
    if kind == "emulator":
        emulator: SushyEmulator = request.getfixturevalue("emulator")
        emu_cfg = request.getfixturevalue("emu_cfg")
        yield Peer(emu_cfg(auth=auth), request.getfixturevalue("emu_system"),
                   emulator.tls.ca)
        return
    ca = make_ca(tmp_path / "mockup-ca", "mockup")
    tls = issue_cert(ca, tmp_path / "mockup-ca", stem="mockup-server")
    server = request.getfixturevalue("mockup")(tls=tls)
    yield Peer(request.getfixturevalue("mockup_cfg")(server, auth=auth), server.systems[0],
               tls.ca)


@pytest.fixture
def other_ca(tmp_path: Path) -> Path:
    """A CA that signed nothing the peers serve."""
    return make_ca(tmp_path / "other", "unrelated").cert


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every proxy variable names a loopback port nobody listens on; NO_PROXY is unset."""
    url = f"http://127.0.0.1:{closed_port()}"
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    return url


def _reads(cfg: dict[str, Any], system: str, **kw: Any) -> None:
    ch = channel_for(cfg, **kw)
    try:
        assert ch.read_power_state(system).state in {PowerState.ON, PowerState.OFF}
    finally:
        ch.close()


def test_a_ca_bundle_path_is_trusted_and_no_proxy_is_taken_from_the_environment(
    peer: Peer, other_ca: Path, dead_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other_ca))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(other_ca))
    _reads(peer.cfg, peer.system, verify=str(peer.ca))


def test_verify_true_is_the_system_store_as_openssl_finds_it(
    peer: Peer, other_ca: Path, dead_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(peer.ca))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other_ca))
    _reads(peer.cfg, peer.system, verify=True)


def test_verify_true_never_trusts_a_ca_only_requests_ca_bundle_names(
    peer: Peer, other_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(peer.ca))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(peer.ca))
    ch = channel_for(peer.cfg, verify=True)
    try:
        with pytest.raises(TLSVerificationFailed):
            ch.read_power_state(peer.system)
    finally:
        ch.close()


def test_one_context_rule_for_each_verify_value(
    peer: Peer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tls_context``: a path (``~`` expanded) trusts that bundle only; false verifies
    nothing; true is OpenSSL's store, which ``SSL_CERT_FILE`` replaces."""
    monkeypatch.setenv("HOME", str(peer.ca.parent))
    pinned = tls_context(f"~/{peer.ca.name}")
    assert pinned.verify_mode is ssl.CERT_REQUIRED and pinned.check_hostname
    assert [c["subject"] for c in pinned.get_ca_certs()] == [
        c["subject"] for c in ssl.create_default_context(cafile=str(peer.ca)).get_ca_certs()]
    assert tls_context(False).verify_mode is ssl.CERT_NONE
    monkeypatch.setenv("SSL_CERT_FILE", str(peer.ca))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    system = tls_context(True)
    assert system.verify_mode is ssl.CERT_REQUIRED
    assert len(system.get_ca_certs()) == 1
