"""The per-site Lease against kmock: acquire, renew, expire, take over, lost races.

Time is a clock the test moves (the replicas' monotonic clocks), so expiry is decided by
the rule, not by sleeping; the requests are real ones to the API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lightkube import AsyncClient, KubeConfig

from powerplane_kubernetes.operator.leases import LeaseTimings, SiteLease, lease_name
from powerplane_kubernetes.testing.apiserver import KubeApiServer

LEASES = "coordination.k8s.io/v1/leases"
T = LeaseTimings(lease_duration=15, renew_deadline=10, retry_period=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> AsyncIterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
async def client(api: KubeApiServer, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    c = AsyncClient(KubeConfig.from_file(api.write_kubeconfig(tmp_path / "kc")),
                    trust_env=False)
    yield c
    await c.close()


def test_lease_names_are_dns_labels() -> None:
    assert lease_name("east") == "powerplane-site-east"
    assert lease_name("Rack 7/B") == "powerplane-site-rack-7-b"
    assert len(lease_name("x" * 100)) <= 63


def test_timings_must_order_duration_deadline_period() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaseTimings(lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError):
        LeaseTimings(lease_duration=10, renew_deadline=5, retry_period=5)


async def test_acquire_when_absent_then_renew(api: KubeApiServer,
                                              client: AsyncClient) -> None:
    clock = Clock()
    a = SiteLease(client, "ops", "east", "a", T, clock)
    assert not a.held()
    assert await a.try_acquire_or_renew()
    assert a.held()
    obj = api.object(LEASES, "ops", "powerplane-site-east")
    assert obj is not None and obj["spec"]["holderIdentity"] == "a"
    assert obj["spec"]["leaseDurationSeconds"] == 15
    first = obj["metadata"]["resourceVersion"]
    clock.now += 2
    assert await a.try_acquire_or_renew()
    obj = api.object(LEASES, "ops", "powerplane-site-east")
    assert obj is not None and obj["metadata"]["resourceVersion"] != first
    # the renewal is a PUT naming the version read (optimistic concurrency)
    puts = api.requests_to("PUT", "/apis/coordination.k8s.io/v1/namespaces/ops/leases/")
    assert puts and puts[-1].body["metadata"]["resourceVersion"] == first


async def test_a_holder_renews_with_one_put_on_its_own_last_write(
        api: KubeApiServer, client: AsyncClient) -> None:
    """client-go's optimistic fast path: while held, a renewal is a PUT naming the version
    of the holder's own last write, no read; where that PUT fails (a 409: someone wrote the
    Lease since), the Lease is read again and renewed on the version read."""
    clock = Clock()
    a = SiteLease(client, "ops", "east", "a", T, clock)
    assert await a.try_acquire_or_renew()
    base = "/apis/coordination.k8s.io/v1/namespaces/ops/leases"
    gets = len(api.requests_to("GET", base))
    for _ in range(3):
        clock.now += 2
        obj = api.object(LEASES, "ops", "powerplane-site-east")
        assert obj is not None
        assert await a.try_acquire_or_renew()
        put = api.requests_to("PUT", base)[-1]
        assert put.body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert len(api.requests_to("GET", base)) == gets  # three renewals, not one read
    # someone writes the Lease (its holder unchanged): the fast PUT is a 409, then read
    obj = api.object(LEASES, "ops", "powerplane-site-east")
    assert obj is not None
    obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), "touched": "yes"}
    stored = api.restore_object(LEASES, "ops", obj)
    clock.now += 2
    assert await a.try_acquire_or_renew() and a.held()
    assert len(api.requests_to("GET", base)) == gets + 1
    put = api.requests_to("PUT", base)[-1]
    assert put.body["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    # another holder took it meanwhile (by hand): the fast PUT fails, the read shows it
    api.add_lease("ops", "powerplane-site-east", "b")
    clock.now += 2
    assert not await a.try_acquire_or_renew()
    assert not a.held() and a.holder == "b"


async def test_a_held_lease_is_not_taken_and_an_expired_one_is(api: KubeApiServer,
                                                               client: AsyncClient) -> None:
    ca, cb = Clock(), Clock()
    a = SiteLease(client, "ops", "east", "a", T, ca)
    b = SiteLease(client, "ops", "east", "b", T, cb)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert b.holder == "a" and not b.held()
    # a keeps renewing: b never sees it unchanged for a whole duration
    for _ in range(10):
        ca.now += 2
        cb.now += 2
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    # a stops renewing: by its own clock it stops acting at the renew deadline ...
    ca.now += T.renew_deadline
    assert not a.held()
    # ... while b may take over only after a whole duration unchanged (by b's clock)
    cb.now += T.renew_deadline
    assert not await b.try_acquire_or_renew()
    cb.now += T.lease_duration - T.renew_deadline
    assert await b.try_acquire_or_renew()
    assert b.held()
    obj = api.object(LEASES, "ops", "powerplane-site-east")
    assert obj is not None and obj["spec"]["holderIdentity"] == "b"
    assert obj["spec"]["leaseTransitions"] == 1
    # a, back, finds b holding it and does not act
    assert not await a.try_acquire_or_renew()
    assert not a.held() and a.holder == "b"


async def test_renew_deadline_stops_acting_without_any_request(client: AsyncClient) -> None:
    clock = Clock()
    a = SiteLease(client, "ops", "east", "a", T, clock)
    assert await a.try_acquire_or_renew()
    clock.now += T.renew_deadline - 0.001
    assert a.held()
    clock.now += 0.002
    assert not a.held()  # by the clock alone: the API server may be unreachable


async def test_unreachable_api_server_is_not_held_after_the_deadline(
        api: KubeApiServer, client: AsyncClient) -> None:
    clock = Clock()
    a = SiteLease(client, "ops", "east", "a", T, clock)
    assert await a.try_acquire_or_renew()
    api.stop()
    clock.now += 2
    assert await a.try_acquire_or_renew()  # still within the deadline of the last renewal
    assert a.last_error is not None and "cannot be reached" in a.last_error
    clock.now += T.renew_deadline
    assert not await a.try_acquire_or_renew()


async def test_two_creators_one_wins_the_other_sees_409(api: KubeApiServer,
                                                        client: AsyncClient) -> None:
    a = SiteLease(client, "ops", "east", "a", T, Clock())
    b = SiteLease(client, "ops", "east", "b", T, Clock())
    assert await a._create()
    assert not await b._create()  # 409 AlreadyExists: lost the race
    assert len(api.requests_to("POST", "/apis/coordination.k8s.io")) == 2


async def test_a_stale_renewal_is_409_and_lost(api: KubeApiServer, client: AsyncClient) -> None:
    ca, cb = Clock(), Clock()
    a = SiteLease(client, "ops", "east", "a", T, ca)
    b = SiteLease(client, "ops", "east", "b", T, cb)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    cb.now += T.lease_duration
    # a renews between b's read and b's write: b's PUT names a stale version -> 409
    real_get = client.get

    async def get_then_a_renews(*args: object, **kwargs: object) -> object:
        found = await real_get(*args, **kwargs)  # type: ignore[arg-type]
        client.get = real_get  # type: ignore[method-assign]
        ca.now += 2
        assert await a.try_acquire_or_renew()
        return found

    client.get = get_then_a_renews  # type: ignore[method-assign,assignment]
    assert not await b.try_acquire_or_renew()
    assert not b.held()
    obj = api.object(LEASES, "ops", "powerplane-site-east")
    assert obj is not None and obj["spec"]["holderIdentity"] == "a"


async def test_release_empties_the_holder(api: KubeApiServer, client: AsyncClient) -> None:
    clock = Clock()
    a = SiteLease(client, "ops", "east", "a", T, clock)
    b = SiteLease(client, "ops", "east", "b", T, Clock())
    assert await a.try_acquire_or_renew()
    await a.release()
    assert not a.held()
    assert await b.try_acquire_or_renew()  # at once: no holder
