"""Property tests: random requests, world changes and crashes keep every lifecycle invariant.

Invariants checked after every step: each transition is in the phase graph and chains
from the previous one, starting at the phase the world's store creates a request in
(``Requested``, or ``Pending`` until the runner admits it on the kubernetes store); a
terminal phase is never left; no maintenance records a power
verb twice and the channel never receives more sends than recorded dispatches; every
abandoned maintenance that completes went through ``Returning``.

The same machine runs in two worlds (``lifecycle_worlds``): ``simulated`` (the simulated
cluster and SQLite) and ``kubernetes`` (the kubernetes cluster port and the longhorn
storage port on a seeded kmock API server, a kubelet following the machines). The
kubernetes world runs fewer examples (:data:`EXAMPLES`): every step there is HTTP.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from lifecycle_support import ceremony, make_config
from lifecycle_worlds import WORLDS, kubernetes_store_available, make_world, need_kubernetes

from powerplane import PowerHost
from powerplane.config import parse_config
from powerplane.errors import PowerplaneError
from powerplane.lifecycle import Lifecycle, Phase, crash
from powerplane.lifecycle.phases import is_allowed

NODES = ("cp1", "cp2", "cp3", "w1", "w2")
INTENTS = ("cordon", "drain", "reboot", "shutdown")
POINTS = (
    "phase:Cordoned", "phase:Draining", "phase:Drained", "phase:Rebooting",
    "phase:PoweredOff", "phase:Returning", "dispatch-recorded:reboot",
    "dispatch-recorded:shutdown", "dispatch-sent:reboot", "dispatch-sent:shutdown",
    "dispatch-recorded:power-on", "dispatch-sent:power-on",
    "admission:locked", "admission:recorded",  # the kubernetes store's admission only
)


class Crash(BaseException):
    """The process 'died' here (nothing after this point ran)."""


class LifecycleMachine(RuleBasedStateMachine):
    WORLD = "simulated"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="pp-lc-prop-"))
        self.world = make_world(self.WORLD, self.tmp)
        cfg = self.world.configure(make_config(
            self.tmp, workers=("w1", "w2"),
            cluster={"type": "simulated",
                     "pods": {"w1": ["web-1", "db-0"], "cp1": ["etcd-guard"]},
                     "pdbs": {"db": {"pods": ["db-0"], "allowed_disruptions": 0}},
                     "eviction_ticks": 1},
            lifecycle={"readback_window_s": 0.05, "readback_cadence_s": 0.01},
        ))
        self.host = PowerHost(parse_config(cfg))
        self.loop.run_until_complete(self.host.start())
        self.lc = Lifecycle.for_host(self.host)
        self.run(self.world.attach(self.host, self.lc))
        self.cluster: Any = self.world  # the world changes: the cluster's, in either world
        self.armed: str | None = None
        self.seen_terminal: dict[str, Phase] = {}
        crash.set_hook(self._maybe_crash)

    def _maybe_crash(self, name: str) -> None:
        if self.armed is not None and name == self.armed:
            self.armed = None
            event(f"crashed at {name}")
            raise Crash(name)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def restart(self) -> None:
        """A new process: same store file, same machines and cluster, nothing in memory."""
        old = self.lc
        old.close()
        self.lc = Lifecycle.for_host(self.host)
        self.run(self.world.restarted(old, self.lc))  # the cluster outlives the runner

    # -- requests --------------------------------------------------------------------------
    @rule(node=st.sampled_from(NODES), intent=st.sampled_from(INTENTS))
    def request(self, node: str, intent: str) -> None:
        try:
            self.run(self.lc.request(node, intent, ceremony(node, hazard=True)))
        except PowerplaneError:
            pass

    @rule(node=st.sampled_from(NODES))
    def abandon(self, node: str) -> None:
        try:
            self.run(self.lc.abandon(node, ceremony(node)))
        except PowerplaneError:
            pass

    @rule(node=st.sampled_from(NODES), machine_on=st.booleans())
    def give_back(self, node: str, machine_on: bool) -> None:
        try:
            self.run(self.lc.return_to_service(node, ceremony(node), machine_on=machine_on))
        except PowerplaneError:
            pass

    # -- the runner ------------------------------------------------------------------------
    @rule(node=st.sampled_from(NODES))
    def reconcile(self, node: str) -> None:
        m = self.lc.store.active_for(node)
        if m is None:
            return
        try:
            self.run(self.lc.reconcile(m.name))
        except Crash:
            self.restart()

    @rule(passes=st.integers(1, 4))
    def run_passes(self, passes: int) -> None:
        for _ in range(passes):
            for m in self.lc.store.active():
                try:
                    self.run(self.lc.reconcile(m.name))
                except Crash:
                    self.restart()

    @rule(node=st.sampled_from(NODES), intent=st.sampled_from(("reboot", "shutdown")),
          passes=st.integers(1, 4), crash_at=st.none() | st.sampled_from(POINTS))
    def request_and_run(
        self, node: str, intent: str, passes: int, crash_at: str | None
    ) -> None:
        self.armed = crash_at
        self.request(node, intent)
        self.run_passes(passes)

    @rule(point=st.sampled_from(POINTS))
    def arm_crash(self, point: str) -> None:
        self.armed = point

    @rule()
    def restart_runner(self) -> None:
        self.restart()

    # -- the world -------------------------------------------------------------------------
    @rule(pod=st.sampled_from(["web-1", "db-0", "etcd-guard"]))
    def pod_leaves(self, pod: str) -> None:
        self.cluster.pod_leaves(pod)

    @rule(allowed=st.integers(0, 2))
    def pdb_changes(self, allowed: int) -> None:
        self.cluster.set_pdb_allowed("db", allowed)

    @rule(node=st.sampled_from(NODES), ready=st.booleans())
    def readiness(self, node: str, ready: bool) -> None:
        self.cluster.set_ready(node, ready)

    @rule(node=st.sampled_from(NODES),
          fault=st.sampled_from([None, "unreachable", "refused", "timeout"]))
    def channel_fault(self, node: str, fault: str | None) -> None:
        ch = self.host.channel("lab")
        faults = dict(ch.config.faults)
        if fault is None:
            faults.pop(node, None)
        else:
            faults[node] = fault
        ch.config = ch.config.model_copy(update={"faults": faults, "timeout_s": 0.01})

    @rule(node=st.sampled_from(NODES), state=st.sampled_from(["on", "off"]))
    def person_at_the_rack(self, node: str, state: str) -> None:
        self.host.channel("lab").set_state(node, state)

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def lifecycle_invariants(self) -> None:
        recorded: Counter[tuple[str, str]] = Counter()
        for m in self.lc.store.all():
            prev = self.world.created
            for t in m.status.history:
                assert t.from_phase is prev, f"{m.name}: history does not chain at {t}"
                assert is_allowed(prev, t.to), f"{m.name}: invalid {prev} -> {t.to}"
                prev = t.to
            assert prev is m.phase
            if m.name in self.seen_terminal:
                assert m.phase is self.seen_terminal[m.name], f"{m.name} left a terminal phase"
            if m.phase.terminal:
                self.seen_terminal[m.name] = m.phase
            verbs = [d.verb for d in m.status.dispatches]
            assert len(verbs) == len(set(verbs)), f"{m.name} dispatched a verb twice"
            for v in verbs:
                recorded[(v, m.node)] += 1
            event(f"reached {m.phase}")
            if m.status.dispatches:
                event("dispatched a power verb")
            if m.spec.abandon is not None and m.phase is Phase.COMPLETE:
                assert Phase.RETURNING in [t.to for t in m.status.history]
        sent = Counter(self.host.channel("lab").dispatches)
        for key, count in sent.items():
            assert count <= recorded[key], f"{key} sent {count} times, recorded {recorded[key]}"

    def teardown(self) -> None:
        crash.set_hook(None)
        self.lc.close()
        try:
            self.run(self.world.finish(self.lc))
            self.run(self.host.close())
            self.loop.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.world.close()  # kubernetes: every request granted to the operator


EXAMPLES = {"simulated": 40, "kubernetes": 12, "kubernetes+store": 4}
"""Examples per world (40 steps each). The kubernetes world's steps are HTTP requests to
kmock: 12 examples take about 10 s with the SQLite store; with the kubernetes store every
store read is a list of NodeMaintenance objects (about 30 s an example as measured), so 4."""


@pytest.fixture(params=[pytest.param(w, marks=[pytest.mark.slow] if w == "kubernetes" else [])
                        for w in WORLDS])
def world(request: pytest.FixtureRequest) -> str:
    if request.param == "kubernetes":
        need_kubernetes()
    return str(request.param)


def test_lifecycle_properties(world: str) -> None:
    machine = type(f"LifecycleMachine_{world}", (LifecycleMachine,), {"WORLD": world})
    budget = "kubernetes+store" if world == "kubernetes" and kubernetes_store_available() \
        else world
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES[budget],
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    ))
