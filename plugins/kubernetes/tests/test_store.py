"""The ``kubernetes`` store against the kmock API server: what it writes, how it reads back,
how concurrent writers and creators are told apart, and the audit trail that outlives the
maintenance.

Every ``NodeMaintenance`` body the store sends is checked against the CRD's own
``openAPIV3Schema`` (``jsonschema``, unknown fields refused, where a real API server would
prune them silently); the API server here also prunes and validates every write, and
nothing may have been pruned. kmock runs no CEL: the spec's ``self == oldSelf`` is emulated
by :class:`~powerplane_kubernetes.testing.apiserver.KubeApiServer`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from powerplane.authority.identity import Identity
from powerplane.lifecycle import (
    AlreadyActive,
    AuditRecord,
    ConcurrentChange,
    NotFound,
    StoreConflict,
    StoreError,
)
from powerplane.lifecycle.audit import Action
from powerplane.lifecycle.model import (
    AbandonRequest,
    Condition,
    ConditionStatus,
    Dispatch,
    DispatchOutcome,
    Evidence,
    Intent,
    MaintenanceSpec,
    NodeMaintenance,
    Phase,
    Preflight,
    QuorumNumbers,
    Resolution,
    ReturnRequest,
    Transition,
)
from powerplane_kubernetes.audit import record_of
from powerplane_kubernetes.config import ApiAccess
from powerplane_kubernetes.crd import (
    ACTIVE_LABEL,
    NODE_LABEL,
    SPEC_IMMUTABLE,
    audit_crd_manifest,
    crd_manifest,
)
from powerplane_kubernetes.store import (
    KubernetesStore,
    KubernetesStoreError,
    NodeMaintenanceResource,
    lock_name,
)
from powerplane_kubernetes.testing.apiserver import (
    ADMIN_USER,
    KubeApiServer,
    openapi_to_jsonschema,
)
from powerplane_kubernetes.testing.schemas import KUBERNETES_VERSION

NM = "/apis/powerplane.io/v1alpha1/nodemaintenances"
AUDIT = "/apis/powerplane.io/v1alpha1/maintenanceaudits"
NS = "powerplane-system"
LEASES = "coordination.k8s.io/v1/leases"
T0 = dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)


def as_admin(api: KubeApiServer) -> dict[str, str]:
    """kubectl with the cluster admin's kubeconfig."""
    return {"Authorization": f"Bearer {api.admin_token}"}


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    # the store's own tests write every field of a maintenance through one client (the
    # cluster admin's), whoever the fields name: a cluster the manifests' admission policy
    # was not applied to (it binds requestedBy and each actor to the writer; the tests of
    # the policy, of the CLI and of the least privileges run it)
    with KubeApiServer(admission=False) as server:
        yield server


@pytest.fixture
def kubeconfig(api: KubeApiServer, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig")


def open_store(kubeconfig: Path, *, create: bool = True) -> KubernetesStore:
    access = ApiAccess(kubeconfig=kubeconfig.name, timeouts={"connect_s": 2, "read_s": 10})
    from powerplane.lifecycle.crash import crashpoint

    return KubernetesStore(access, kubeconfig.parent, namespace=NS, create=create,
                           crashpoint=crashpoint)


@pytest.fixture
def store(kubeconfig: Path) -> Iterator[KubernetesStore]:
    s = open_store(kubeconfig)
    yield s
    s.close()


def maintenance(node: str = "n1", name: str | None = None,
                intent: Intent = Intent.REBOOT) -> NodeMaintenance:
    return NodeMaintenance(
        name=name or f"{node}-{intent.value}-20250301120000-abc123",
        spec=MaintenanceSpec(
            node=node, intent=intent, reason="kernel update", requested_by="alice",
            preflight=Preflight(pods=["default/web-1"], pdbs=["default/web-pdb"],
                                quorum=QuorumNumbers(members=3, ready=3, quorum=2, margin=1),
                                power={"verb": "reboot", "channel": "bmc", "graceful": True},
                                storage="longhorn: evacuate", taken_at=T0)),
        created_at=T0,
    )


def record(m: NodeMaintenance, action: Action = Action.REBOOT, *, reason: str = "kernel",
           at: dt.datetime = T0) -> AuditRecord:
    return AuditRecord(actor="alice", action=action, reason=reason, node=m.node,
                       maintenance=m.name, at=at)


def fill(m: NodeMaintenance) -> None:
    """Every kind of status and request field, with nulls where the model allows them."""
    m.status.phase = Phase.REBOOTING
    m.status.conditions["Cordoned"] = Condition(
        type="Cordoned", status=ConditionStatus.TRUE, reason="Cordoned", message="done",
        lastTransitionTime=T0)
    m.status.dispatches.append(Dispatch(
        verb="reboot", channel=None, attemptId="a1", recordedAt=T0, runner="h/1/x",
        outcome=DispatchOutcome.UNKNOWN, detail="no answer",
        before=Evidence(bootMarker="boot-1", bootMarkerSource="cluster", power="on",
                        powerSource="bmc", seesPower=True, takenAt=T0)))
    m.status.refusal = QuorumNumbers(members=3, ready=2, quorum=2, margin=0, member=True)
    m.status.history.append(Transition(**{"from": None, "to": Phase.REQUESTED, "at": T0}))
    m.status.history.append(Transition(**{"from": Phase.REQUESTED, "to": Phase.CORDONED,
                                          "at": T0, "why": "cordoned"}))
    m.status.powered_off_at = T0
    m.status.hazard = True
    m.status.drain_started_at = T0
    m.spec.return_request = ReturnRequest(actor="bob", reason="done", machineConfirmed=True,
                                          at=T0)
    m.spec.abandon = AbandonRequest(actor="carol", reason="stop", at=T0)
    m.spec.resolutions.append(Resolution(actor="dave", reason="saw it", applied=True,
                                         attemptId="a1", at=T0))


def strict_validator(crd: dict[str, Any]) -> jsonschema.Draft7Validator:
    schema = openapi_to_jsonschema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def written(api: KubeApiServer, prefix: str = NM) -> list[dict[str, Any]]:
    return [r.body for r in api.requests
            if r.method in ("POST", "PUT") and r.path.startswith(prefix)
            and isinstance(r.body, dict)]


def check_written(api: KubeApiServer) -> int:
    """Every NodeMaintenance and MaintenanceAudit body validates strictly; none was pruned."""
    n = 0
    for crd, prefix in ((crd_manifest(), NM), (audit_crd_manifest(), AUDIT)):
        validator = strict_validator(crd)
        for body in written(api, prefix):
            validator.validate(body)
            n += 1
    assert api.pruned == []
    return n


# -- round trip ------------------------------------------------------------------------------
def test_create_get_update_round_trip_keeps_every_field(
        api: KubeApiServer, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m, record(m))
    assert m.resource_version > 0
    got = store.get(m.name)
    assert got == m
    fill(got)
    store.update(got)
    again = store.get(m.name)
    assert again == got
    assert again.resource_version == got.resource_version > m.resource_version
    obj = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert obj is not None
    assert obj["spec"]["node"] == "n1" and obj["spec"]["requestedBy"] == "alice"
    assert set(obj["spec"]) == {"node", "intent", "reason", "requestedBy", "requesterGroups",
                                "requestedVia", "onBehalfOf", "preflight", "ackPreflight",
                                "confirmNode", "hazardReason"}
    assert obj["requests"]["returnRequest"]["actor"] == "bob"
    assert obj["status"]["phase"] == "Rebooting"
    assert obj["status"]["dispatches"][0]["channel"] is None
    assert obj["metadata"]["labels"] == {NODE_LABEL: "n1", ACTIVE_LABEL: "true"}
    assert obj["metadata"]["resourceVersion"] == str(again.resource_version)
    assert check_written(api) >= 4


def test_reads_find_all_active_and_latest(store: KubernetesStore) -> None:
    a = maintenance("n1", "n1-cordon-1", Intent.CORDON)
    store.create(a)
    b = maintenance("n2", "n2-drain-1", Intent.DRAIN)
    b.created_at = T0 + dt.timedelta(seconds=1)
    store.create(b)
    assert [m.name for m in store.all()] == ["n1-cordon-1", "n2-drain-1"]
    assert sorted(store.active_phases()) == [("n1-cordon-1", "n1", Phase.REQUESTED),
                                             ("n2-drain-1", "n2", Phase.REQUESTED)]
    assert store.find("n2").name == "n2-drain-1"
    assert store.find("n1-cordon-1").node == "n1"
    done = store.get("n1-cordon-1")
    done.status.phase = Phase.COMPLETE
    store.update(done)
    assert store.active_for("n1") is None
    latest = store.latest_for("n1")
    assert latest is not None and latest.phase is Phase.COMPLETE
    assert [m.name for m in store.active()] == ["n2-drain-1"]
    assert [m.name for m in store.all(active_only=True)] == ["n2-drain-1"]
    assert len(store.all()) == 2
    with pytest.raises(NotFound):
        store.find("n9")
    with pytest.raises(NotFound):
        store.get("nope")


def test_terminal_maintenances_are_labelled_inactive_after_their_status(
        api: KubeApiServer, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m)
    got = store.get(m.name)
    got.status.phase = Phase.FAILED
    store.update(got)
    obj = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert obj is not None and obj["metadata"]["labels"][ACTIVE_LABEL] == "false"
    puts = [r for r in api.requests_to("PUT", NM)]
    # the status first (it decides), then the label through the main resource
    assert [r.path.endswith("/status") for r in puts][-2:] == [True, False]
    assert store.get(m.name).resource_version == got.resource_version


# -- optimistic concurrency ------------------------------------------------------------------
def test_a_stale_resource_version_is_a_conflict_and_a_re_read_succeeds(
        api: KubeApiServer, kubeconfig: Path, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m)
    other = open_store(kubeconfig)  # another runner, another process's view
    try:
        mine = store.get(m.name)
        theirs = other.get(m.name)
        theirs.status.last_error = "theirs"
        other.update(theirs)
        mine.status.last_error = "mine"
        before = mine.resource_version
        with pytest.raises(StoreConflict):
            store.update(mine)
        assert mine.resource_version == before  # restored, as the SQLite store does
        assert any(r.path.endswith("/status") for r in api.requests_to("PUT", NM))
        fresh = store.get(m.name)  # the reconciler's re-read
        assert fresh.status.last_error == "theirs"
        fresh.status.last_error = "mine"
        store.update(fresh)
        assert other.get(m.name).status.last_error == "mine"
    finally:
        other.close()


def test_a_watched_store_reads_its_newest_copy_and_reads_again_after_a_conflict(
        api: KubeApiServer, kubeconfig: Path, store: KubernetesStore) -> None:
    """With an executor's watch feeding it, a read costs no request (its own last write, or
    the watch's newer copy); a write that loses a race (409) makes the next read a GET."""
    m = maintenance()
    store.create(m)
    store.watched = True
    gets = lambda: len(api.requests_to("GET", f"{NM}/{m.name}"))  # noqa: E731
    before = gets()
    mine = store.get(m.name)
    mine.status.last_error = "mine"
    store.update(mine)
    assert store.get(m.name).status.last_error == "mine"
    assert gets() == before  # both answered from the copy the store wrote
    other = open_store(kubeconfig)  # another runner writes; the watch delivers it
    try:
        theirs = other.get(m.name)
        theirs.status.last_error = "theirs"
        other.update(theirs)
        newer = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
        assert newer is not None
        before = gets()  # the other runner's read counted
        stale = store.get(m.name)  # the watch has not delivered it yet: the old copy
        assert stale.status.last_error == "mine" and gets() == before
        stale.status.last_error = "late"
        with pytest.raises(StoreConflict):
            store.update(stale)  # the API server tells: nothing is overwritten
        fresh = store.get(m.name)  # read again, by a GET
        assert gets() == before + 1 and fresh.status.last_error == "theirs"
        store.observe("MODIFIED", newer)  # an older copy than the read one changes nothing
        assert store.get(m.name).resource_version == fresh.resource_version
        store.observe("DELETED", newer)
        store.get(m.name)
        assert gets() == before + 2  # a deleted object's copy is dropped
    finally:
        other.close()


def test_a_conflict_with_a_cached_read_is_told_by_the_api_server(
        api: KubeApiServer, store: KubernetesStore) -> None:
    """The store's cache never hides a write: the 409 comes from the API server."""
    m = maintenance()
    store.create(m)
    mine = store.get(m.name)
    obj = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert obj is not None
    # someone else (kubectl annotate) changes the object behind the store's back
    obj["metadata"]["annotations"]["example.com/note"] = "y"
    import httpx2

    with httpx2.Client(base_url=api.url, headers=as_admin(api)) as http:
        assert http.put(f"{NM}/{m.name}", json=obj).status_code == 200
    mine.status.last_error = "stale"
    with pytest.raises(StoreConflict):
        store.update(mine)
    assert [r for r in api.requests if r.method == "PUT"][-1].path.endswith("/status")
    # the other writer's annotation is kept by the store's next main-resource write
    fresh = store.get(m.name)
    fresh.spec.abandon = AbandonRequest(actor="carol", reason="stop", at=T0)
    store.update(fresh)
    kept = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert kept is not None and kept["metadata"]["annotations"]["example.com/note"] == "y"


# -- one active maintenance per node ---------------------------------------------------------
def test_two_concurrent_creates_for_one_node_give_exactly_one_already_active(
        api: KubeApiServer, kubeconfig: Path) -> None:
    stores = [open_store(kubeconfig) for _ in range(2)]
    try:
        for round_ in range(8):
            node = f"r{round_}"
            barrier = threading.Barrier(2)
            results: list[str] = []

            def create(i: int, node: str = node, barrier: threading.Barrier = barrier,
                       results: list[str] = results) -> None:
                m = maintenance(node, f"{node}-reboot-{i}")
                barrier.wait(timeout=10)
                try:
                    stores[i].create(m)
                    results.append("created")
                except AlreadyActive as exc:
                    assert exc.node == node
                    results.append("already-active")

            threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            assert sorted(results) == ["already-active", "created"], (node, results)
            active = [m for m in stores[0].all() if m.node == node]
            assert len(active) == 1 and not active[0].phase.terminal
            lease = api.object(LEASES, NS, lock_name(node))
            assert lease is not None and lease["spec"]["holderIdentity"] == active[0].name
            # the loser left no object behind (pending ones are deleted)
            names = {o["metadata"]["name"] for o in
                     api.objects("powerplane.io/v1alpha1/nodemaintenances")
                     if o["spec"]["node"] == node}
            assert names == {active[0].name}
    finally:
        for s in stores:
            s.close()


def pending(node: str, name: str) -> NodeMaintenance:
    """A request as core's lifecycle writes it here: ``Pending`` until the executor admits it."""
    m = maintenance(node, name)
    m.status.phase = Phase.PENDING
    return m


def test_an_admission_in_progress_holds_the_node(api: KubeApiServer, kubeconfig: Path,
                                                 store: KubernetesStore) -> None:
    """An admission between taking the lock and writing the status holds the node: another
    admission (or a creator of an admitted maintenance) is AlreadyActive naming it, not let
    through because it is still ``Pending``."""
    first = store.create(pending("n1", "n1-reboot-first"))
    store.lock(first)
    held = store.active_for("n1")  # listed, still pending: its status is not written yet
    assert held is not None and (held.name, held.phase) == (first.name, Phase.PENDING)
    other = open_store(kubeconfig)
    try:
        second = other.create(pending("n1", "n1-reboot-second"))  # a request holds nothing
        with pytest.raises(AlreadyActive, match="n1-reboot-first"):
            other.lock(second)
        with pytest.raises(AlreadyActive, match="n1-reboot-first"):
            other.create(maintenance("n1", "n1-reboot-third"))
    finally:
        other.close()
    assert api.object("powerplane.io/v1alpha1/nodemaintenances", None,
                      "n1-reboot-third") is None
    lease = api.object(LEASES, NS, lock_name("n1"))
    assert lease is not None and lease["spec"]["holderIdentity"] == first.name
    store.lock(first)  # its own admission, taken up again: still its lock


def test_a_finished_or_deleted_holder_is_replaced(api: KubeApiServer,
                                                  store: KubernetesStore) -> None:
    old = maintenance("n1", "n1-reboot-old")
    store.create(old)
    with pytest.raises(AlreadyActive, match="n1-reboot-old"):
        store.create(maintenance("n1", "n1-reboot-new"))
    done = store.get(old.name)
    done.status.phase = Phase.COMPLETE
    store.update(done)
    second = maintenance("n1", "n1-reboot-second")
    store.create(second)
    lease = api.object(LEASES, NS, lock_name("n1"))
    assert lease is not None and lease["spec"]["holderIdentity"] == "n1-reboot-second"
    # a holder deleted (kubectl delete) is not dropped: its deletion is an abandon, which
    # runs first (its finalizer keeps it), and the node stays held until it has ended
    store.client.delete(NodeMaintenanceResource, second.name)
    held = store.get(second.name)
    assert held.spec.abandon is not None and held.spec.abandon.actor == "(deletion)"
    with pytest.raises(AlreadyActive, match="n1-reboot-second"):
        store.create(maintenance("n1", "n1-reboot-early"))
    held.status.phase = Phase.COMPLETE  # the executor has taken it back through Returning
    store.update(held)
    assert api.object("powerplane.io/v1alpha1/nodemaintenances", None, second.name) is None
    third = maintenance("n1", "n1-reboot-third")
    store.create(third)
    assert store.active_for("n1") is not None
    assert store.active_for("n1").name == "n1-reboot-third"  # type: ignore[union-attr]


def _pending_holder(store: KubernetesStore, name: str, *, at: dt.datetime) -> NodeMaintenance:
    """A request whose admission took the lock of ``n1`` at ``at`` and stopped before its
    status (crash point ``admission:locked``)."""
    first = store.create(pending("n1", name))
    clock = store.clock
    store.clock = lambda: at
    try:
        store.lock(first)
    finally:
        store.clock = clock
    return first


def test_a_dead_admission_s_lock_blocks_the_node_until_it_expires_then_is_refused(
        api: KubeApiServer, kubeconfig: Path) -> None:
    """An admission that stopped between the lock and its status (its lock older than its
    duration) no longer blocks the node: the next admission takes the lock; within the
    duration it still blocks. The request it was admitting is kept (marked, not deleted)
    and, admitted again, is refused naming the lock's new holder: never lost."""
    now = dt.datetime.now(dt.UTC)
    first = open_store(kubeconfig)
    second = open_store(kubeconfig)
    try:
        dead = _pending_holder(first, "n1-reboot-dead", at=now - dt.timedelta(seconds=10))
        lease = api.object(LEASES, NS, lock_name("n1"))
        assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 30
        early = second.create(pending("n1", "n1-reboot-early"))
        with pytest.raises(AlreadyActive, match="n1-reboot-dead"):  # 10 s of 30: live
            second.lock(early)
        second.clock = lambda: now + dt.timedelta(seconds=25)  # 35 s since: expired
        made = second.create(pending("n1", "n1-reboot-next"))
        second.lock(made)
        lease = api.object(LEASES, NS, lock_name("n1"))
        assert lease is not None and lease["spec"]["holderIdentity"] == "n1-reboot-next"
        assert lease["spec"]["leaseTransitions"] == 1
        kept = api.object("powerplane.io/v1alpha1/nodemaintenances", None, dead.name)
        assert kept is not None and "status" not in kept  # still pending: not lost
        assert kept["metadata"]["annotations"]["powerplane.io/lock-taken-by"] == made.name
        assert "powerplane.io/superseded-by" not in kept["metadata"]["annotations"]
        assert [m.name for m in second.active()] == [dead.name, early.name, made.name]
        # admitted again, the dead admission's request meets the new holder: refused
        with pytest.raises(AlreadyActive, match="n1-reboot-next"):
            first.lock(first.get(dead.name))
    finally:
        first.close()
        second.close()


def test_a_slow_admission_whose_lock_was_taken_over_writes_no_status(
        api: KubeApiServer, kubeconfig: Path) -> None:
    """The takeover is decided by the versions, not the clocks: an admission still alive
    when its expired lock is taken over gets a conflict on its status and shows nothing
    (read again, it meets the new holder); a creator of an admitted maintenance likewise
    gives up without showing."""
    slow = open_store(kubeconfig)
    taker = open_store(kubeconfig)
    try:
        slow.clock = lambda: dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        m = slow.create(pending("n1", "n1-reboot-slow"))
        slow.lock(m)  # the lock at once stale by the slow clock
        won = taker.create(pending("n1", "n1-reboot-taker"))
        taker.lock(won)  # the taker passes while the slow admission is between lock and status
        m.status.phase = Phase.REQUESTED
        with pytest.raises(StoreConflict):
            slow.update(m)
        again = slow.get(m.name)
        assert again.phase is Phase.PENDING
        with pytest.raises(AlreadyActive, match="n1-reboot-taker"):
            slow.lock(again)
        # the same, for a maintenance created already admitted (object, lock, status)
        taken: list[str] = []

        def take_over(name: str) -> None:
            if name == "store:locked" and not taken:
                taken.append("")  # the taker passes this point too
                taken[0] = taker.create(maintenance("n2", "n2-reboot-taker")).name

        from powerplane.lifecycle import crash

        crash.set_hook(take_over)
        try:
            with pytest.raises(ConcurrentChange, match="taken over"):
                slow.create(maintenance("n2", "n2-reboot-slow"))
        finally:
            crash.set_hook(None)
        assert taken == ["n2-reboot-taker"]
        assert [m.name for m in taker.all() if m.node == "n2"] == ["n2-reboot-taker"]
        assert api.object("powerplane.io/v1alpha1/nodemaintenances", None,
                          "n2-reboot-slow") is None
    finally:
        slow.close()
        taker.close()


def test_a_name_taken_is_a_concurrent_change_or_already_active(store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m)
    with pytest.raises(AlreadyActive):
        store.create(maintenance())  # same name, same node, still active


# -- the spec and the status subresource -----------------------------------------------------
def test_the_spec_is_immutable(api: KubeApiServer, store: KubernetesStore) -> None:
    """The store writes the spec as its creator wrote it (a change in memory is never sent);
    a client that sends a changed spec is refused by the API server (the CEL rule)."""
    m = maintenance()
    store.create(m)
    got = store.get(m.name)
    got.spec.reason = "another reason"
    got.status.phase = Phase.CORDONED
    store.update(got)
    kept = store.get(m.name)
    assert (kept.spec.reason, kept.phase) == ("kernel update", Phase.CORDONED)
    obj = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert obj is not None
    changed = {**obj, "spec": {**obj["spec"], "reason": "another reason"}}
    with pytest.raises(KubernetesStoreError) as caught, store._errors("writing it by hand"):
        store.client.replace(NodeMaintenanceResource(**changed))
    assert isinstance(caught.value, StoreError) and caught.value.exit_code == 1
    text = str(caught.value)
    assert "HTTP 422 Invalid" in text and "spec: Invalid value" in text
    assert SPEC_IMMUTABLE in text
    assert store.get(m.name).spec.reason == "kernel update"


def test_status_is_written_only_through_the_status_subresource(
        api: KubeApiServer, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m)
    got = store.get(m.name)
    got.status.phase = Phase.CORDONED
    got.spec.return_request = ReturnRequest(actor="bob", reason="back", at=T0)
    store.update(got)
    main = [r for r in api.requests if r.path.startswith(NM) and r.method in ("POST", "PUT")
            and not r.path.endswith("/status")]
    status = [r for r in api.requests_to("PUT", NM) if r.path.endswith("/status")]
    assert [r.method for r in main] == ["POST", "PUT"]  # create; the return request
    assert all("status" not in r.body for r in main)
    assert len(status) == 2 and all("status" in r.body for r in status)
    # and the API server ignores a status sent to the main resource, as a real one does
    obj = api.object("powerplane.io/v1alpha1/nodemaintenances", None, m.name)
    assert obj is not None
    obj["status"]["phase"] = "Complete"
    import httpx2

    with httpx2.Client(base_url=api.url, headers=as_admin(api)) as http:
        answer = http.put(f"{NM}/{m.name}", json=obj)
    assert answer.status_code == 200
    assert store.get(m.name).phase is Phase.CORDONED
    assert store.get(m.name).spec.return_request is not None


# -- audit -----------------------------------------------------------------------------------
def test_the_audit_trail_survives_deleting_the_maintenance(
        api: KubeApiServer, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m, record(m, Action.REBOOT, reason="first"))
    got = store.get(m.name)
    got.spec.abandon = AbandonRequest(actor="carol", reason="stop", at=T0)
    store.update(got, record(m, Action.ABANDON, reason="second"))
    store.append_audit(record(m, Action.POWER_ON, reason="third"))
    store.append_audit(AuditRecord(actor="x", action=Action.CORDON, reason="other node",
                                   node="n2", maintenance="n2-cordon-1", at=T0))
    assert [r.reason for r in store.audit("n1")] == ["first", "second", "third"]
    assert len(store.audit()) == 4
    ended = store.get(m.name)
    ended.status.phase = Phase.COMPLETE
    store.update(ended)
    store.client.delete(NodeMaintenanceResource, m.name)
    store.get(m.name)  # read while it is being deleted (its finalizer keeps it)
    assert store.release_deleted() == [m.name]  # the executor lets an ended one go
    with pytest.raises(NotFound):
        store.get(m.name)
    trail = store.audit("n1")
    assert [(r.action, r.reason, r.actor, r.maintenance) for r in trail] == [
        (Action.REBOOT, "first", "alice", m.name),
        (Action.ABANDON, "second", "alice", m.name),
        (Action.POWER_ON, "third", "alice", m.name),
        (Action.ABANDON, f"the NodeMaintenance {m.name} was deleted", "(deletion)", m.name)]
    assert "deleted after it ended (Complete)" in trail[-1].detail
    assert trail[0].at == T0
    # nothing would let a real cluster's garbage collector take them with the maintenance
    for obj in api.objects("powerplane.io/v1alpha1/maintenanceaudits"):
        assert "ownerReferences" not in obj["metadata"]
    check_written(api)


def test_the_requester_s_identity_and_the_policy_s_word_round_trip(
        api: KubeApiServer, store: KubernetesStore) -> None:
    """Who asked (the authenticated groups, the platform that vouched for them, the words on
    whose behalf) and what the policy said (the outcome, the rule) are kept, in the
    maintenance and in its audit records, and read back; nothing is pruned."""
    m = maintenance()
    m.spec.requester_groups = ["plant-eng", "wheel"]
    m.spec.requested_via = "kubernetes"
    m.spec.on_behalf_of = "the night shift"
    accepted = AuditRecord(actor="alice", action=Action.REBOOT, reason="kernel", node=m.node,
                           maintenance=m.name, at=T0, groups=("plant-eng", "wheel"),
                           via="kubernetes", on_behalf_of="the night shift",
                           rule="role admin allows it (tier admin)")
    store.create(m, accepted)
    got = store.get(m.name)
    assert got == m
    assert got.spec.requester == Identity("alice", ("plant-eng", "wheel"), "kubernetes",
                                          "the night shift")
    denied = AuditRecord(actor="bob", action=Action.SHUTDOWN, reason="let me try", node=m.node,
                         at=T0, outcome="denied", rule="no role allows it")
    store.append_audit(denied)
    # written by the cluster admin's client, each names its recorder (issue 36: a record
    # of another identity says who wrote it; the audit admission policy binds that)
    assert store.audit("n1") == [
        dataclasses.replace(accepted, recorded_by=ADMIN_USER),
        dataclasses.replace(denied, recorded_by=ADMIN_USER)]
    (obj, _) = sorted(api.objects("powerplane.io/v1alpha1/maintenanceaudits"),
                      key=lambda o: o["spec"]["actor"])
    assert (obj["spec"]["groups"], obj["spec"]["via"], obj["spec"]["onBehalfOf"],
            obj["spec"]["outcome"]) == (["plant-eng", "wheel"], "kubernetes",
                                        "the night shift", "accepted")
    check_written(api)


def test_an_audit_record_written_before_identities_were_recorded_reads_back() -> None:
    """A MaintenanceAudit of an earlier version (no groups, via, onBehalfOf, outcome, rule)
    is an accepted act by a local user with no groups."""
    old = {"spec": {"at": T0.isoformat(), "actor": "alice", "action": "servers:reboot",
                    "reason": "kernel", "node": "n1", "maintenance": "n1-reboot-1",
                    "source": "Server/n1", "detail": ""}}
    rec = record_of(old)
    assert (rec.actor, rec.action, rec.maintenance, rec.at) == (
        "alice", Action.REBOOT, "n1-reboot-1", T0)
    assert (rec.groups, rec.via, rec.on_behalf_of, rec.outcome, rec.rule) == (
        (), "local", "", "accepted", "")


def test_a_denial_s_event_is_a_warning_never_worded_as_an_act_done(
        api: KubeApiServer, store: KubernetesStore) -> None:
    store.append_audit(AuditRecord(actor="bob", action=Action.REBOOT, reason="let me try",
                                   node="n1", at=T0, outcome="denied",
                                   rule="no role allows it"))
    (event,) = [r.body for r in api.requests_to("POST", f"/api/v1/namespaces/{NS}/events")]
    kubernetes_validate.validate(event, KUBERNETES_VERSION, strict=True)
    assert (event["type"], event["reason"]) == ("Warning", "RebootDenied")
    assert event["message"] == "servers:reboot denied to bob: let me try [no role allows it]"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_each_audit_record_is_also_an_event_about_the_maintenance(
        api: KubeApiServer, store: KubernetesStore) -> None:
    m = maintenance()
    store.create(m, record(m, Action.REBOOT, reason="kernel 6.12"))
    events = [r.body for r in api.requests_to("POST", f"/api/v1/namespaces/{NS}/events")]
    assert len(events) == 1
    event = events[0]
    kubernetes_validate.validate(event, KUBERNETES_VERSION, strict=True)
    assert event["involvedObject"]["kind"] == "NodeMaintenance"
    assert event["involvedObject"]["name"] == m.name
    assert event["involvedObject"]["uid"]
    assert event["reason"] == "Reboot"
    assert "servers:reboot by alice: kernel 6.12" in event["message"]
    assert "ownerReferences" not in event["metadata"]


def test_an_event_that_cannot_be_written_does_not_fail_the_write(
        api: KubeApiServer, store: KubernetesStore,
        caplog: pytest.LogCaptureFixture) -> None:
    api.validators["v1/events"] = [lambda old, new: "events are refused here"]
    m = maintenance()
    store.create(m, record(m))
    assert [r.reason for r in store.audit("n1")] == ["kernel"]
    assert "could not be written (HTTP 422)" in caplog.text


# -- errors ----------------------------------------------------------------------------------
def test_a_cluster_without_the_crd_is_a_store_error_naming_it(tmp_path: Path) -> None:
    with KubeApiServer(crds=()) as bare:
        kubeconfig = bare.write_kubeconfig(tmp_path / "kc")
        s = open_store(kubeconfig)
        try:
            with pytest.raises(KubernetesStoreError, match=r"nodemaintenances\.powerplane\.io.*"
                               r"not installed.*powerplane operator manifests"):
                s.active()
        finally:
            s.close()
        dry = open_store(kubeconfig, create=False)  # a dry run: no store yet holds nothing
        try:
            assert dry.active_phases() == [] and dry.all() == [] and dry.audit() == []
        finally:
            dry.close()


def test_an_api_server_that_cannot_be_reached_is_a_store_error(tmp_path: Path) -> None:
    import json

    from powerplane.testing import closed_port

    port = closed_port()
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "x", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    s = open_store(kubeconfig)
    try:
        with pytest.raises(KubernetesStoreError, match="cannot be reached") as caught:
            s.all()
        assert caught.value.exit_code == 1
        assert f"127.0.0.1:{port}" in str(caught.value)
    finally:
        s.close()
