"""Core's ``register_demo_peers`` hook: the registry collects the peers plugins offer.

The demo that starts them is powerplane-demo (its own tests are under ``demo/tests``);
core only declares the hook and collects :class:`powerplane.testing.Peer` values.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from powerplane import hookimpl
from powerplane.plugins import Registry, load_plugins
from powerplane.testing import Peer, StartedPeer


def _start(where: Path) -> StartedPeer:
    return StartedPeer({"type": "simulated", "machines": {"a": "on"}}, ["a"], lambda: None,
                       "a stand-in")


class Offers:
    @hookimpl
    def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
        register(Peer("lab-bmc", "bmc", _start))
        register(Peer("lab-pdu", "pdu", _start))


class OffersTheSameName:
    @hookimpl
    def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
        register(Peer("lab-bmc", "inband", _start))


def registry() -> Registry:
    os.environ["POWERPLANE_LOAD_PLUGINS"] = "simulated"
    try:
        return load_plugins()
    finally:
        del os.environ["POWERPLANE_LOAD_PLUGINS"]


def test_the_registry_collects_each_offered_peer_by_name() -> None:
    reg = registry()
    reg.add_module("offers", Offers(), distribution="powerplane")
    assert sorted(reg.demo_peers) == ["lab-bmc", "lab-pdu"]
    peer = reg.demo_peers["lab-pdu"]
    assert isinstance(peer, Peer) and peer.role == "pdu"
    assert peer.start(Path(".")).targets == ["a"]


def test_a_peer_name_taken_first_keeps_its_peer() -> None:
    reg = registry()
    reg.add_module("offers", Offers(), distribution="powerplane")
    reg.add_module("same", OffersTheSameName(), distribution="powerplane")
    assert reg.demo_peers["lab-bmc"].role == "bmc"
