"""The built-in ``simulated`` channel type: in-memory machines, latency, limits and faults.

It is the smallest complete plugin: a config model, a channel class, and a hook
that registers them like any vendor's plugin does. Core's tests, the benchmarks and
the demo's fallback drive it.

Config keys (beside ``type: simulated``)::

    verbs: [reboot, shutdown, power-on]   # what it advertises
    graceful: true                        # graceful or hard for every advertised verb
    latency_ms: 0                         # per call
    machines: {m1: on, m2: off}           # targets and their initial power state
    session_limit: null                   # concurrent calls it accepts; more are refused
    readback: full                        # full | on-only (cannot see off) | none
    transition_ms: 0                      # how long a power change reads as in transition
    faults: {m2: unreachable, "*": silent} # per target ("*": all): unreachable, auth,
                                          #  timeout, refused, silent (success, no action),
                                          #  lost-answer (a verb applies, its answer never comes)
    timeout_s: 5                          # how long the timeout fault hangs before failing
    password: {env: SIM_PASSWORD}         # optional secret; checked against expect_password
    state_file: null                      # persist machine states and the dispatch log;
                                          #  shared by processes (locked, re-read per call)
    boot_marker: true                     # a boot counter per machine (the evidence of a boot)
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from powerplane.capabilities import CapabilitySet, Source, Verb
from powerplane.channel import (
    Acceptance,
    ChannelType,
    PowerState,
    Reading,
    about_to_send,
    require,
)
from powerplane.errors import (
    AuthenticationFailed,
    ChannelTimeout,
    OutcomeUnknown,
    RefusedByDevice,
    Unreachable,
)
from powerplane.hookspecs import hookimpl
from powerplane.secrets import SecretRef

T = TypeVar("T")

__all__ = ["Fault", "SimulatedChannel", "SimulatedConfig", "register_channel_types"]


class Fault(str, Enum):
    """A fault the simulated channel can inject."""

    UNREACHABLE = "unreachable"
    """Every call fails as if the connection were refused."""
    AUTH = "auth"
    """Every call fails as if the credentials were wrong."""
    TIMEOUT = "timeout"
    """Every call hangs for ``timeout_s``, then fails as a timeout."""
    REFUSED = "refused"
    """Every verb is refused by the device; readback works."""
    SILENT = "silent"
    """Every verb reports success and does nothing (a liar, for the conformance suite)."""
    LOST_ANSWER = "lost-answer"
    """Every verb is applied, then its answer never comes (hangs ``timeout_s``, then
    raises :class:`~powerplane.errors.OutcomeUnknown`); readback works."""


class SimulatedConfig(BaseModel):
    """Config of a ``simulated`` channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verbs: list[Verb] = Field(default_factory=lambda: [Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON])
    """The verbs it advertises for every target."""
    graceful: bool = True
    """Whether every advertised verb is graceful (else hard)."""
    latency_ms: float = Field(0, ge=0)
    """Added to every call."""
    machines: dict[str, Literal["on", "off"]] = Field(default_factory=dict)
    """The targets it knows and their initial power state."""
    session_limit: int | None = Field(None, ge=1)
    """Concurrent calls accepted; a call beyond it is refused (as a BMC out of sessions)."""
    readback: Literal["full", "on-only", "none"] = "full"
    """What readback can see: both states, only ``on`` (off reads unknown), or nothing."""
    transition_ms: float = Field(0, ge=0)
    """How long a power change reads as in transition (unknown) before it settles."""
    faults: dict[str, Fault] = Field(default_factory=dict)
    """Faults per target; the key ``*`` applies to every target."""
    timeout_s: float = Field(5.0, gt=0)
    """How long the ``timeout`` fault hangs before raising a timeout."""
    password: SecretRef | None = None
    """An optional secret the channel "logs in" with."""
    expect_password: SecretRef | None = None
    """If set, ``password`` must match it or every call fails authentication."""
    endpoint: str | None = None
    """Name of the device it models (calls are bounded per endpoint); default the channel name."""
    state_file: str | None = None
    """A JSON file that keeps machine states and the dispatch log across processes. Several
    processes may share it: each call takes a lock on ``<state_file>.lock``, re-reads the
    file, acts, and replaces it in one rename, so the dispatch log only grows and always
    agrees with the machine states."""
    boot_marker: bool = True
    """Offer ``boot_marker(target)``: a counter the machine bumps on every boot."""

    @field_validator("verbs", mode="before")
    @classmethod
    def _parse_verbs(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [Verb.parse(v) if isinstance(v, str) else v for v in value]
        return value


def parse_target(raw: Any) -> str:
    """A simulated target is a machine name (a string)."""
    if not isinstance(raw, str) or not raw:
        raise ValueError("expected a machine name (a non-empty string)")
    return raw


_NOTHING: contextlib.nullcontext[None] = contextlib.nullcontext()


class SimulatedChannel:
    """In-memory machines behind one simulated endpoint."""

    def __init__(self, name: str, config: SimulatedConfig) -> None:
        self.name = name
        self.config = config
        self._lock = threading.Lock()
        self._state: dict[str, str] = dict(config.machines)
        self._settle_at: dict[str, float] = {}
        self._pending: dict[str, str] = {}
        self._boots: dict[str, int] = {t: 1 if st == "on" else 0
                                        for t, st in config.machines.items()}
        self.dispatches: list[tuple[str, str]] = []
        """Every verb that acted or was accepted, as (verb, target), in order."""
        self.calls: Counter[str] = Counter()
        """Calls by method name, I/O or not."""
        self.active = 0
        self.peak_active = 0
        self.closed = False
        self._load_state()
        sees = config.readback == "full"
        self._caps = CapabilitySet.of(
            config.verbs if config.graceful else (),
            () if config.graceful else config.verbs,
            source=Source.DECLARED,
            detail="simulated channel",
            sees_power_off=sees,
        )

    # -- persistence -------------------------------------------------------------------------
    def _shared(self) -> contextlib.AbstractContextManager[None]:
        """With a state file: hold its lock and work on what it holds now (without one,
        nothing: no generator per call, so an in-memory channel costs what it did)."""
        if self.config.state_file is None:
            return _NOTHING
        return self._locked_state()

    @contextlib.contextmanager
    def _locked_state(self) -> Iterator[None]:
        assert self.config.state_file is not None
        with open(self.config.state_file + ".lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                self._load_state()
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _load_state(self) -> None:
        if self.config.state_file is None:
            return
        path = Path(self.config.state_file)
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            self._state.update(data.get("machines", {}))
            self._boots.update({str(t): int(n) for t, n in data.get("boots", {}).items()})
            self.dispatches = [(str(d[0]), str(d[1])) for d in data.get("dispatches", [])]
            # a power transition still running when the last process stopped settles on time
            self._pending.clear()
            self._settle_at.clear()
            for target, (final, due_wall) in data.get("pending", {}).items():
                self._pending[target] = str(final)
                self._settle_at[target] = time.monotonic() + (float(due_wall) - time.time())

    def _save_state(self) -> None:
        if self.config.state_file is None:
            return
        path = Path(self.config.state_file)
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        now_mono, now_wall = time.monotonic(), time.time()
        pending = {
            t: [final, now_wall + (self._settle_at[t] - now_mono)]
            for t, final in self._pending.items()
            if t in self._settle_at
        }
        body = {
            "machines": self._state,
            "boots": self._boots,
            "dispatches": [list(d) for d in self.dispatches],
            "pending": pending,
        }
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, path)

    # -- plumbing ----------------------------------------------------------------------------
    def endpoint(self, target: str) -> str:
        """The device this channel models; calls are bounded per endpoint by the host."""
        return self.config.endpoint or self.name

    def _fault(self, target: str) -> Fault | None:
        faults = self.config.faults
        if not faults:
            return None
        return faults.get(target) or faults.get("*")

    def _enter(self, method: str, target: str, *, verb: bool) -> None:
        self.calls[method] += 1
        limit = self.config.session_limit
        if limit is not None and self.active >= limit:
            raise RefusedByDevice(
                f"session limit reached ({limit} concurrent sessions)",
                channel=self.name,
                target=target,
            )
        self.active += 1
        self.peak_active = max(self.peak_active, self.active)

    async def _call(self, method: str, target: str, verb: bool, act: Callable[[], T]) -> T:
        self._enter(method, target, verb=verb)
        try:
            if self.config.latency_ms:
                await asyncio.sleep(self.config.latency_ms / 1000)
            fault = self._fault(target)
            if fault is not None:
                self._check_faults(fault, target, verb=verb)
            if self.config.expect_password is not None:
                given = self.config.password.reveal() if self.config.password else None
                if given != self.config.expect_password.reveal():
                    raise AuthenticationFailed(
                        "credentials rejected", channel=self.name, target=target
                    )
            with self._shared():
                known = target in self._state
            if not known:
                raise RefusedByDevice(
                    f"no such machine {target!r}", channel=self.name, target=target
                )
            if fault is Fault.TIMEOUT:
                await asyncio.sleep(self.config.timeout_s)
                raise ChannelTimeout(
                    f"no answer within {self.config.timeout_s:g} s",
                    channel=self.name,
                    target=target,
                )
            if verb:
                about_to_send()
            with self._shared():
                result = act()
            if verb and fault is Fault.LOST_ANSWER:
                await asyncio.sleep(self.config.timeout_s)
                raise OutcomeUnknown(
                    f"no answer within {self.config.timeout_s:g} s after the request was sent",
                    channel=self.name,
                    target=target,
                )
            return result
        finally:
            self.active -= 1

    def _check_faults(self, fault: Fault, target: str, *, verb: bool) -> None:
        if fault == Fault.UNREACHABLE:
            raise Unreachable("connection refused", channel=self.name, target=target)
        if fault == Fault.AUTH:
            raise AuthenticationFailed("credentials rejected", channel=self.name, target=target)
        if fault == Fault.REFUSED and verb:
            raise RefusedByDevice("the device refused the request", channel=self.name,
                                  target=target)

    def _settle(self, target: str) -> None:
        due = self._settle_at.get(target)
        if due is not None and time.monotonic() >= due:
            self._become(target, self._pending.pop(target))
            del self._settle_at[target]
            self._save_state()

    def _become(self, target: str, state: str) -> None:
        """Set a machine's state; reaching ``on`` from any other state is a boot."""
        if state == "on" and self._state.get(target) != "on":
            self._boots[target] = self._boots.get(target, 0) + 1
        self._state[target] = state

    def _apply(self, verb: Verb, target: str, final: str, transitional: str) -> Acceptance:
        if self.config.faults and self._fault(target) is Fault.SILENT:
            return Acceptance()
        with self._lock:
            self.dispatches.append((verb.value, target))
            delay = self.config.transition_ms / 1000
            if delay:
                self._state[target] = transitional
                self._pending[target] = final
                self._settle_at[target] = time.monotonic() + delay
            else:
                self._become(target, transitional if verb is Verb.REBOOT else final)
                self._become(target, final)
            self._save_state()
        return Acceptance()

    # -- the channel protocol ------------------------------------------------------------------
    async def capabilities(self, target: str) -> CapabilitySet:
        await self._call("capabilities", target, False, lambda: None)
        return self._caps

    async def reboot(self, target: str) -> Acceptance:
        require(self._caps, Verb.REBOOT, self.name)
        return await self._call(
            "reboot", target, True, lambda: self._apply(Verb.REBOOT, target, "on", "rebooting")
        )

    async def shutdown(self, target: str) -> Acceptance:
        require(self._caps, Verb.SHUTDOWN, self.name)
        return await self._call(
            "shutdown", target, True,
            lambda: self._apply(Verb.SHUTDOWN, target, "off", "powering-off"),
        )

    async def power_on(self, target: str) -> Acceptance:
        require(self._caps, Verb.POWER_ON, self.name)
        return await self._call(
            "power_on", target, True,
            lambda: self._apply(Verb.POWER_ON, target, "on", "powering-on"),
        )

    async def terminate(self, target: str) -> Acceptance:
        require(self._caps, Verb.TERMINATE, self.name)
        return await self._call(
            "terminate", target, True,
            lambda: self._apply(Verb.TERMINATE, target, "off", "shutting-down"),
        )

    async def read_power_state(self, target: str) -> Reading:
        return await self._call("read_power_state", target, False, lambda: self._read(target))

    def _read(self, target: str) -> Reading:
        self._settle(target)
        state = self._state[target]
        mode = self.config.readback
        if mode == "none":
            return Reading.unknown("this channel cannot see power state")
        if state == "on":
            return Reading.on()
        if state == "off":
            if mode == "on-only":
                return Reading.unknown("no answer: a machine that is off cannot be told "
                                       "from one that is unreachable")
            return Reading.off()
        return Reading.unknown(f"in transition ({state})")

    async def boot_marker(self, target: str) -> str | None:
        """A value that changes on every boot of the machine (its boot count); None if disabled."""
        if not self.config.boot_marker:
            return None

        def marker() -> str | None:
            self._settle(target)
            return f"boot-{self._boots.get(target, 0)}"

        return await self._call("boot_marker", target, False, marker)

    async def close(self) -> None:
        self.closed = True

    # -- test helpers ---------------------------------------------------------------------------
    def set_state(self, target: str, state: PowerState | str) -> None:
        """Set a machine's power state directly (as a person at the rack would)."""
        with self._shared(), self._lock:
            self._become(target, str(state))
            self._pending.pop(target, None)
            self._settle_at.pop(target, None)
            self._save_state()

    def state_of(self, target: str) -> str:
        """The machine's true state, whatever readback can see."""
        with self._shared():
            self._settle(target)
            return self._state[target]

    def boots_of(self, target: str) -> int:
        """How often the machine has booted, whatever the channel publishes (the simulated
        cluster's node boot id follows it, as a kubelet reports its own boot)."""
        with self._shared():
            self._settle(target)
            return self._boots.get(target, 0)


SIMULATED = ChannelType(
    name="simulated",
    config=SimulatedConfig,
    factory=SimulatedChannel,
    target=parse_target,
    description="in-memory machines for tests, benchmarks and the demo",
    gated_sends=True,
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the built-in ``simulated`` channel type."""
    register(SIMULATED)
