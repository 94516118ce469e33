"""One conformance session: the target, a started host, the subjects under test, and the
calls, readback waits and state restoration every check is built from."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from powerplane import (
    CapabilitySet,
    Channel,
    ChannelError,
    HasEndpoint,
    Identifies,
    PowerHost,
    PowerState,
    Reading,
    SecretRef,
    Verb,
)
from powerplane.channel import maybe_await, verb_method
from powerplane.plugins import Registry
from powerplane.plugins import registry as default_registry
from powerplane.secrets import SECRET_KINDS
from powerplane_conformance.checks import CheckSpec
from powerplane_conformance.gate import Gate, gate
from powerplane_conformance.interrupt import received
from powerplane_conformance.loop import LoopThread
from powerplane_conformance.model import (
    END_STATE,
    MAX_POLL_S,
    NOT_RESTORED,
    RESTORE_BUDGET_S,
    RESTORE_WORDS,
    RESTORED,
    SENT_NOT_CONFIRMED,
    START_STATE,
    DerivedConfigInvalid,
    Observation,
    PlanHandle,
    PowerOnByHand,
    ProbesHandle,
    Subject,
    describe_error,
    poll_delays,
)
from powerplane_conformance.settings import ConformanceSettings, Target
from powerplane_conformance.terminal import BY_HAND

__all__ = [
    "BY_HAND",
    "END_STATE",
    "MAX_POLL_S",
    "NOT_RESTORED",
    "RESTORED",
    "RESTORE_BUDGET_S",
    "SENT_NOT_CONFIRMED",
    "START_STATE",
    "ConformanceSession",
    "DerivedConfigInvalid",
    "Observation",
    "PowerOnByHand",
    "RestoreGate",
    "Subject",
    "describe_error",
    "poll_delays",
]
# the vocabulary lives in powerplane_conformance.model; these names stay importable here

class RestoreGate:
    """One machine's restore after a signal: whether its verb may still leave (the gate
    closes when the budget is over or at a second signal), whether it left, and how the
    restore ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = threading.Event()
        """Set when nothing more may be sent: readback waits end at once too."""
        self.sent: Verb | None = None
        """The verb that was let through to put the machine back."""
        self.want: PowerState | None = None
        self.done = False
        self.result: str | None = None
        """How :meth:`ConformanceSession.restore` ended (None: the machine reads back)."""

    def send(self, verb: Verb, want: PowerState) -> bool:
        """Whether ``verb`` may leave now (recorded as sent when it may)."""
        with self._lock:
            if self.closed.is_set():
                return False
            self.sent, self.want = verb, want
            return True

    def finish(self, result: str | None) -> None:
        with self._lock:
            if not self.done:
                self.result, self.done = result, True

    def close(self) -> None:
        """Nothing more leaves; what is sent stays sent."""
        with self._lock:
            self.closed.set()

    def outcome(self, again: bool) -> tuple[str, str | None]:
        """``(RESTORED | SENT_NOT_CONFIRMED | NOT_RESTORED, why not)`` once closed; ``again``:
        a second signal closed it."""
        with self._lock:
            done, result, sent, want = self.done, self.result, self.sent, self.want
        if done and result is None:
            return RESTORED, None
        cut = ("the run was interrupted again" if again
               else f"the restore budget of {RESTORE_BUDGET_S:g} s ran out")
        if sent is not None:
            shown = f"; {result}" if done and result else ""
            return SENT_NOT_CONFIRMED, (
                f"{RESTORE_WORDS[SENT_NOT_CONFIRMED]}: {sent.value} was sent to bring it back "
                f"{want.value if want else ''}, and no reading showed it "
                + (f"({result})" if done and result else f"before {cut}")
                + ("" if done else shown))
        if done:
            return NOT_RESTORED, f"{RESTORE_WORDS[NOT_RESTORED]}: {result}"
        return NOT_RESTORED, (f"{RESTORE_WORDS[NOT_RESTORED]}: {cut} before anything was sent "
                              "to put it back")


def _secret_refs(model: Any) -> Iterator[tuple[str, SecretRef]]:
    if isinstance(model, SecretRef):
        yield "", model
    elif isinstance(model, BaseModel):
        for name in type(model).model_fields:
            for sub, ref in _secret_refs(getattr(model, name)):
                yield (f"{name}.{sub}" if sub else name), ref
    elif isinstance(model, dict):
        for key, value in model.items():
            for sub, ref in _secret_refs(value):
                yield (f"{key}.{sub}" if sub else str(key)), ref
    elif isinstance(model, list | tuple):
        for i, value in enumerate(model):
            for sub, ref in _secret_refs(value):
                yield (f"{i}.{sub}" if sub else str(i)), ref


class ConformanceSession:
    """A started host for one target, and the operations checks are made of."""

    def __init__(
        self,
        target: Target,
        channel: str | None = None,
        registry: Registry | None = None,
        power_on_by_hand: PowerOnByHand | None = None,
    ) -> None:
        self.target = target
        self.settings: ConformanceSettings = target.settings
        self.deployment = target.deployment
        self.registry = registry if registry is not None else default_registry()
        self.channel_filter = channel
        self.loop = LoopThread()
        self.host = PowerHost(self.deployment)
        self.original: dict[str, PowerState] = {}
        self.terminated: set[str] = set()
        self.identities: dict[str, dict[str, Any]] = {}
        self.power_on_by_hand = power_on_by_hand
        """Who powers on a machine whose channel cannot, when the target is ``attended``."""
        self.by_hand: list[tuple[str, str]] = []
        """``(subject key, note)`` for each time a person brought a machine back, read back
        on; whoever reports the run takes them (the run's check gets the note)."""
        self._plugins: dict[str, dict[str, str]] = {}
        self.subjects = self._subjects()
        limit = self.settings.call_timeout_s or self.deployment.limits.timeout_s
        self.call_timeout: float = limit
        self._slots: dict[tuple[int, str], threading.BoundedSemaphore] = {}
        self._slots_lock = threading.Lock()
        self.stopping = threading.Event()
        """Set when the run was interrupted: readback waits end at once, and no verb is
        sent to bring a machine to a check's start state (the restore when the session
        closes clears it first)."""
        self.started = False
        """Discovery is done and every machine's state at the start is recorded."""
        self.interrupted = False
        """A signal (KeyboardInterrupt) cut :meth:`close` short."""
        self.restored: dict[str, str | None] = {}
        """Per subject key, how the restore when the session closed ended: None when the
        machine reads the state it had at the start, else why not."""
        self.plan: PlanHandle | None = None
        """The power plan, once the first check started it: the session stops it when it
        closes (:func:`powerplane_conformance.plan.plan_for` sets it)."""
        self.probes: ProbesHandle | None = None
        """The network negatives' probes, once started: the session waits for them when it
        closes (:func:`powerplane_conformance.probes.probes_of` sets it)."""
        self.probed: dict[tuple[str, str], object] = {}
        """What each negative probe produced, by ``(kind, key)``, for the checks that search
        it and the nodes that share it (:mod:`powerplane_conformance.negatives`)."""
        self.owned_lock = threading.Lock()
        """Held while the plan or the probes are made, so that each is made once."""
        self.restore_outcome: dict[str, str] = {}
        """Per subject key, after a signal: :data:`RESTORED`, :data:`SENT_NOT_CONFIRMED` or
        :data:`NOT_RESTORED` (see :data:`RESTORE_BUDGET_S`)."""

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Create the channels, discover capabilities, record each machine's power state."""
        self.loop.run(self.host.start(), self.call_timeout * 2 + 10)
        for configured in self.deployment.channels.values():
            self._plugins[configured.type.name] = self.plugin_of(configured.type.name)
        for subject in self.subjects:
            try:
                reading = self.read(subject)
            except Exception:
                continue
            state = reading.state
            caps = self.caps(subject)
            if state is PowerState.UNKNOWN and isinstance(caps, CapabilitySet) \
                    and not caps.sees_power_off:
                state = PowerState.OFF  # a blind channel's "unknown" is as off as it can see
            self.original[subject.key] = state
            channel = self.channel_of(subject)
            if isinstance(channel, Identifies) and subject.channel not in self.identities:
                try:
                    found = self.call(channel.identity, subject.target)
                    if isinstance(found, dict):
                        self.identities[subject.channel] = {str(k): v for k, v in found.items()}
                except Exception:
                    pass
        self.started = True

    def close(self) -> None:
        """Wait for the network negatives' probes, stop the power plan, put every machine
        back the way it was (best effort, each outcome in :attr:`restored`), close the
        channels.

        After a signal, the restore is bounded instead: every machine's starts at once and
        the close waits :data:`RESTORE_BUDGET_S` for them (the probes, which touch no
        machine, are not waited for); each machine's outcome is in
        :attr:`restore_outcome`, and stderr says how to finish by hand what is not
        confirmed. A KeyboardInterrupt (a second Ctrl-C, or SIGTERM) while closing leaves
        the machines not yet restored as they are (said so in :attr:`restored`), sets
        :attr:`interrupted` and still closes the channels, within a short bound."""
        if received():
            self._close_interrupted(received() or "")
        else:
            try:
                if self.probes is not None:  # each probe is bounded by its own timeouts
                    self.probes.wait(self.call_timeout * 2 + 10)
                if self.plan is not None:
                    self.plan.stop()
            except KeyboardInterrupt:
                self.interrupted = True
            self.stopping.clear()
            for subject in self.subjects:
                if self.interrupted:
                    self.restored.setdefault(
                        subject.key, "not restored: the run was interrupted again before its "
                                     "restore")
                    continue
                try:
                    self.restored[subject.key] = self.restore(subject)
                except KeyboardInterrupt:
                    self.interrupted = True
                    self.restored[subject.key] = ("not restored: the run was interrupted "
                                                  "again during its restore")
                except Exception as exc:
                    self.restored[subject.key] = describe_error(exc)
        try:
            self.loop.run(self.host.close(), 2 if self.interrupted or received() else 30)
        except KeyboardInterrupt:
            self.interrupted = True
        except Exception:
            if not (self.interrupted or received()):
                raise
        finally:
            self.loop.close()

    def _close_interrupted(self, signal_name: str) -> None:
        """The bounded restore after a signal (see :data:`RESTORE_BUDGET_S`)."""
        deadline = time.monotonic() + RESTORE_BUDGET_S
        self.stopping.set()  # the plan's workers end the step in flight without waiting it out
        print(f"interrupted ({signal_name}): putting the machines back the way they were, "
              f"at most {RESTORE_BUDGET_S:g} s (Ctrl-C again leaves them as they are)",
              file=sys.stderr, flush=True)
        gates = {s.key: RestoreGate() for s in self.subjects}
        threads: list[threading.Thread] = []
        try:
            plan = self.plan
            if plan is not None:
                plan.stop(wait=False)  # no more steps; each machine's worker ends its own
            for subject in self.subjects:
                worker = plan.worker(subject.key) if plan is not None else None
                thread = threading.Thread(
                    target=self._restore_one, daemon=True,
                    args=(subject, gates[subject.key], worker, deadline),
                    name=f"powerplane-conformance-restore-{subject.key}")
                threads.append(thread)
                thread.start()
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            self.interrupted = True
        for each in gates.values():
            each.close()
        for subject in self.subjects:
            outcome, why = gates[subject.key].outcome(again=self.interrupted)
            self.restore_outcome[subject.key] = outcome
            self.restored[subject.key] = why
        self._say_by_hand()

    def _restore_one(self, subject: Subject, gate: RestoreGate,
                     worker: threading.Thread | None, deadline: float) -> None:
        """One machine's restore after a signal, once its plan worker (if any) is done."""
        if worker is not None:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                gate.finish("a power check's step on it was still in flight")
                return
        try:
            gate.finish(self.restore(subject, gate))
        except Exception as exc:
            gate.finish(describe_error(exc))

    def _say_by_hand(self) -> None:
        """After a bounded restore: how to finish by hand what it did not confirm."""
        left = [s for s in self.subjects
                if self.restore_outcome.get(s.key, RESTORED) != RESTORED
                and self.original.get(s.key) in (PowerState.ON, PowerState.OFF)
                and s.key not in self.terminated]
        if not left:
            return
        print("not put back the way they were; to finish by hand (with --config naming the "
              "deployment: the target file without its conformance: section):",
              file=sys.stderr)
        for s in left:
            original = self.original[s.key]
            verb = Verb.POWER_ON if original is PowerState.ON else Verb.SHUTDOWN
            word = RESTORE_WORDS[self.restore_outcome[s.key]]
            first = (f"read it first (`powerplane state {s.node}`); if it is not "
                     f"{original.value}, " if self.restore_outcome[s.key] == SENT_NOT_CONFIRMED
                     else "")
            print(f"  {s.key}: {word}; it was {original.value} at the start: {first}"
                  f"`powerplane invoke {s.node} {verb.value} --reason 'conformance restore' "
                  "--wait 60`", file=sys.stderr)
        sys.stderr.flush()

    def _subjects(self) -> list[Subject]:
        out = []
        for node in self.target.nodes:
            spec = self.deployment.nodes[node]
            for ref in spec.channels:
                if self.channel_filter and ref.channel != self.channel_filter:
                    continue
                ctype = self.deployment.channels[ref.channel].type.name
                out.append(Subject(node, ref.channel, ref.target, ctype))
        return out

    def subject(self, key: str | None) -> Subject:
        """The subject named ``node@channel`` or ``node`` (its first channel); None: the first."""
        if not self.subjects:
            raise LookupError("the target names no node with a channel to test"
                              + (f" on channel {self.channel_filter!r}"
                                 if self.channel_filter else ""))
        if key is None:
            return self.subjects[0]
        for s in self.subjects:
            if key in (s.key, s.node):
                return s
        raise LookupError(f"no subject {key!r} in the target; subjects: "
                          + ", ".join(s.key for s in self.subjects))

    def channels(self) -> dict[str, list[Subject]]:
        """Subjects grouped by channel."""
        out: dict[str, list[Subject]] = {}
        for s in self.subjects:
            out.setdefault(s.channel, []).append(s)
        return out

    def gate(self, spec: CheckSpec, verb: Verb | None, subject: Subject | None,
             assertion: str | None = None) -> Gate | None:
        """:func:`~powerplane_conformance.gate.gate` for a check on ``subject`` (None: one
        spanning a channel), with what this session knows and its target file allows."""
        return gate(
            spec, verb, assertion if assertion is not None else spec.assertion(verb).id,
            channel=subject.channel if subject else None,
            node=subject.node if subject else None,
            caps=self.caps(subject) if subject is not None else None,
            terminated=subject is not None and subject.key in self.terminated,
            allow_destructive=self.settings.allow_destructive,
            allow_terminate=self.settings.allow_terminate,
        )

    # -- facts -------------------------------------------------------------------------------
    def caps(self, subject: Subject) -> CapabilitySet | str:
        """The discovered capability set, or why discovery failed."""
        return self.host.capabilities(subject.channel, subject.target)

    def channel_of(self, subject: Subject) -> Channel:
        return self.host.channel(subject.channel)

    def plugin_of(self, type_name: str) -> dict[str, str]:
        """The plugin that registered a channel type: name, distribution, version."""
        if type_name in self._plugins:
            return self._plugins[type_name]
        owner = self.registry.owners.get(type_name, "")
        for info in self.registry.plugins:
            if info.name == owner:
                return {"name": info.name, "distribution": info.distribution,
                        "version": info.version}
        return {"name": owner, "distribution": "", "version": ""}

    def secrets(self, channel: str) -> list[tuple[str, str]]:
        """Every secret value the channel is configured with, as (config key, value)."""
        configured = self.deployment.channels[channel]
        out = []
        for key, ref in _secret_refs(configured.config):
            try:
                value = ref.reveal()
            except Exception:
                continue
            if value:
                out.append((key, value))
        return out

    # -- calls -------------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """Call a channel method (sync or async) on the session loop, bounded."""
        return self.loop.run(maybe_await(fn, *args), timeout or self.call_timeout)

    def slot(self, channel: Channel, target: Any) -> threading.BoundedSemaphore:
        """What bounds the suite's concurrent calls to one endpoint (the power plan's
        workers and the checks beside them): ``limits.per_endpoint``, as the host's."""
        try:
            where = channel.endpoint(target) if isinstance(channel, HasEndpoint) else ""
        except Exception:
            where = ""
        key = (id(channel), str(where))
        with self._slots_lock:
            sem = self._slots.get(key)
            if sem is None:
                sem = self._slots[key] = threading.BoundedSemaphore(
                    self.deployment.limits.per_endpoint)
            return sem

    def invoke(self, subject: Subject, verb: Verb, channel: Channel | None = None) -> Any:
        """Send ``verb`` straight to the channel (the rule is not the channel's to prove)."""
        ch = channel or self.channel_of(subject)
        fn = verb_method(ch, verb)
        if fn is None:
            raise ChannelError(f"the channel has no method {verb.method}()",
                               channel=subject.channel)
        with self.slot(ch, subject.target):
            return self.call(fn, subject.target)

    def read(self, subject: Subject, channel: Channel | None = None) -> Reading:
        ch = channel or self.channel_of(subject)
        with self.slot(ch, subject.target):
            reading = self.call(ch.read_power_state, subject.target)
        if not isinstance(reading, Reading):
            raise TypeError(f"read_power_state returned {type(reading).__name__}, not a Reading")
        return reading

    def fresh_channel(self, subject: Subject, overrides: dict[str, Any] | None = None) -> Channel:
        """A new instance of the subject's channel (a fresh session), config keys overridden."""
        configured = self.deployment.channels[subject.channel]
        raw = dict((self.deployment.raw or {}).get("channels", {}).get(subject.channel, {}))
        raw.pop("type", None)
        raw.update(overrides or {})
        try:
            config = configured.type.config.model_validate(
                raw, context={SECRET_KINDS: self.registry})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(config)'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False))
            keys = ", ".join(sorted(overrides or {})) or "none"
            raise DerivedConfigInvalid(
                f"the config the suite derived for channel {subject.channel} (keys set: "
                f"{keys}) is invalid for channel type {configured.type.name}: {problems}"
            ) from None

        async def make() -> Channel:
            return configured.type.factory(subject.channel, config)

        return self.loop.run(make(), self.call_timeout)

    def close_channel(self, channel: Channel) -> None:
        try:
            self.call(channel.close, timeout=10)
        except Exception:
            pass

    # -- readback ----------------------------------------------------------------------------
    def accepts(self, subject: Subject, want: PowerState) -> Callable[[Reading], bool]:
        """Whether a reading shows ``want``; off for a blind channel means "no longer on"."""
        caps = self.caps(subject)
        blind = isinstance(caps, CapabilitySet) and not caps.sees_power_off
        if want is PowerState.OFF and blind:
            return lambda r: r.state is not PowerState.ON
        return lambda r: r.state is want

    def wait_for(
        self,
        subject: Subject,
        want: PowerState,
        timeout: float | None = None,
        channel: Channel | None = None,
        full_window: bool = False,
        stop: threading.Event | None = None,
    ) -> Observation:
        """Read back until ``want`` shows (or for the whole window when ``full_window``);
        ``stop`` (default :attr:`stopping`) ends the wait at once when set."""
        stop = stop if stop is not None else self.stopping
        accept = self.accepts(subject, want)
        limit = timeout if timeout is not None else self.settings.settle_timeout_s
        obs = Observation(ok=False)
        start = time.monotonic()
        delays = poll_delays()
        while True:
            if stop.is_set():
                obs.error = obs.error or "the run was interrupted while waiting"
                break
            began = time.monotonic()
            try:
                reading = self.read(subject, channel)
                obs.states.append(reading.state.value)
                obs.detail = reading.detail
                obs.error = ""
                if accept(reading):
                    obs.ok = True
                    if not full_window:
                        break
            except Exception as exc:
                obs.states.append("error")
                obs.error = describe_error(exc)
            now = time.monotonic()
            obs.elapsed = now - start
            remaining = limit - obs.elapsed
            if remaining <= 0:
                break
            # the pause runs from the start of the last reading: a slow read is its own wait
            pause = next(delays) - (now - began)
            if pause > 0:
                stop.wait(min(pause, remaining))
        obs.elapsed = time.monotonic() - start
        return obs

    def ensure(self, subject: Subject, want: PowerState,
               gate: RestoreGate | None = None) -> str | None:
        """Bring the machine to ``want`` first; None when it is there, else why not. With
        ``gate`` (a restore after a signal) the verb leaves only while the gate is open, no
        person is asked, and the readback ends when it closes."""
        caps = self.caps(subject)
        if not isinstance(caps, CapabilitySet):
            return f"discovery failed: {caps}"
        try:
            if self.accepts(subject, want)(self.read(subject)):
                return None
        except Exception as exc:
            return f"readback failed: {describe_error(exc)}"
        verb = Verb.POWER_ON if want is PowerState.ON else Verb.SHUTDOWN
        if gate is None and self.stopping.is_set():
            return f"the run was interrupted before {verb.value} was sent to reach {want.value}"
        if not caps.advertises(verb):
            if want is PowerState.ON and self.settings.attended \
                    and self.settings.allow_destructive and gate is None:
                return self._power_on_by_hand(subject)
            return (f"the machine is not {want.value} and channel {subject.channel!r} does not "
                    f"advertise {verb.value} to make it so")
        if gate is not None and not gate.send(verb, want):
            return (f"the run ended its restores before {verb.value} was sent to reach "
                    f"{want.value}")
        try:
            self.invoke(subject, verb)
        except Exception as exc:
            return f"{verb.value} to reach {want.value} failed: {describe_error(exc)}"
        obs = self.wait_for(subject, want, stop=gate.closed if gate is not None else None)
        if not obs.ok:
            ident = "POWER_ON_READBACK" if verb is Verb.POWER_ON else "SHUTDOWN_READBACK"
            return (f"the machine did not read {want.value} after {verb.value} "
                    f"(see {ident}): {obs.describe()}")
        return None

    def _power_on_by_hand(self, subject: Subject) -> str | None:
        """The attended way back: a person powers the machine on at the rack, then the
        channel must read it on within the settle window (a channel that cannot see off
        can see on). None when it reads on; else why not (the check is NOT TESTED: the
        machine did not come back, which is no fault of the channel)."""
        cannot = (f"the machine is not on and channel {subject.channel!r} does not advertise "
                  "power-on to make it so")
        ask = self.power_on_by_hand
        if ask is None:
            return (f"{cannot}, and there is no person to ask: the target is attended, so run "
                    "`powerplane conformance` on a terminal (in this process, not "
                    "--subprocess), or pass run_suite(power_on_by_hand=...)")
        try:
            with BY_HAND:  # one prompt at a time, each naming its machine
                ask(subject.node, subject.target)
        except Exception as exc:
            return f"{cannot}, and asking a person to power it on failed: {describe_error(exc)}"
        obs = self.wait_for(subject, PowerState.ON)
        if not obs.ok:
            return (f"the machine did not read on after the person was asked to power on "
                    f"{subject.node} ({subject.target}) at the rack: {obs.describe()}")
        self.by_hand.append((subject.key, (
            f"the way back was a person: {subject.node} ({subject.target}) was powered on by "
            f"hand at the rack (channel {subject.channel} cannot power on), then read back "
            f"on: {obs.describe()}")))
        return None

    def restore(self, subject: Subject, gate: RestoreGate | None = None) -> str | None:
        """Bring the machine back to the state it had at the start; None when done (see
        :meth:`ensure` for ``gate``)."""
        if subject.key in self.terminated:
            return "the machine was terminated"
        original = self.original.get(subject.key)
        if original is None or original is PowerState.UNKNOWN:
            return "its original state is unknown"
        return self.ensure(subject, original, gate)
