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

Discovery of many machines is one ``capabilities_batch`` call (one session, one latency,
the password checked once; each machine's faults its own outcome), as the host asks a
channel with :class:`~powerplane.channel.BatchDiscovery`.

Latency is real waiting on the event loop's clock: a call resumes no earlier than
``latency_ms`` after it began, and before the next millisecond after that. Calls that end
in the same millisecond share one loop timer (a fleet call's thousands of sleeps would
otherwise each push a timer through the loop's heap, which costs more than the call).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import math
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
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
    PowerplaneError,
    RefusedByDevice,
    Unreachable,
)
from powerplane.fields import StrictBool, StrictFloat, StrictInt
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
    graceful: StrictBool = True
    """Whether every advertised verb is graceful (else hard)."""
    latency_ms: StrictFloat = Field(0, ge=0, allow_inf_nan=False)
    """Added to every call."""
    machines: dict[str, Literal["on", "off"]] = Field(default_factory=dict)
    """The targets it knows and their initial power state."""
    session_limit: StrictInt | None = Field(None, ge=1)
    """Concurrent calls accepted; a call beyond it is refused (as a BMC out of sessions)."""
    readback: Literal["full", "on-only", "none"] = "full"
    """What readback can see: both states, only ``on`` (off reads unknown), or nothing."""
    transition_ms: StrictFloat = Field(0, ge=0, allow_inf_nan=False)
    """How long a power change reads as in transition (unknown) before it settles."""
    faults: dict[str, Fault] = Field(default_factory=dict)
    """Faults per target; the key ``*`` applies to every target."""
    timeout_s: StrictFloat = Field(5.0, gt=0, allow_inf_nan=False)
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
    boot_marker: StrictBool = True
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
_ACCEPTED = Acceptance()
"""Every simulated acceptance (immutable, so one object serves every call)."""


class _Ticks:
    """One event loop's latency timers: one per millisecond in which some call is due."""

    __slots__ = ("due",)

    def __init__(self) -> None:
        self.due: dict[int, list[asyncio.Future[None]]] = {}

    def sleep(self, loop: asyncio.AbstractEventLoop, delay: float) -> asyncio.Future[None]:
        """A future ``loop`` resolves no earlier than ``delay`` seconds from now (and
        within the millisecond after)."""
        tick = math.ceil((loop.time() + delay) * 1000)
        waiters = self.due.get(tick)
        if waiters is None:
            waiters = self.due[tick] = []
            loop.call_at(tick / 1000, self._wake, tick)
        fut: asyncio.Future[None] = loop.create_future()
        waiters.append(fut)
        return fut

    def _wake(self, tick: int) -> None:
        for fut in self.due.pop(tick):
            if not fut.done():  # a cancelled caller's future is left as it is
                fut.set_result(None)


_TICKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ticks] = (
    weakref.WeakKeyDictionary())
"""Per event loop (the loop is not kept alive by its entry)."""


def _ticks(loop: asyncio.AbstractEventLoop) -> _Ticks:
    ticks = _TICKS.get(loop)
    if ticks is None:
        ticks = _TICKS[loop] = _Ticks()
    return ticks


def _verb_method(
    verb: Verb, final: str, transitional: str
) -> Callable[[SimulatedChannel, str], Coroutine[Any, Any, Acceptance]]:
    """The channel's method for ``verb``: one coroutine per call on the short path (nothing
    configured that needs the long one), with the same counts, session limit, latency,
    send gate and dispatch record as the long path."""
    method, value = verb.method, verb.value
    first = transitional if verb is Verb.REBOOT else final

    async def call(self: SimulatedChannel, target: str) -> Acceptance:
        if verb not in self._caps.verbs:
            require(self._caps, verb, self.name)
        if not self._plain:
            return await self._call(method, target, True,
                                    lambda: self._apply(verb, target, final, transitional))
        self._enter(method, target, verb=True)
        try:
            if self._latency:
                loop = asyncio.get_running_loop()
                if loop is not self._loop:
                    self._loop, self._tick = loop, _ticks(loop)
                assert self._tick is not None
                await self._tick.sleep(loop, self._latency)
            if target not in self._state:
                raise RefusedByDevice(
                    f"no such machine {target!r}", channel=self.name, target=target
                )
            about_to_send()
            entries = self._entries[value]
            entry = entries.get(target)
            if entry is None:  # one tuple per (verb, machine): the log holds references
                entry = entries[target] = (value, target)
            with self._lock:
                self.dispatches.append(entry)
                self._become(target, first)
                self._become(target, final)
            return _ACCEPTED
        finally:
            self.active -= 1

    call.__name__ = method
    call.__qualname__ = f"SimulatedChannel.{method}"
    call.__doc__ = f"{value}: the machine becomes {final!r} (through {transitional!r})."
    return call


class SimulatedChannel:
    """In-memory machines behind one simulated endpoint."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass with a ``capabilities`` of its own and no ``capabilities_batch`` of
        its own has none (a batch must judge each target as ``capabilities`` would; the
        inherited one cannot know the override): the host asks it per target."""
        super().__init_subclass__(**kwargs)
        if "capabilities" in vars(cls) and "capabilities_batch" not in vars(cls):
            cls.capabilities_batch = None  # type: ignore[assignment]

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
        self._entries: dict[str, dict[str, tuple[str, str]]] = {v.value: {} for v in Verb}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick: _Ticks | None = None
        self._load_state()
        sees = config.readback == "full"
        self._caps = CapabilitySet.of(
            config.verbs if config.graceful else (),
            () if config.graceful else config.verbs,
            source=Source.DECLARED,
            detail="simulated channel",
            sees_power_off=sees,
        )

    @property
    def config(self) -> SimulatedConfig:
        """The channel's config (a test may replace it: what is derived from it follows)."""
        return self._config

    @config.setter
    def config(self, config: SimulatedConfig) -> None:
        self._config = config
        self._latency = config.latency_ms / 1000
        self._plain = (not config.faults and config.expect_password is None
                       and config.state_file is None and not config.transition_ms)
        """No fault, password, state file or transition: a verb takes the short path."""

    # -- persistence -------------------------------------------------------------------------
    def _shared(self, write: bool = True) -> contextlib.AbstractContextManager[None]:
        """With a state file: hold its lock and work on what it holds now (without one,
        nothing: no generator per call, so an in-memory channel costs what it did). A read
        (``write=False``) while no state file exists yet has nothing to load and takes no
        lock, so it leaves no lock file behind (a dry run, ``offers``)."""
        if self.config.state_file is None:
            return _NOTHING
        if not write and not os.path.exists(self.config.state_file):
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
        if self.active > self.peak_active:
            self.peak_active = self.active

    def _sleep(self) -> Awaitable[None]:
        """The call's latency on the running loop (see the module's note on latency)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._tick = loop, _ticks(loop)
        assert self._tick is not None
        return self._tick.sleep(loop, self._latency)

    async def _call(self, method: str, target: str, verb: bool, act: Callable[[], T]) -> T:
        self._enter(method, target, verb=verb)
        try:
            if self._latency:
                await self._sleep()
            fault = self._fault(target)
            if fault is not None:
                self._check_faults(fault, target, verb=verb)
            if self.config.expect_password is not None:
                given = self.config.password.reveal() if self.config.password else None
                if given != self.config.expect_password.reveal():
                    raise AuthenticationFailed(
                        "credentials rejected", channel=self.name, target=target
                    )
            with self._shared(write=False):
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
            with self._shared(write=verb):
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
            return _ACCEPTED
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
        return _ACCEPTED

    # -- the channel protocol ------------------------------------------------------------------
    async def capabilities(self, target: str) -> CapabilitySet:
        await self._call("capabilities", target, False, lambda: None)
        return self._caps

    async def capabilities_batch(
        self, targets: Sequence[str]
    ) -> list[CapabilitySet | PowerplaneError]:
        """``capabilities`` of every target in one call: one session (``session_limit``
        counts it once), one latency, the password checked once. Each target's outcome
        is what ``capabilities(target)`` would end with, in the same order of checks: its
        ``unreachable``/``auth`` fault, a rejected password, an unknown machine, its
        ``timeout`` fault (the one answer held ``timeout_s`` first), else the set."""
        first = targets[0] if targets else ""
        self._enter("capabilities_batch", first, verb=False)
        try:
            if self._latency:
                await self._sleep()
            rejected = False
            if self.config.expect_password is not None:
                given = self.config.password.reveal() if self.config.password else None
                rejected = given != self.config.expect_password.reveal()
            with self._shared(write=False):
                machines = self._state
                known = [t in machines for t in targets]
            caps = self._caps
            if not rejected and not self.config.faults and all(known):
                return [caps] * len(targets)  # every machine known, nothing injected
            out: list[CapabilitySet | PowerplaneError] = []
            slow = False
            for target, present in zip(targets, known, strict=True):
                fault = self._fault(target)
                outcome: CapabilitySet | PowerplaneError = caps
                if fault is Fault.UNREACHABLE:
                    outcome = Unreachable("connection refused", channel=self.name,
                                          target=target)
                elif fault is Fault.AUTH or rejected:
                    outcome = AuthenticationFailed("credentials rejected", channel=self.name,
                                                   target=target)
                elif not present:
                    outcome = RefusedByDevice(f"no such machine {target!r}",
                                              channel=self.name, target=target)
                elif fault is Fault.TIMEOUT:
                    slow = True
                    outcome = ChannelTimeout(f"no answer within {self.config.timeout_s:g} s",
                                             channel=self.name, target=target)
                out.append(outcome)
            if slow:
                await asyncio.sleep(self.config.timeout_s)
            return out
        finally:
            self.active -= 1

    reboot = _verb_method(Verb.REBOOT, "on", "rebooting")
    shutdown = _verb_method(Verb.SHUTDOWN, "off", "powering-off")
    power_on = _verb_method(Verb.POWER_ON, "on", "powering-on")
    terminate = _verb_method(Verb.TERMINATE, "off", "shutting-down")

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
        with self._shared(write=False):  # a settle saves only where a file was written
            self._settle(target)
            return self._state[target]

    def boots_of(self, target: str) -> int:
        """How often the machine has booted, whatever the channel publishes (the simulated
        cluster's node boot id follows it, as a kubelet reports its own boot)."""
        with self._shared(write=False):
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
