"""An in-tree plugin needs no hint for its unknown-target and secret-leak checks.

A channel type whose targets are not strings the suite can append a suffix to (IPMI's
``HOST:PORT``, a PDU's outlets, an EC2 instance id) derives a well-formed target its
device does not have through ``ChannelType.unknown_target``. Without it,
UNKNOWN_TARGET_ERROR and SECRET_NOT_DISCLOSED were NOT TESTED by default (the derived
``127.0.0.1:55282-powerplane-conformance-unknown`` is no IPMI target). Here every in-tree
type's derivation is parsed by its own parser, and the two checks run, and pass, against
each plugin's real peer (ipmi_sim, snmpsim, moto) with no ``negative:`` hint.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_targets import messages, outcome

from powerplane.testing import StartedPeer, process_registry
from powerplane_conformance.api import run_suite
from powerplane_conformance.probing import UNKNOWN_SUFFIX

SAMPLES: dict[str, Any] = {
    "simulated": "m1",
    "redfish": "/redfish/v1/Systems/1",
    "talos": "10.0.0.11",
    "ipmi": "127.0.0.1:55282",
    "pdu": {"outlets": [3, 4]},
    "ec2": "i-0123456789abcdef0",
    "openstack": "3f1c2a4e-6b7d-4e8f-9a0b-1c2d3e4f5a6b",
}
"""A target of each in-tree channel type, as a node would name it."""

PEERS = {"ipmi": "powerplane_ipmi.peer", "pdu": "powerplane_pdu.peer",
         "ec2": "powerplane_cloud.peer"}
"""The in-tree types whose targets need a derivation, and the module of each one's peer."""


@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_in_tree_type_derives_an_unknown_target_its_parser_accepts(name: str) -> None:
    ctype = process_registry().channel_types[name]
    node_target = ctype.target(SAMPLES[name]) if ctype.target else SAMPLES[name]
    if name in PEERS:
        assert ctype.unknown_target is not None, f"{name} declares no unknown_target"
    if ctype.unknown_target is not None:
        raw = ctype.unknown_target(node_target)
    else:
        assert isinstance(node_target, str)
        raw = node_target + UNKNOWN_SUFFIX
    derived = ctype.target(raw) if ctype.target else raw  # the parser accepts it
    assert derived != node_target and str(derived) != str(node_target)


@pytest.fixture(params=list(PEERS))
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, StartedPeer]]:
    name = str(request.param)
    started: StartedPeer = importlib.import_module(PEERS[name]).PEER.start(tmp_path / name)
    try:
        yield name, started
    finally:
        started.stop()


@pytest.mark.slow
def test_unknown_target_and_secret_checks_run_with_no_hint(
    peer: tuple[str, StartedPeer], tmp_path: Path
) -> None:
    name, started = peer
    target = {
        "channels": {"dev": started.config},
        "nodes": {"n0": {"channels": [{"channel": "dev", "target": started.targets[0]}]}},
        "limits": {"timeout_s": 30},
        "conformance": {"allow_destructive": False, "settle_timeout_s": 10},  # no negative:
    }
    summary = run_suite(target, report=tmp_path / "results.json",
                        pytest_args=["-k", "unknown_target or secret_not_disclosed"])
    for ident in ("UNKNOWN_TARGET_ERROR", "SECRET_NOT_DISCLOSED"):
        assert outcome(summary, ident) == {"pass"}, (name, ident, messages(summary, ident))
