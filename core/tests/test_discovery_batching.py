"""Discovery in the host: one ``capabilities_batch`` call per channel and endpoint where the
channel has one, bounded workers where it has not.

Counted at the peers where the channel is a real one: DescribeInstances at a proxy in front
of moto's EC2 server, GETs of the Systems collection at a DMTF mockup server (public-bladed,
whose service root advertises ``ProtocolFeaturesSupported.ExpandQuery``) that honours
``$expand`` as the spec says. The other tests use channels of their own, registered like any
plugin, that record what the host asked them.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelType,
    PowerHost,
    PowerplaneError,
    ProtocolError,
    Reading,
    Source,
    Unreachable,
    Verb,
    hookimpl,
    parse_config,
)
from powerplane.channel import BatchDiscovery
from powerplane.plugins import Registry, load_plugins

TIMEOUT = 30.0
"""An explicit bound on each operation of a test (never a timing threshold)."""

CAPS = CapabilitySet.of(hard=[Verb.REBOOT, Verb.POWER_ON], source=Source.DECLARED)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = "bmc"


class PerTarget:
    """A channel without ``capabilities_batch``: records every call and the tasks alive."""

    calls: list[str] = []
    tasks_seen: list[int] = []
    in_flight = 0
    peak = 0

    def __init__(self, name: str, config: _Config) -> None:
        self.config = config

    def endpoint(self, target: str) -> str:
        return self.config.endpoint

    async def capabilities(self, target: str) -> CapabilitySet:
        cls = type(self)
        cls.calls.append(target)
        cls.tasks_seen.append(len(asyncio.all_tasks()))
        cls.in_flight += 1
        cls.peak = max(cls.peak, cls.in_flight)
        try:
            await asyncio.sleep(0.001)
        finally:
            cls.in_flight -= 1
        return CAPS

    async def reboot(self, target: str) -> Acceptance:
        return Acceptance()

    shutdown = power_on = reboot

    async def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    async def close(self) -> None:
        pass


class Batched(PerTarget):
    """A channel with ``capabilities_batch``: records each batch; ``answers`` shapes them."""

    batches: list[list[str]] = []
    answers: Callable[[Sequence[str]], Any] | None = None

    calls: list[str] = []

    def capabilities_batch(self, targets: Sequence[str]) -> Any:
        Batched.batches.append(list(targets))
        if Batched.answers is not None:
            return Batched.answers(targets)
        return [CAPS for _ in targets]


def _registry() -> Registry:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("per-target", _Config, PerTarget))
            register(ChannelType("batched", _Config, Batched))

    reg = load_plugins()
    reg.add_module("discovery-test", Plugin())
    return reg


@pytest.fixture(autouse=True)
def _fresh() -> None:
    for cls in (PerTarget, Batched):
        cls.calls = []
        cls.tasks_seen = []
        cls.in_flight = cls.peak = 0
    Batched.batches = []
    Batched.answers = None


def _host(kind: str, endpoints: int, per: int, *, nodes: list[str] | None = None,
          **limits: Any) -> PowerHost:
    channels = {f"c{e}": {"type": kind, "endpoint": f"bmc-{e}"} for e in range(endpoints)}
    spec = {f"n{e}-{i}": {"channels": [{"channel": f"c{e}", "target": f"m{e}-{i}"}]}
            for e in range(endpoints) for i in range(per)}
    cfg = {"channels": channels, "nodes": spec, "limits": limits}
    return PowerHost(parse_config(cfg, registry=_registry()), nodes=nodes)


def test_the_protocol_is_what_the_host_looks_for() -> None:
    assert isinstance(Batched("c", _Config()), BatchDiscovery)
    assert not isinstance(PerTarget("c", _Config()), BatchDiscovery)


async def test_a_batch_channel_is_asked_once_per_endpoint_for_all_its_targets() -> None:
    async with asyncio.timeout(TIMEOUT), _host("batched", 3, 50) as host:
        assert sorted(map(sorted, Batched.batches)) == [
            sorted(f"m{e}-{i}" for i in range(50)) for e in range(3)]
        assert Batched.calls == []  # never one capabilities() call per target
        assert all(host.offer_for(n).verbs[Verb.REBOOT].offered for n in host.nodes)


async def test_one_target_goes_to_capabilities_not_to_a_batch() -> None:
    async with asyncio.timeout(TIMEOUT), _host("batched", 2, 1) as host:
        assert Batched.batches == []
        assert sorted(Batched.calls) == ["m0-0", "m1-0"]
        assert host.offer_for("n0-0").verbs[Verb.REBOOT].offered


async def test_a_targeted_start_batches_only_what_those_nodes_use() -> None:
    async with asyncio.timeout(TIMEOUT), _host(
            "batched", 2, 5, nodes=["n0-1", "n0-3", "n1-2"]) as host:
        assert sorted(map(sorted, Batched.batches)) == [["m0-1", "m0-3"]]
        assert Batched.calls == ["m1-2"]
        await host.discover(["n1-0", "n1-4"])  # on first use: the rest of c1, batched
        assert sorted(map(sorted, Batched.batches)) == [["m0-1", "m0-3"], ["m1-0", "m1-4"]]


async def test_each_target_gets_its_own_outcome_from_a_batch() -> None:
    def answers(targets: Sequence[str]) -> list[Any]:
        return [Unreachable("no such blade", channel="c0", target=t) if t == "m0-1"
                else "not a set" if t == "m0-2" else CAPS for t in targets]

    Batched.answers = answers
    async with asyncio.timeout(TIMEOUT), _host("batched", 1, 4) as host:
        assert host.offer_for("n0-0").verbs[Verb.REBOOT].offered
        assert host.offer_for("n0-3").verbs[Verb.REBOOT].offered
        assert isinstance(host.discovery_error("n0-1"), Unreachable)
        assert "no such blade" in host.offer_for("n0-1").verbs[Verb.REBOOT].reason
        err = host.discovery_error("n0-2")
        assert isinstance(err, ProtocolError) and "returned str for this target" in str(err)
        assert not host.offer_for("n0-2").verbs[Verb.REBOOT].offered


@pytest.mark.parametrize(("answer", "expected", "words"), [
    (lambda targets: [CAPS], ProtocolError, "returned 1 outcomes for 3 targets"),
    (lambda targets: None, ProtocolError, "returned NoneType outcomes for 3 targets"),
    (lambda targets: (_ for _ in ()).throw(Unreachable("connection refused")), Unreachable,
     "connection refused"),
    (lambda targets: (_ for _ in ()).throw(KeyError("x")), ProtocolError,
     "unmapped builtins.KeyError escape from capabilities_batch()"),
])
async def test_a_batch_that_fails_is_every_targets_error(
    answer: Callable[[Sequence[str]], Any], expected: type[PowerplaneError], words: str,
) -> None:
    Batched.answers = answer
    async with asyncio.timeout(TIMEOUT), _host("batched", 1, 3) as host:
        for node in host.nodes:
            err = host.discovery_error(node)
            assert isinstance(err, expected) and words in str(err), err
            assert not host.offer_for(node).verbs[Verb.REBOOT].offered


async def test_a_channel_without_batch_is_discovered_per_target_by_bounded_workers() -> None:
    # 2,000 targets on 20 endpoints, 2 per endpoint, 16 in all: one task per target at once
    # would show about 2,000 tasks alive; the workers are at most 16
    async with asyncio.timeout(TIMEOUT), _host(
            "per-target", 20, 100, per_endpoint=2, total=16) as host:
        baseline = len(asyncio.all_tasks())
        assert len(PerTarget.calls) == len(set(PerTarget.calls)) == 2000  # each once
        assert max(PerTarget.tasks_seen) <= baseline + 16
        assert PerTarget.peak <= 16
        assert all(host.offer_for(n).verbs[Verb.REBOOT].offered for n in host.nodes)


async def test_refresh_asks_a_batch_channel_again_in_one_call() -> None:
    async with asyncio.timeout(TIMEOUT), _host("batched", 1, 10) as host:
        await host.refresh()
        assert len(Batched.batches) == 2 and all(len(b) == 10 for b in Batched.batches)


# -- real peers ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    peer = pytest.importorskip("powerplane_cloud.peer")
    server = peer.start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.mark.perf
@pytest.mark.slow
async def test_ec2_start_of_500_instances_is_one_describe_instances(
    moto: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from powerplane_cloud.peer import REGION
    from powerplane_cloud.testing.throttling import start_throttling_proxy

    moto.reset()
    ids = moto.run(500)
    proxy = start_throttling_proxy(moto.url)
    try:
        monkeypatch.setenv("PP_DISCOVERY_TEST_KEY", "AKIAIOSFODNN7EXAMPLE")
        monkeypatch.setenv("PP_DISCOVERY_TEST_SECRET", "discovery-test-secret")
        cfg = {
            "channels": {"aws": {
                "type": "ec2", "region": REGION, "endpoint_url": proxy.url,
                "access_key_id": {"env": "PP_DISCOVERY_TEST_KEY"},
                "secret_access_key": {"env": "PP_DISCOVERY_TEST_SECRET"},
            }},
            "nodes": {f"vm-{n}": {"channels": [{"channel": "aws", "target": i}]}
                      for n, i in enumerate(ids)},
        }
        async with asyncio.timeout(120), PowerHost(parse_config(cfg)) as host:
            assert all(host.offer_for(n).verbs[Verb.REBOOT].offered for n in host.nodes)
        describes = [a for a in proxy.seen if a.startswith("Describe")]
        # one per 1,000 ids; the host without batching made one per instance (500)
        assert describes == ["DescribeInstances"], describes
    finally:
        proxy.stop()


SYSTEMS = "/redfish/v1/Systems"


@pytest.fixture
def bladed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    dmtf = pytest.importorskip("powerplane_redfish.testing.dmtf")
    from powerplane_redfish.testing.mockup import MockupServer

    server = MockupServer(dmtf.mockups_dir() / "public-bladed").start()
    monkeypatch.setenv("PP_DISCOVERY_TEST_BMC", server.password)
    yield server
    server.stop()


def _expanding(server: Any, seen: list[str]) -> None:
    """Serve the Systems collection with its members inlined when ``$expand`` asks (the
    mockup server serves static documents and would ignore the query)."""
    from powerplane.testing import HttpReply, HttpRequest

    def handler(request: HttpRequest) -> HttpReply:
        collection = copy.deepcopy(server.http.resource(SYSTEMS))
        expand = request.query.get("$expand")
        if expand:
            seen.append(expand[0])
            members = []
            for link in collection["Members"]:
                body = copy.deepcopy(server.http.resource(link["@odata.id"]))
                if server.power.get(link["@odata.id"]) is not None:
                    body["PowerState"] = server.power[link["@odata.id"]]
                members.append(body)
            collection["Members"] = members
        return HttpReply(200, collection)

    server.http.route("GET", SYSTEMS, handler)


def _redfish_config(server: Any) -> dict[str, Any]:
    return {
        "channels": {"bmc": {
            "type": "redfish", "endpoint": server.endpoint, "username": server.username,
            "password": {"env": "PP_DISCOVERY_TEST_BMC"}, "auth": "session",
            "timeouts": {"connect_s": 5, "read_s": 10},
        }},
        "nodes": {f"blade-{n}": {"channels": [{"channel": "bmc", "target": path}]}
                  for n, path in enumerate(server.systems)},
    }


def _system_gets(server: Any) -> list[str]:
    return [p for m, p in server.requests if m == "GET" and p.startswith(SYSTEMS)]


@pytest.mark.perf
async def test_redfish_start_discovers_every_system_with_one_expanded_get(bladed: Any) -> None:
    assert len(bladed.systems) == 4
    seen: list[str] = []
    _expanding(bladed, seen)
    async with asyncio.timeout(TIMEOUT), PowerHost(parse_config(_redfish_config(bladed))) as host:
        assert all(host.offer_for(n).verbs[Verb.REBOOT].offered for n in host.nodes)
    assert seen == [".($levels=1)"]
    # one GET of the collection, none per system (discovery per target made one each)
    assert _system_gets(bladed) == [SYSTEMS], _system_gets(bladed)


@pytest.mark.perf
async def test_redfish_without_expand_query_reads_each_system_once(bladed: Any) -> None:
    root = copy.deepcopy(bladed.http.resource("/redfish/v1"))
    root.pop("ProtocolFeaturesSupported")
    bladed.http.set_resource("/redfish/v1", root)
    seen: list[str] = []
    _expanding(bladed, seen)
    async with asyncio.timeout(TIMEOUT), PowerHost(parse_config(_redfish_config(bladed))) as host:
        assert all(host.offer_for(n).verbs[Verb.REBOOT].offered for n in host.nodes)
    assert seen == []
    assert sorted(_system_gets(bladed)) == sorted(bladed.systems)

