"""A long-lived requester fed by a watch (:func:`powerplane_kubernetes.watch.following`): its
requests list nothing (the ``POST`` of the object and of its request record each), its
guard answers from the watch's view as a list would (the same refusal, with the numbers),
and once the watch stops the store lists again."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from pathlib import Path
from typing import Any

import pytest
from test_admission import by_hand, seed_nodes, write_config

from powerplane import PowerHost, load_config
from powerplane.lifecycle import AuditRecord, Lifecycle, MaintenanceRefused, NodeMaintenance, Phase
from powerplane.lifecycle.audit import Action
from powerplane.lifecycle.ceremony import Ceremony
from powerplane_kubernetes.audit import request_record_name
from powerplane_kubernetes.client import KubeApi
from powerplane_kubernetes.crd import AUDIT_PLURAL, GROUP, PLURAL, VERSION
from powerplane_kubernetes.operator.manifests import (
    cluster_role,
    maintainer_lock_role,
    maintainer_role,
    operator_lock_role,
    people_roles,
)
from powerplane_kubernetes.store import KubernetesStore
from powerplane_kubernetes.testing.apiserver import KubeApiServer
from powerplane_kubernetes.watch import MaintenanceWatch, following

NM = f"{GROUP}/{VERSION}/{PLURAL}"
STORE_NS = "powerplane-system"
"""``lifecycle.store.namespace`` of ``test_admission.write_config`` (the default)."""


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


def requester_config(api: KubeApiServer, tmp_path: Path) -> Path:
    """The seeded cluster's deployment file, its kubeconfig the client ``requester``'s,
    who holds ``powerplane-maintainer``, its locks Role and ``powerplane-admin`` (the verbs
    the admission policy checks), as printed."""
    seed_nodes(api)
    api.grant("requester", maintainer_role(), maintainer_lock_role(STORE_NS),
              people_roles()[0])
    return write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig",
                                                       client="requester"))


def mine(api: KubeApiServer, before: collections.Counter[tuple[str, str, str]],
         ) -> collections.Counter[tuple[str, str]]:
    """The requester's requests since ``before``, by ``(verb, resource)``."""
    return collections.Counter({(verb, what): n for (client, verb, what), n
                                in (api.request_counts() - before).items()
                                if client == "requester"})


def granted(counts: collections.Counter[tuple[str, str]]) -> None:
    """Every request is one the roles ``powerplane-maintainer`` and
    ``powerplane-maintainer-locks`` grant (its SelfSubjectReview is every authenticated
    user's)."""
    rules = {(group, resource, verb)
             for rule in maintainer_role()["rules"] + maintainer_lock_role("ns")["rules"]
             for group in rule["apiGroups"] for resource in rule["resources"]
             for verb in rule["verbs"]}
    for verb, what in counts:
        parts = what.split("/")  # group/version/plural, or v1/plural (the core group)
        group, resource = ("", parts[1]) if len(parts) == 2 else (parts[0], parts[2])
        if group != "authentication.k8s.io":
            assert (group, resource, verb) in rules, (verb, what)


async def listed(watch: MaintenanceWatch) -> None:
    async with asyncio.timeout(30):
        while watch.active_view() is None:
            await asyncio.sleep(0.01)


async def delivered(store: KubernetesStore, name: str, phase: Phase) -> None:
    async with asyncio.timeout(30):
        while (name, phase) not in {(n, p) for n, _, p in store.active_phases()}:
            await asyncio.sleep(0.01)


def ceremony(node: str) -> Ceremony:
    return Ceremony(reason="replace the PSU in slot 2", confirm_node=node, ack_preflight=True)


def test_a_watched_requester_posts_two_per_request_and_lists_once(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    config = requester_config(api, tmp_path)
    seen: list[tuple[str, str]] = []

    def told(kind: str, m: NodeMaintenance | None) -> None:
        if m is not None:
            seen.append((kind, m.name))

    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            assert isinstance(lc.store, KubernetesStore)
            before = api.request_counts()
            try:
                async with following(lc.store, on_object=told) as watch:
                    await listed(watch)
                    assert lc.store.watched
                    made = [await lc.request(n, "reboot", ceremony(n)) for n in ("w1", "w2")]
                    for m in made:
                        await delivered(lc.store, m.name, Phase.PENDING)
                    counts = mine(api, before)
                    assert counts[("create", NM)] == 2
                    assert counts[("create", f"{GROUP}/{VERSION}/maintenanceaudits")] == 2
                    assert counts[("list", NM)] == 1  # the watch's own, none per request
                    assert counts[("watch", NM)] == 1
                    assert [s for s in seen if s[0] == "ADDED"] == [
                        ("ADDED", m.name) for m in made]
                    granted(mine(api, before))
                # stopped: the store no longer answers from the watch, it lists again
                assert not lc.store.watched and lc.store.active_view is None
                before = api.request_counts()
                assert {n for _, n, _ in lc.store.active_phases()} == {"w1", "w2"}
                assert mine(api, before)[("list", NM)] == 1
            finally:
                lc.close()

    asyncio.run(go())


def test_the_watch_s_view_refuses_below_quorum_as_a_list_would(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    """cp1 is taken (its cordon admitted and done): a request for cp2 would leave one of
    three members, refused at once from the watch's view, with the numbers, and no list."""
    config = requester_config(api, tmp_path)
    # the requester admits the first request itself (as `maintenance run`: the operator's)
    api.grant("requester", cluster_role(), operator_lock_role(STORE_NS))

    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            assert isinstance(lc.store, KubernetesStore)
            try:
                async with following(lc.store) as watch:
                    await listed(watch)
                    first = await lc.request("cp1", "cordon", Ceremony(
                        reason="replace the PSU in slot 2", confirm_node="cp1",
                        ack_preflight=True, hazard_reason="the PSU is failing; planned"))
                    await asyncio.wait_for(lc.run(until_idle=True), 60)
                    await delivered(lc.store, first.name, Phase.CORDONED)
                    before = api.request_counts()
                    with pytest.raises(MaintenanceRefused) as refused:
                        await lc.request("cp2", "reboot", ceremony("cp2"))
                    assert refused.value.numbers is not None
                    assert refused.value.numbers.quorum == 2
                    assert "quorum" in str(refused.value)
                    counts = mine(api, before)
                    assert counts[("list", NM)] == 0
                    assert counts[("create", NM)] == 0  # refused before anything was sent
            finally:
                lc.close()

    asyncio.run(go())


def test_an_executor_writes_no_request_record_its_watch_saw_created(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    """The executor's watch of the records: a request's record its creator wrote is not
    written again; the record of a request made by hand (none written) is, once."""
    config = requester_config(api, tmp_path)
    (tmp_path / "x").mkdir()
    api.grant("executor", cluster_role(), operator_lock_role(STORE_NS))  # the operator's
    executor_config = write_config(tmp_path / "x", api.write_kubeconfig(
        tmp_path / "executor-kc", client="executor"))
    told: list[str] = []

    def records_posted(before: collections.Counter[tuple[str, str, str]]) -> int:
        return sum(n for (client, verb, what), n in (api.request_counts() - before).items()
                   if client == "executor" and verb == "create"
                   and what.endswith("/maintenanceaudits"))

    async def go() -> None:
        async with PowerHost(load_config(config)) as host, \
                PowerHost(load_config(executor_config)) as executor:
            lc, xc = Lifecycle.for_host(host), Lifecycle.for_host(executor)
            store = xc.store
            assert isinstance(store, KubernetesStore)
            api_access = KubeApi(store.access, store.config_dir, where="test")
            try:
                watch = MaintenanceWatch(api_access.client(), store, records=True,
                                         on_event=lambda what, wake: told.append(what))
                task = asyncio.create_task(watch.run())
                await listed(watch)
                async with asyncio.timeout(30):  # the records' watch is open
                    while not any(what == "watch" and key.endswith("/maintenanceaudits")
                                  for (_, what, key) in api.request_counts()):
                        await asyncio.sleep(0.01)
                requested = await lc.request("w2", "cordon", ceremony("w2"))
                by_hand(api, "w1-by-hand", {"node": "w1", "intent": "cordon",
                                            "reason": "replace the PSU", "requestedBy": "erin"})
                async with asyncio.timeout(30):
                    while f"record ADDED {request_record_name(requested.name)}" not in told \
                            or "ADDED w1-by-hand" not in told:
                        await asyncio.sleep(0.01)
                hand = store.get("w1-by-hand")
                for m, posts in ((requested, 0), (hand, 1)):
                    before = api.request_counts()
                    record = AuditRecord(actor="erin", action=Action.CORDON,
                                         reason="replace the PSU in slot 2", node=m.node,
                                         maintenance=m.name, at=m.created_at)
                    await asyncio.to_thread(store.record_request, m, record)
                    assert records_posted(before) == posts, m.name
                task.cancel()  # as following() does
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            finally:
                lc.close()
                xc.close()
                await api_access.aclose()
        names = [r["metadata"]["name"] for r
                 in api.objects(f"{GROUP}/{VERSION}/{AUDIT_PLURAL}")]
        assert sorted(names) == sorted([request_record_name(requested.name),
                                        request_record_name("w1-by-hand")])

    asyncio.run(go())


def test_a_failed_watch_of_the_records_is_taken_up_again(
    api: KubeApiServer, tmp_path: Path,
) -> None:
    """The records' watch answered 500, then dropped: it backs off and watches again, and
    the records created meanwhile are seen (the maintenances' watch is not disturbed)."""
    config = requester_config(api, tmp_path)
    api.grant("requester", cluster_role())  # the records' watch is the operator's
    audits = f"{GROUP}/{VERSION}/{AUDIT_PLURAL}"
    api.fail_requests("watch", audits, "500", "disconnect")
    told: list[str] = []

    async def go() -> None:
        async with PowerHost(load_config(config)) as host:
            lc = Lifecycle.for_host(host)
            store = lc.store
            assert isinstance(store, KubernetesStore)
            access = KubeApi(store.access, store.config_dir, where="test")
            watch = MaintenanceWatch(access.client(), store, records=True,
                                     on_event=lambda what, wake: told.append(what))
            task = asyncio.create_task(watch.run())
            try:
                await listed(watch)
                made = await lc.request("w1", "cordon", ceremony("w1"))
                async with asyncio.timeout(30):
                    while f"record ADDED {request_record_name(made.name)}" not in told:
                        await asyncio.sleep(0.01)
                assert api.faults_served == [f"500 watch {audits}",
                                             f"disconnect watch {audits}"]
                assert "failed" not in told  # the maintenances' watch went on
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                lc.close()
                await access.aclose()

    asyncio.run(go())
