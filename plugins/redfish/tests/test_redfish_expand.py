"""Discovery of many systems on one service: ``$expand`` where the service root says so.

Against DMTF's public-bladed mockup (four systems; its service root advertises
``ProtocolFeaturesSupported.ExpandQuery`` with ExpandAll, Levels, Links and NoLinks). The
mockup server serves static documents and ignores query strings, so these tests route the
Systems collection through a handler that honours ``$expand`` the way the spec says (each
member inlined as the server serves it on its own), and count every GET the server
received.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from powerplane import CapabilitySet, Verb, parse_config
from powerplane.testing import HttpReply, HttpRequest
from powerplane_redfish import RedfishChannel
from powerplane_redfish.testing.mockup import MockupServer

CfgFn = Callable[..., dict[str, Any]]
SYSTEMS = "/redfish/v1/Systems"


def _channel(cfg: dict[str, Any]) -> RedfishChannel:
    dep = parse_config({"channels": {"bmc": cfg}})
    configured = dep.channels["bmc"]
    ch = configured.type.factory("bmc", configured.config)
    assert isinstance(ch, RedfishChannel)
    return ch


def _own_payload(server: MockupServer, path: str) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(server.http.resource(path))
    if server.power.get(path) is not None:
        doc["PowerState"] = server.power[path]
    return doc


def _expanding(server: MockupServer, seen: list[str],
               mangle: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None) -> None:
    """Serve the Systems collection with its members inlined when ``$expand`` asks."""

    def handler(request: HttpRequest) -> HttpReply:
        collection = copy.deepcopy(server.http.resource(SYSTEMS))
        expand = request.query.get("$expand")
        if expand:
            seen.append(expand[0])
            members = []
            for link in collection["Members"]:
                body = _own_payload(server, link["@odata.id"])
                members.append(mangle(link["@odata.id"], body) if mangle else body)
            collection["Members"] = members
        return HttpReply(200, collection)

    server.http.route("GET", SYSTEMS, handler)


def _gets(server: MockupServer, since: int) -> list[str]:
    return [p for m, p in server.requests[since:] if m == "GET" and p.startswith(SYSTEMS)]


def _one_by_one(server: MockupServer, mockup_cfg: CfgFn) -> list[CapabilitySet]:
    ch = _channel(mockup_cfg(server))
    try:
        return [ch.capabilities(t) for t in server.systems]
    finally:
        ch.close()


def _batch(server: MockupServer, mockup_cfg: CfgFn) -> tuple[list[Any], list[str]]:
    ch = _channel(mockup_cfg(server))
    try:
        with ch.connection.use(None):  # log in first: the count is discovery's own
            pass
        since = len(server.requests)
        caps = ch.capabilities_batch(server.systems)
        return caps, _gets(server, since)
    finally:
        ch.close()


def test_with_expand_query_every_system_comes_in_one_get(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn,
) -> None:
    server = mockup("public-bladed")
    assert len(server.systems) == 4
    seen: list[str] = []
    _expanding(server, seen)
    caps, gets = _batch(server, mockup_cfg)
    assert seen == [".($levels=1)"]  # NoLinks and Levels are advertised
    assert gets == [SYSTEMS], gets  # one GET of the collection, no GET per system
    assert caps == _one_by_one(server, mockup_cfg)
    assert all(isinstance(c, CapabilitySet) and c.advertises(Verb.REBOOT) for c in caps)


def test_without_expand_query_each_system_is_read_on_its_own(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn,
) -> None:
    server = mockup("public-bladed")
    root = copy.deepcopy(server.http.resource("/redfish/v1"))
    root.pop("ProtocolFeaturesSupported")
    server.http.set_resource("/redfish/v1", root)
    seen: list[str] = []
    _expanding(server, seen)
    caps, gets = _batch(server, mockup_cfg)
    assert seen == []  # never asked for what the service does not advertise
    assert sorted(gets) == sorted(server.systems)
    assert caps == _one_by_one(server, mockup_cfg)


@pytest.mark.parametrize("features", [
    {"ExpandAll": True},
    {"ExpandAll": True, "Levels": True, "MaxLevels": 1},
    {"Links": True, "Levels": True},
])
def test_the_query_follows_what_expand_query_says(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn, features: dict[str, Any],
) -> None:
    server = mockup("public-bladed")
    root = copy.deepcopy(server.http.resource("/redfish/v1"))
    root["ProtocolFeaturesSupported"]["ExpandQuery"] = features
    server.http.set_resource("/redfish/v1", root)
    seen: list[str] = []
    _expanding(server, seen)
    caps, gets = _batch(server, mockup_cfg)
    if features.get("ExpandAll"):
        assert seen == (["*($levels=1)"] if features.get("Levels") else ["*"])
        assert gets == [SYSTEMS]
    else:  # "~" inlines only Links: the members are not among them
        assert seen == [] and sorted(gets) == sorted(server.systems)
    assert caps == _one_by_one(server, mockup_cfg)


def test_a_service_that_ignores_expand_is_read_system_by_system(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn,
) -> None:
    server = mockup("public-bladed")  # advertises ExpandQuery, serves the links only
    caps, gets = _batch(server, mockup_cfg)
    assert gets.count(SYSTEMS) == 1 and sorted(g for g in gets if g != SYSTEMS) == sorted(
        server.systems)
    assert caps == _one_by_one(server, mockup_cfg)


def test_each_system_is_judged_from_its_own_payload(
    mockup: Callable[..., MockupServer], mockup_cfg: CfgFn,
) -> None:
    server = mockup("public-bladed")
    first, second, *_ = server.systems
    doc = server.http.resource(first)
    doc["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"] = ["On"]

    def mangle(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == second:  # not a ComputerSystem as served: read on its own instead
            body.pop("@odata.type")
        return body

    seen: list[str] = []
    _expanding(server, seen, mangle)
    caps, gets = _batch(server, mockup_cfg)
    assert gets == [SYSTEMS, second]
    by_path = dict(zip(server.systems, caps, strict=True))
    only_on = by_path[first]
    assert isinstance(only_on, CapabilitySet)
    assert only_on.advertises(Verb.POWER_ON)
    assert not only_on.advertises(Verb.REBOOT) and not only_on.advertises(Verb.SHUTDOWN)
    assert all(isinstance(c, CapabilitySet) and c.advertises(Verb.REBOOT)
               for p, c in by_path.items() if p != first)
    assert caps == _one_by_one(server, mockup_cfg)
