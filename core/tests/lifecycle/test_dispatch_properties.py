"""Property tests over the dispatcher alone, against a model machine.

Random interleavings of record, send (answered, answer lost, request lost, refused),
crashes before and after sending, lost writes of the outcome, clock steps and a person's
(truthful) resolution. After every step:

* the machine applied each verb at most once (a second send only after non-application
  was shown, which in this model is true exactly when the first never arrived);
* a dispatch settled ``applied`` by evidence names an effect the machine really had, and
  one settled ``not-applied`` by evidence really was not applied;
* nothing is ever marked ``failed`` for an answer that was lost.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from lifecycle_support import Clock

from powerplane.capabilities import CapabilitySet, Source, Verb
from powerplane.channel import PowerState
from powerplane.errors import OutcomeUnknown, RefusedByDevice
from powerplane.lifecycle import crash
from powerplane.lifecycle.dispatch import Dispatcher, Drive
from powerplane.lifecycle.model import (
    DispatchOutcome,
    Intent,
    MaintenanceSpec,
    NodeMaintenance,
    Resolution,
)
from powerplane.settings.lifecycle import LifecycleConfig

O = DispatchOutcome  # noqa: E741
WINDOW = 10.0


class Crash(BaseException):
    """The runner died here."""


@dataclass
class Machine:
    """One machine: its boots, its power, what it applied, how its channel answers."""

    blind: bool
    boots: int = 1
    power: str = "on"
    applied: list[str] = field(default_factory=list)
    applied_ids: list[str] = field(default_factory=list)
    """The attempt ids whose send reached the machine and acted."""
    current: NodeMaintenance | None = None
    """The maintenance being driven (to know which attempt a send belongs to)."""
    mode: str = "ok"  # ok | lost-answer | lost-request | refused | crash-before | crash-after


class FakeHost:
    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.limits = SimpleNamespace(timeout_s=5.0)
        self.nodes = {"n1": SimpleNamespace(channels=[SimpleNamespace(channel="lab",
                                                                      target="n1")])}
        self.caps = CapabilitySet.of([Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON], (),
                                     source=Source.DECLARED, sees_power_off=not machine.blind)

    def offer_for(self, node: str) -> Any:
        offer = SimpleNamespace(offered=True, channel="lab", reason="")
        return {v: offer for v in Verb}

    def capabilities(self, channel: str, target: Any) -> Any:
        return self.caps

    async def boot_marker(self, node: str) -> tuple[str, str] | None:
        return None if self.machine.blind else ("lab", f"boot-{self.machine.boots}")

    async def read_power_state(self, node: str) -> Any:
        state = PowerState(self.machine.power)
        if self.machine.blind and state is PowerState.OFF:
            state = PowerState.UNKNOWN
        return SimpleNamespace(state=state, channel="lab")

    async def invoke(self, node: str, verb: Verb, reason: str, *, identity: Any = None,
                     audited: bool = False) -> Any:
        assert audited  # the act's record was made when the request was accepted
        mode = self.machine.mode
        if mode == "refused":
            raise RefusedByDevice("refused", channel="lab", target=node)
        if mode == "lost-request":
            raise OutcomeUnknown("no answer", channel="lab", target=node)
        self.machine.applied.append(verb.value)
        assert self.machine.current is not None
        sending = self.machine.current.dispatch_for(verb.value)
        assert sending is not None and sending.outcome is None  # recorded before sending
        self.machine.applied_ids.append(sending.attempt_id)
        if verb is Verb.REBOOT:
            self.machine.boots += 1
        else:
            self.machine.power = "on" if verb is Verb.POWER_ON else "off"
            if verb is Verb.POWER_ON:
                self.machine.boots += 1
        if mode == "lost-answer":
            raise OutcomeUnknown("no answer after sending", channel="lab", target=node)
        return SimpleNamespace(detail="accepted", channel="lab")


class FakeCluster:
    def __init__(self, machine: Machine) -> None:
        self.machine = machine

    async def boot_id(self, node: str) -> str | None:
        return None

    async def is_ready(self, node: str) -> bool | None:
        return self.machine.power == "on"


class DispatcherMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = Clock()
        self.config = LifecycleConfig(settle_window_s=WINDOW, ready_timeout_s=100)
        self.world: Machine | None = None
        self.persisted = ""
        self.runner: Dispatcher | None = None
        self.verb = Verb.REBOOT
        self.crash_at: str | None = None
        crash.set_hook(self._hook)

    def teardown(self) -> None:
        crash.set_hook(None)
        if self.runner is not None:
            self.runner.close()
        self.loop.close()

    def _hook(self, name: str) -> None:
        if self.crash_at is not None and name == self.crash_at:
            self.crash_at = None
            raise Crash(name)

    def _save(self, m: NodeMaintenance) -> None:
        self.persisted = m.model_dump_json(by_alias=True)

    async def _persist(self, m: NodeMaintenance) -> None:
        """The dispatcher's save (a store write it awaits)."""
        self._save(m)

    def _new_runner(self) -> Dispatcher:
        assert self.world is not None
        ports = SimpleNamespace(host=FakeHost(self.world), cluster=FakeCluster(self.world))
        return Dispatcher(ports, self.config, self.clock, self._persist)  # type: ignore[arg-type]

    @rule(verb=st.sampled_from([Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON]),
          blind=st.booleans())
    @precondition(lambda self: self.world is None)
    def start(self, verb: Verb, blind: bool) -> None:
        self.world = Machine(blind=blind, power="off" if verb is Verb.POWER_ON else "on")
        self.verb = verb
        m = NodeMaintenance(name="m", spec=MaintenanceSpec(
            node="n1", intent=Intent.REBOOT, reason="a good reason", requested_by="a"))
        self._save(m)
        self.runner = self._new_runner()

    @rule(mode=st.sampled_from(["ok", "lost-answer", "lost-request", "refused",
                                "crash-before", "crash-after"]),
          lose_write=st.booleans())
    @precondition(lambda self: self.world is not None)
    def drive(self, mode: str, lose_write: bool) -> None:
        assert self.world is not None and self.runner is not None
        self.world.mode = mode
        self.crash_at = {"crash-before": f"dispatch-recorded:{self.verb.value}",
                         "crash-after": f"dispatch-sent:{self.verb.value}"}.get(mode)
        m = NodeMaintenance.model_validate_json(self.persisted)
        self.world.current = m
        try:
            state, _ = self.loop.run_until_complete(self.runner.drive(m, self.verb))
        except Crash:
            self.runner.close()  # the process is gone: its runner is dead
            self.runner = self._new_runner()
            return
        finally:
            self.crash_at = None
        assert state in Drive
        if not lose_write:
            self._save(m)

    @rule(seconds=st.sampled_from([1.0, 4.0, WINDOW + 1]))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    @precondition(lambda self: self.world is not None)
    def person_resolves_truthfully(self) -> None:
        assert self.world is not None
        m = NodeMaintenance.model_validate_json(self.persisted)
        pending = [d for d in m.status.dispatches if d.outcome is O.INDETERMINATE]
        if not pending or any(r.attempt_id == pending[-1].attempt_id
                              for r in m.spec.resolutions):
            return
        truly = pending[-1].attempt_id in self.world.applied_ids
        m.spec.resolutions.append(Resolution(actor="carol", reason="seen at the rack",
                                             applied=truly, attempt_id=pending[-1].attempt_id))
        self._save(m)

    @invariant()
    def at_most_once_and_no_unobserved_claim(self) -> None:
        if self.world is None:
            return
        assert self.world.applied.count(self.verb.value) <= 1
        m = NodeMaintenance.model_validate_json(self.persisted)
        for d in m.status.dispatches:
            if d.settled_by == "evidence" and d.outcome is O.APPLIED:
                assert self.world.applied_ids, d.detail  # an effect the machine really had
            if d.outcome is O.NOT_APPLIED:  # by evidence or by the (truthful) person
                assert d.attempt_id not in self.world.applied_ids, d.detail
            if d.outcome is O.FAILED:  # only a refusal fails, never a lost answer
                assert "refused" in d.detail
                assert d.attempt_id not in self.world.applied_ids


TestDispatcher = DispatcherMachine.TestCase
TestDispatcher.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
