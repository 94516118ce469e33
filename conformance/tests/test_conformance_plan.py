"""The power plan: every machine's power changes made at the same time as the other
machines' and as the checks that change nothing, no more of them than the checks need.

Counted at the sushy-tools emulator (its request log: one ``POST .../ComputerSystem.Reset``
per power verb, by system) and on a device whose machines change only together (a
sequential suite could not pass on it at all): no timing anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conformance_targets import outcome, sim_target

from powerplane import Acceptance, ChannelType, Reading, hookimpl
from powerplane.capabilities import Verb
from powerplane.channel import PowerState
from powerplane.plugins import registry
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig, parse_target
from powerplane_conformance.api import RunSummary
from powerplane_conformance.plan import Wants, build_steps

Run = Callable[..., RunSummary]

MINIMUM_VERBS = 3 * 3 + 2
"""Per machine with ``repeat`` 3: three rounds of each verb (one power change each) and the
two idempotent verbs."""


class Together(SimulatedChannel):
    """A device whose machines change only together: a verb's change shows once every
    machine of the device has been sent a verb since the last change showed. Logs every
    verb sent and every reading, in order, for every session."""

    log: ClassVar[list[tuple[str, str, str]]] = []
    """``(event, target, what)``: ``("sent", "m1", "shutdown")``, ``("read", "m1", "off")``."""
    _pending: ClassVar[dict[str, str]] = {}
    _state: ClassVar[dict[str, str]] = {}

    async def _together(self, target: str, verb: str, state: str) -> Acceptance:
        await getattr(SimulatedChannel, verb.replace("-", "_"))(self, target)  # its checks
        cls = type(self)
        cls._state.setdefault(target, self.config.machines[target])
        cls.log.append(("sent", target, verb))
        cls._pending[target] = state
        if set(cls._pending) >= set(self.config.machines):
            cls._state.update(cls._pending)
            cls._pending.clear()
        return Acceptance()

    async def reboot(self, target: str) -> Acceptance:
        return await self._together(target, "reboot", "on")

    async def shutdown(self, target: str) -> Acceptance:
        return await self._together(target, "shutdown", "off")

    async def power_on(self, target: str) -> Acceptance:
        return await self._together(target, "power-on", "on")

    async def read_power_state(self, target: str) -> Reading:
        await super().read_power_state(target)  # unknown targets, credentials: as ever
        state = type(self)._state.setdefault(target, self.config.machines[target])
        type(self).log.append(("read", target, state))
        return Reading.on("on") if state == "on" else Reading.off("off")


class _Plugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="together", config=SimulatedConfig, factory=Together,
                             target=parse_target, description="machines change together"))


@pytest.fixture
def together() -> Iterator[None]:
    reg = registry()
    reg.add_module("conformance-together", _Plugin(), "tests", "0")
    Together.log.clear()
    Together._pending.clear()
    Together._state.clear()
    yield
    reg.remove("conformance-together")


@pytest.mark.usefixtures("together")
def test_two_machines_change_at_the_same_time(run: Run) -> None:
    """m1's shutdown can only read off once m2 was sent a verb too: the plan's workers
    make both machines' rounds at once (a suite that waited for m1 before it sent m2
    anything would fail SHUTDOWN_READBACK on m1). The log shows m2's shutdown sent before
    m1's settle completed (m1 first read off)."""
    summary = run(sim_target(type_name="together", machines={"m1": "on", "m2": "on"},
                             conformance={"settle_timeout_s": 5, "repeat": 1}),
                  pytest_args=["-k", "test_verb_readback and shutdown"])
    assert outcome(summary, "SHUTDOWN_READBACK") == {"pass"}, summary.data["results"]
    log = Together.log
    m2_sent = log.index(("sent", "m2", "shutdown"))
    m1_settled = log.index(("read", "m1", "off"))
    assert log.index(("sent", "m1", "shutdown")) < m1_settled
    assert m2_sent < m1_settled


def test_the_plan_for_one_machine_is_the_minimum() -> None:
    from powerplane.capabilities import CapabilitySet

    caps = CapabilitySet({Verb.REBOOT: "hard", Verb.SHUTDOWN: "hard", Verb.POWER_ON: "hard"},
                         "test")
    wants = Wants(readback=set(Verb) - {Verb.TERMINATE}, repeated=set(Verb) - {Verb.TERMINATE},
                  idempotent={Verb.POWER_ON, Verb.SHUTDOWN}, not_stale=True)
    for start in (PowerState.ON, PowerState.OFF):
        steps = build_steps(wants, start, caps, 3, batch=False)
        rounds = [x for x in steps if x.kind == "round"]
        assert len(rounds) == 9, [x.by for x in steps]
        assert sorted(x.verb.value for x in rounds if x.verb) == sorted(
            ["reboot"] * 3 + ["shutdown"] * 3 + ["power-on"] * 3)
        assert [x.by for x in steps if x.kind == "idempotent"] in (
            ["POWER_ON_IDEMPOTENT", "SHUTDOWN_IDEMPOTENT"],
            ["SHUTDOWN_IDEMPOTENT", "POWER_ON_IDEMPOTENT"])


emulator_mod = pytest.importorskip("powerplane_redfish.testing.emulator")
PASSWORD_ENV = "PP_CONFORMANCE_PLAN_EMU_PASSWORD"


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Any]:
    emu = emulator_mod.SushyEmulator(tmp_path / "emulator", systems=2)
    with emu:
        os.environ[PASSWORD_ENV] = emu.password
        yield emu
    os.environ.pop(PASSWORD_ENV, None)


@pytest.mark.slow
def test_at_the_emulator_each_system_gets_the_minimum_of_power_verbs(
    run: Run, emulator: Any
) -> None:
    """Default settings (repeat 3), two systems: each system is sent 11 power verbs (9
    changes and the two idempotent verbs), the concurrent rounds among them, counted at
    the emulator; the verdict is pass."""
    emu = emulator
    target = {
        "channels": {"bmc": {"type": "redfish", "endpoint": emu.endpoint,
                             "username": emu.username, "password": {"env": PASSWORD_ENV},
                             "verify": str(emu.tls.ca), "auth": "basic"}},
        "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": path}]}
                  for i, path in enumerate(emu.system_paths)},
        "conformance": {"allow_destructive": True},
    }
    summary = run(target)
    assert summary.data["counts"]["fail"] == 0, summary.data["results"]
    resets = [p for m, p in emu.requests() if m == "POST" and p.endswith("ComputerSystem.Reset")]
    for path in emu.system_paths:
        assert sum(1 for p in resets if p.startswith(path + "/")) == MINIMUM_VERBS, path
    for ident in ("REBOOT_CONCURRENT", "SHUTDOWN_CONCURRENT", "POWER_ON_CONCURRENT",
                  "REBOOT_REPEATED", "SHUTDOWN_REPEATED", "POWER_ON_REPEATED"):
        assert outcome(summary, ident) == {"pass"}, ident
