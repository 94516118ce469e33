"""The operator watches NodeMaintenance objects (the ``kubernetes`` store on kmock).

A maintenance created while the operator runs is reconciled because of a watch event, not a
poll or a resync (``--resync`` is an hour, and with a store to watch there is no poll); a
watch the server ends, or answers ``410 Gone``, is taken up again. Asserted on the
operator's own trace of events, scans and reconciles, in order, never on timing; waited
for at the operator's own changes (:func:`until`), never for a number of seconds.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator import request, write_config

from powerplane_kubernetes.operator import manifests as m
from powerplane_kubernetes.operator.run import Operator, OperatorOptions
from powerplane_kubernetes.testing.apiserver import KubeApiServer

WATCHES = "/apis/powerplane.io/v1alpha1/nodemaintenances"


def kube_store_config(tmp: Path, kubeconfig: Path) -> Path:
    config = write_config(tmp)
    raw = yaml.safe_load(config.read_text())
    raw["lifecycle"]["store"] = {"type": "kubernetes", "kubeconfig": str(kubeconfig),
                                 "namespace": "ops"}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


_CHANGED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
    weakref.WeakKeyDictionary())


def changed(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """Set whenever an operator of these tests, run on ``loop``, traces something, records
    a result or ends."""
    return _CHANGED.setdefault(loop, asyncio.Event())


class _Told:
    """Tells ``loop``'s :func:`changed` event, from whichever thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __call__(self) -> None:
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            changed(self.loop).set()
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(lambda: changed(self.loop).set())


class _Trace(collections.deque[tuple[str, str]]):
    def __init__(self, told: _Told) -> None:
        super().__init__(maxlen=10_000)
        self.told = told

    def append(self, entry: tuple[str, str]) -> None:
        super().append(entry)
        self.told()


class _Results(dict[str, str]):
    def __init__(self, told: _Told) -> None:
        super().__init__()
        self.told = told

    def __setitem__(self, name: str, result: str) -> None:
        super().__setitem__(name, result)
        self.told()


class Observed(Operator):
    """The operator, telling :func:`until` whenever what it waits on may have changed: its
    trace, its results, its end."""

    def __init__(self, options: OperatorOptions) -> None:
        super().__init__(options)
        self._told = _Told(asyncio.get_running_loop())
        self.trace = _Trace(self._told)
        self.results = _Results(self._told)
        _OBSERVED.add(self)

    async def run(self) -> int:
        try:
            return await super().run()
        finally:
            self._told()


_OBSERVED: weakref.WeakSet[Observed] = weakref.WeakSet()


def replica(config: Path, kubeconfig: Path) -> Operator:
    return Observed(OperatorOptions(
        config=str(config), kubeconfig=str(kubeconfig), namespace="ops", identity="r1",
        lease_duration=2, renew_deadline=1.5, retry_period=0.2, interval=0.05,
        resync=3600))


async def until(predicate: Any, what: str) -> None:
    """Wait until ``predicate()`` holds, checked again at every change an operator made by
    :func:`replica` tells (its trace, its results, its end), never against a clock: a
    loaded machine only makes it later. A hang is the test runner's timeout's to end; its
    report names ``what`` was awaited."""
    event = changed(asyncio.get_running_loop())
    try:
        while True:
            event.clear()
            if predicate():
                return
            await event.wait()
    except BaseException as stopped:
        stopped.add_note(f"while waiting for: {what}")
        for op in [o for o in list(_OBSERVED) if o._told.loop is asyncio.get_running_loop()]:
            stopped.add_note(f"{op.options.identity}'s last trace: {list(op.trace)[-30:]}")
        raise


def first_scan_cause(trace: list[tuple[str, str]], name: str) -> str:
    """The cause of the scan that started ``name``'s first reconcile."""
    first = trace.index(("reconcile", name))
    return next(cause for kind, cause in reversed(trace[:first]) if kind == "scan")


def settled(op: Operator, lists: int = 1) -> bool:
    """The lease held, the watch listed (``lists`` times), and a scan after both."""
    trace = list(op.trace)
    marks = [i for i, (k, c) in enumerate(trace) if k == "watch" and c.startswith("listed")]
    if ("lease", "east held") not in trace or len(marks) < lists:
        return False
    after = max(trace.index(("lease", "east held")), marks[-1])
    return any(k == "scan" for k, _ in trace[after:])


def grant_operator(api: KubeApiServer) -> None:
    """The client ``operator`` holds the operator's roles as printed (namespace ``ops``)."""
    api.grant("operator", m.cluster_role(), m.lease_role("ops"), m.operator_lock_role("ops"))


async def drive_one(op: Operator, config: Path) -> tuple[str, list[tuple[str, str]]]:
    name = await asyncio.to_thread(request, config)
    await until(lambda: op.results.get(name) == "done", f"{name} done")
    return name, list(op.trace)


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        yield server


@pytest.mark.slow
async def test_a_maintenance_created_while_running_is_picked_up_by_the_watch(
        tmp_path: Path, api: KubeApiServer) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    config = kube_store_config(tmp_path, kubeconfig)
    op = replica(config, kubeconfig)
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: settled(op), "the lease held, the watch listed, a scan after")
        name, trace = await drive_one(op, config)
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    cause = first_scan_cause(trace, name)
    assert cause.startswith("watch ") and cause.endswith(f" {name}"), (cause, trace[-40:])
    scans = [c for k, c in trace if k == "scan"]
    assert "resync" not in scans and "poll" not in scans
    assert api.requests_to("GET", WATCHES)  # the list and the watch


@pytest.mark.slow
@pytest.mark.parametrize("answers", [("end", "gone"), ("gone-http",)])
async def test_a_watch_the_server_ends_or_answers_gone_is_taken_up_again(
        tmp_path: Path, api: KubeApiServer, answers: tuple[str, ...]) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    config = kube_store_config(tmp_path, kubeconfig)
    api.answer_watches(*answers, resource="nodemaintenances")  # not the records' or ledger's
    op = replica(config, kubeconfig)
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: ("watch", "410 Gone") in op.trace and settled(op, lists=2),
                    "a 410, a second list, the lease held, a scan after")
        name, trace = await drive_one(op, config)
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    gone = trace.index(("watch", "410 Gone"))
    assert any(k == "watch" and c.startswith("listed at") for k, c in trace[gone:])
    cause = first_scan_cause(trace, name)
    assert cause.startswith("watch ") and cause.endswith(f" {name}"), (cause, trace[-40:])
    watches = [r for r in api.requests_to("GET", WATCHES) if r.query.get("watch") == "true"]
    assert len(watches) >= len(answers) + 1
    assert not [c for k, c in trace if k == "watch" and c == "failed"]


@pytest.mark.slow
async def test_watch_events_cost_no_list_the_scans_read_the_watch_cache(
        tmp_path: Path, api: KubeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from powerplane_kubernetes.store import KubernetesStore

    safety_reads = []  # the Reconciler's reads of the active phases its quorum rule counts
    active_phases = KubernetesStore.active_phases

    def counted(self: KubernetesStore) -> Any:
        if op.lifecycle is not None and self is op.lifecycle.store:  # not the requester's
            safety_reads.append(1)
        return active_phases(self)
    monkeypatch.setattr(KubernetesStore, "active_phases", counted)
    grant_operator(api)
    api.grant("requester", m.maintainer_role(), m.maintainer_lock_role("ops"),
              m.people_roles()[0])  # powerplane-admin: the verbs the admission checks
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", client="operator")
    config = kube_store_config(tmp_path, kubeconfig)
    requester = tmp_path / "requester.yaml"  # the requests counted apart from the operator's
    requester.write_text(config.read_text().replace(
        str(kubeconfig), str(api.write_kubeconfig(tmp_path / "requester-kc",
                                                  client="requester"))))
    op = replica(config, kubeconfig)
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: settled(op), "the lease held, the watch listed, a scan after")
        before, mark = api.request_counts(), len(op.trace)
        safety_reads.clear()
        names = []
        for _ in range(3):
            name = await asyncio.to_thread(request, requester)
            await until(lambda n=name: op.results.get(n) == "done",  # type: ignore[misc]
                        f"{name} done")
            names.append(name)
        counts = api.request_counts() - before
        trace = list(op.trace)[mark:]
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    events = [c for k, c in trace if k == "watch"]
    scans = [c for k, c in trace if k == "scan"]
    assert len(events) >= 3 * len(names) and len(scans) >= len(names), trace
    assert "resync" not in scans
    lists = counts["operator", "list", "powerplane.io/v1alpha1/nodemaintenances"]
    # no list at all: no scan lists (before: one per scan, a scan at every event), and the
    # Reconciler's safety reads (the active phases its quorum rule counts) are answered by
    # the watch's cache (before: a list each)
    assert safety_reads and lists == 0, (lists, len(safety_reads), len(scans))
    for name in names:  # each still reconciled through the store (reads and writes)
        assert api.object("powerplane.io/v1alpha1/nodemaintenances", None, name)[
            "status"]["phase"] == "Complete"  # type: ignore[index]
    assert counts["operator", "get", "powerplane.io/v1alpha1/nodemaintenances"] > 0
    assert counts["operator", "update", "powerplane.io/v1alpha1/nodemaintenances/status"] > 0


@pytest.mark.slow
async def test_a_resync_still_lists_the_store(tmp_path: Path, api: KubeApiServer) -> None:
    grant_operator(api)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", client="operator")
    config = kube_store_config(tmp_path, kubeconfig)
    op = Observed(OperatorOptions(
        config=str(config), kubeconfig=str(kubeconfig), namespace="ops", identity="r1",
        lease_duration=2, renew_deadline=1.5, retry_period=0.2, interval=0.05, resync=0.3))
    task = asyncio.create_task(op.run())
    try:
        await until(lambda: settled(op), "the lease held, the watch listed, a scan after")
        before, mark = api.request_counts(), len(op.trace)
        await until(lambda: [c for k, c in list(op.trace)[mark:] if k == "scan"].count(
            "resync") >= 2, "two resyncs")
    finally:
        op._stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    counts = api.request_counts() - before
    resyncs = [c for k, c in list(op.trace)[mark:] if k == "scan" and c == "resync"]
    # no maintenance, so no Reconciler read: each list is a resync's (one each)
    assert counts["operator", "list", "powerplane.io/v1alpha1/nodemaintenances"] == len(resyncs)
