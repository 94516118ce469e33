"""The one bounded channel call: the limiters, the send gate, the deadline, the error mapping.

Every call the host makes of a channel -- discovery, a verb of ``invoke`` or of a fleet
call, a readback, a boot marker -- goes through :meth:`Calls.each`, the one path that
carries the at-most-once promise (:meth:`Calls.call` is ``each`` for one job; a fleet
call runs one ``each`` per worker over its endpoint queues, so no second copy of the path
exists for speed). Per call it takes a unit of the endpoint's limiter
(``limits.per_endpoint``) and of the total one (``limits.total``), puts a fresh
:class:`~powerplane.channel.SendGate` in force, bounds the call by ``limits.timeout_s``
(a timer of its own, or a batch's shared :class:`~powerplane.scheduling.SharedDeadlines`),
and maps whatever escapes: a timeout after the request may have left is
:class:`~powerplane.errors.OutcomeUnknown`, one before it a
:class:`~powerplane.errors.ChannelTimeout`; a cancelled verb is recorded as a
:class:`~powerplane.channel.CutCall`; an unmapped exception a
:class:`~powerplane.errors.ProtocolError`. A plain-``def`` method runs in a daemon worker
thread (:mod:`powerplane.workers`), in a copy of the call's context so it sees the gate.

A device's manners (:class:`~powerplane.channel.Manners`: the channel type's defaults, a
channel's ``manners:`` key over them) are kept here too:

- concurrency: the endpoint's limiter holds ``min(limits.per_endpoint,
  manners.per_endpoint, manners.sessions)`` units;
- lock-out: an :class:`~powerplane.errors.AuthenticationFailed` of an endpoint is
  remembered by the host (:attr:`Calls.lockouts`: a one-shot command's process, and a
  runner's or the operator's whole life, for every pass), keyed by channel, endpoint and
  the channel's config (its secret references included), for ``manners.lockout_s``;
  meanwhile every call to that endpoint fails at once with that first error and a hint,
  and nothing logs in. The first call a host makes to an endpoint
  goes alone (the others wait for it, holding no limiter unit), so a fleet of 50 nodes
  behind one BMC with a wrong password makes one login attempt, not one per worker;
- pacing: power commands (:data:`VERB_METHODS`) to one endpoint run one at a time, each
  starting ``manners.min_interval_s`` after the previous one ended (the wait comes before
  the call's deadline starts and inside its gate: a command cancelled while it waits was
  not sent, and is recorded so).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from powerplane.channel import (
    NO_MANNERS,
    CutCall,
    Manners,
    SendGate,
    enter_gate,
    leave_gate,
    note_cut,
)
from powerplane.config import Deployment
from powerplane.errors import (
    AuthenticationFailed,
    ChannelTimeout,
    OutcomeUnknown,
    PowerplaneError,
    ProtocolError,
)
from powerplane.host.channels import Channels
from powerplane.scheduling import Limiter, SharedDeadlines, acquire_both, try_both
from powerplane.workers import call as in_worker

__all__ = ["VERB_METHODS", "Calls", "Job", "Lockouts", "Method", "target_key"]

VERB_METHODS = frozenset({"reboot", "shutdown", "power_on", "terminate", "invoke_batch"})
"""The channel methods that change a machine's state (their timeouts may be unknown outcomes)."""

Method = tuple[Callable[..., Any], bool]
"""A channel's bound method and whether it is ``async def``, as :meth:`Calls.method` finds it."""

_NOTHING_HELD: list[Any] = []
"""The locks a call that waits for no manners holds: none (never appended to; one shared
list, not one per call)."""

Job = tuple[Any, str, Any, tuple[Any, ...]]
"""One call for :meth:`Calls.each`: (node or None, channel, target, args); the node is
handed back to the caller's ``done`` or ``failed`` as it was given."""


def target_key(target: Any) -> Any:
    """``target`` as a dictionary key (a mapping target as its sorted JSON)."""
    try:
        hash(target)
        return target
    except TypeError:
        return json.dumps(target, sort_keys=True, default=str)


class Lockouts:
    """Authentication failures remembered per (channel, endpoint, config) for a window.

    One per host (:attr:`Calls.lockouts`): a BMC that refused these credentials is not asked
    again by the host until ``manners.lockout_s`` has passed (a changed config, its
    password reference included, is another key and tries again; so does a new process).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: dict[Any, tuple[float, AuthenticationFailed]] = {}

    def __bool__(self) -> bool:
        return bool(self._failed)

    def note(self, key: Any, error: AuthenticationFailed) -> None:
        """Remember ``error`` for ``key`` (the first one stays until its window ends)."""
        with self._lock:
            if key not in self._failed:
                self._failed[key] = (time.monotonic(), error)

    def recall(self, key: Any, window_s: float) -> tuple[float, AuthenticationFailed] | None:
        """(seconds since, the first error) of ``key`` within ``window_s``; else None."""
        with self._lock:
            hit = self._failed.get(key)
            if hit is None:
                return None
            age = time.monotonic() - hit[0]
            if age >= window_s:
                del self._failed[key]
                return None
            return age, hit[1]

    def forget(self) -> None:
        """Forget every failure (an embedder whose credentials were fixed; tests)."""
        with self._lock:
            self._failed.clear()



def locked_out(first: AuthenticationFailed, age: float, window_s: float, name: str,
               target: Any) -> AuthenticationFailed:
    """The error a call to a locked-out endpoint fails with: ``first``'s class and words,
    and the hint."""
    words = (
        f"{first.message} [not tried again: this endpoint refused these credentials "
        f"{age:.0f} s ago, and a device locks out a client that keeps trying; calls to it "
        f"fail at once for {window_s:g} s (manners.lockout_s). Fix the credentials: a new "
        f"process, or a changed channel config, tries again]")
    try:
        error = type(first)(words, channel=name, target=target)
    except TypeError:  # a subclass with arguments of its own
        error = AuthenticationFailed(words, channel=name, target=target)
    error.__suppress_context__ = True
    return error


class Calls:
    """The bounded calls of one host's channels (see the module docstring)."""

    def __init__(self, deployment: Deployment, channels: Channels) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self.channels = channels
        self.lockouts = Lockouts()
        """The authentication failures this host remembers (see :class:`Lockouts`)."""
        self.total: Limiter | None = None
        """The bound on every call at once (``limits.total``), made by :meth:`start`."""
        self.endpoints: dict[Any, Limiter] = {}
        self.gave_up: set[str] = set()
        """Channels with a plain-def call the host gave up on (its thread may still run):
        closed with :data:`~powerplane.host.channels.CLOSE_GRACE_S`, not ``limits.timeout_s``."""
        self._async: dict[tuple[str, str], bool] = {}
        self._manners: dict[str, tuple[Manners, str]] = {}
        """Channel name -> (its manners, its config as a lock-out key part)."""
        self._tried: set[Any] = set()
        """Endpoints a call of this host has ended at (not by an authentication failure
        remembered since): their calls need not go alone."""
        self._probes: dict[Any, asyncio.Lock] = {}
        self._paces: dict[Any, asyncio.Lock] = {}
        self._ended: dict[Any, float] = {}
        """Endpoint -> when its last power command ended (loop time)."""

    def start(self) -> None:
        """Make the total limiter (calls are refused before it exists)."""
        self.total = Limiter(self.limits.total)

    def manners(self, name: str) -> tuple[Manners, str]:
        """Channel ``name``'s manners and its config as a lock-out key part (found once)."""
        found = self._manners.get(name)
        if found is None:
            configured = self.deployment.channels.get(name)
            found = self._manners[name] = (
                (configured.effective_manners, repr(configured.config))
                if configured is not None else (NO_MANNERS, ""))
        return found

    def limiter(self, endpoint: Any) -> Limiter:
        """The limiter that bounds concurrent calls to ``endpoint``: ``limits.per_endpoint``,
        lowered by the channel's ``manners.per_endpoint`` and ``manners.sessions``."""
        sem = self.endpoints.get(endpoint)
        if sem is None:
            name = endpoint[0] if isinstance(endpoint, tuple) else endpoint
            bound = (self.manners(name)[0].concurrency(self.limits.per_endpoint)
                     if isinstance(name, str) else self.limits.per_endpoint)
            sem = self.endpoints[endpoint] = Limiter(bound)
        return sem

    def lockout(self, name: str, endpoint: Any, target: Any) -> AuthenticationFailed | None:
        """The error a call to ``endpoint`` fails with at once, if it is locked out."""
        manners, config = self.manners(name)
        hit = self.lockouts.recall((name, endpoint, config), manners.lockout_s)
        if hit is None:
            return None
        return locked_out(hit[1], hit[0], manners.lockout_s, name, target)

    async def _manners_wait(self, name: str, endpoint: Any, target: Any, paced: bool,
                            held: list[Any]) -> None:
        """Before a call: wait for the endpoint's first call to end (then raise its
        remembered authentication failure, if it was one), and for a power command's
        turn and interval. Locks taken are appended to ``held`` (released by the caller)."""
        if endpoint not in self._tried:
            probe = self._probes.get(endpoint)
            if probe is None:
                probe = self._probes[endpoint] = asyncio.Lock()
            await probe.acquire()
            if endpoint in self._tried:
                probe.release()
            else:
                held.append(probe)  # this call goes alone: the endpoint's first
            if self.lockouts:
                failure = self.lockout(name, endpoint, target)
                if failure is not None:
                    raise failure
        if paced:
            pace = self._paces.get(endpoint)
            if pace is None:
                pace = self._paces[endpoint] = asyncio.Lock()
            await pace.acquire()
            held.append(pace)
            ended = self._ended.get(endpoint)
            if ended is not None:
                loop = asyncio.get_running_loop()
                left = ended + self.manners(name)[0].min_interval_s - loop.time()
                if left > 0:
                    await asyncio.sleep(left)

    def _manners_done(self, endpoint: Any, paced: bool, held: list[Any]) -> None:
        """After a call that waited in :meth:`_manners_wait`: the endpoint tried, the
        power command's end noted, the locks released."""
        if held and held[0] is self._probes.get(endpoint):
            self._tried.add(endpoint)
        if paced:
            self._ended[endpoint] = asyncio.get_running_loop().time()
        for lock in held:
            lock.release()

    def method(self, name: str, method: str) -> Method:
        """Channel ``name``'s ``method`` (the channel created on first use) and whether it
        is async; raises why there is none (the channel cannot be opened, or lacks it)."""
        channel = self.channels.get(name)
        if channel is None:
            raise self.channels.unopened(name)
        fn = getattr(channel, method, None)
        if fn is None:
            raise ProtocolError(f"the channel has no method {method}()", channel=name)
        is_async = self._async.get((name, method))
        if is_async is None:
            is_async = self._async[(name, method)] = inspect.iscoroutinefunction(fn)
        return fn, is_async

    async def call(
        self, name: str, method: str, target: Any, *args: Any,
        deadlines: SharedDeadlines | None = None, node: str | None = None,
        endpoint: Any = None,
    ) -> Any:
        """Call ``method`` of channel ``name`` for ``target`` (with ``args``: instead of the
        target), bounded, gated, timed and mapped: :meth:`each` for one job.

        ``deadlines``: a batch's shared timer, else a timer of its own; ``node``: the node
        the call is for, where the caller knows it (a cut verb names it); ``endpoint``: the
        limiter's key as the caller already computed it.
        """
        box: list[tuple[bool, Any]] = []
        if endpoint is None:
            endpoint = self.channels.endpoint(name, target)
        await self.each(deque((endpoint,)), {endpoint: deque(((node, name, target, args),))},
                        method, deadlines,
                        lambda _n, _c, value: box.append((True, value)),
                        lambda _n, _c, error: box.append((False, error)))
        ok, value = box[0]
        if ok:
            return value
        if value.__cause__ is not None or value.__suppress_context__:
            raise value from value.__cause__  # None: as `from None`
        raise value

    async def each(
        self, slots: deque[Any], queues: Mapping[Any, deque[Job]], method: str,
        deadlines: SharedDeadlines | None,
        done: Callable[[Any, str, Any], None],
        failed: Callable[[Any, str, PowerplaneError], None],
        methods: Mapping[str, Method | None] | None = None,
        before: Callable[[Job], None] | None = None,
    ) -> None:
        """THE call path. Until ``slots`` is empty: take the next endpoint from it, and
        call ``method`` for each ``(node, channel, target, args)`` of that endpoint's queue
        in turn, bounded by the endpoint's and the total limiter, through a fresh
        :class:`~powerplane.channel.SendGate`, timed by ``deadlines`` (a batch's shared
        timer; None: ``limits.timeout_s`` of its own); hand the answer to ``done`` or the
        mapped error to ``failed`` (``node`` is the caller's, as given; ``args`` empty: the
        target alone). A fleet call runs one of these per worker over the same slots
        (:func:`~powerplane.scheduling.slots_of`) and queues; :meth:`call` runs it for
        one job. ``methods``: the channels' ``method`` as looked up once for many jobs
        (None: looked up per job); ``before``: called with each job as it starts.
        """
        total = self.total
        assert total is not None, "use 'async with PowerHost(...)' or await start()"
        endpoints, timeout = self.endpoints, self.limits.timeout_s
        tried, lockouts, verbs = self._tried, self.lockouts, method in VERB_METHODS
        batched = method.endswith("_batch")
        while slots:
            endpoint = slots.popleft()
            queue = queues[endpoint]
            sem = endpoints.get(endpoint)
            if sem is None:
                sem = self.limiter(endpoint)
            while queue:
                job = queue.popleft()
                node, name, target, args = job
                if before is not None:
                    before(job)
                how = methods.get(name) if methods is not None else None
                if how is None:
                    try:
                        how = self.method(name, method)
                    except PowerplaneError as exc:
                        failed(node, name, exc)
                        continue
                fn, is_async = how
                if lockouts:
                    failure = self.lockout(name, endpoint, target)
                    if failure is not None:
                        failed(node, name, failure)
                        continue
                error: PowerplaneError | None = None
                manners = self._manners.get(name) or self.manners(name)
                paced = verbs and manners[0].min_interval_s > 0
                waits = paced or (endpoint not in tried and manners[0].lockout_s > 0)
                held: list[Any] = [] if waits else _NOTHING_HELD
                gate = SendGate()
                token = enter_gate(gate)
                try:
                    # free units are taken by a plain call: no awaitable unless it must wait
                    if not try_both(sem, total):
                        await acquire_both(sem, total)
                    try:
                        if waits:
                            await self._manners_wait(name, endpoint, target, paced, held)
                        if deadlines is None:
                            async with asyncio.timeout(timeout):
                                if is_async:
                                    result = await (fn(*args) if args else fn(target))
                                else:
                                    result = await in_worker(fn, *(args or (target,)))
                                    if inspect.isawaitable(result):
                                        result = await result
                        else:
                            with deadlines.bound():
                                if is_async:
                                    result = await (fn(*args) if args else fn(target))
                                else:
                                    result = await in_worker(fn, *(args or (target,)))
                                    if inspect.isawaitable(result):
                                        result = await result
                    except asyncio.CancelledError:
                        # a cancelled call never sends afterwards
                        self._cut(gate, name, method, target, is_async, node)
                        raise
                    except Exception as exc:
                        if not is_async and isinstance(exc, TimeoutError):
                            self.gave_up.add(name)
                        error = self._mapped(exc, gate, name, method, target)
                        if isinstance(error, AuthenticationFailed):
                            self._note_lockout(name, endpoint, error)
                    finally:
                        if waits:
                            self._manners_done(endpoint, paced, held)
                        total.release()
                        sem.release()
                finally:
                    leave_gate(token)
                if error is None:
                    if batched and isinstance(result, list | tuple):
                        # a batch's per-target outcomes: one refused login is remembered
                        refused = next((r for r in result
                                        if isinstance(r, AuthenticationFailed)), None)
                        if refused is not None:
                            self._note_lockout(name, endpoint, refused)
                    done(node, name, result)
                else:
                    failed(node, name, error)

    def _note_lockout(self, name: str, endpoint: Any, error: AuthenticationFailed) -> None:
        """Remember an authentication failure of ``endpoint`` (manners.lockout_s > 0)."""
        manners, config = self.manners(name)
        if manners.lockout_s > 0:
            self.lockouts.note((name, endpoint, config), error)

    def _mapped(
        self, exc: Exception, gate: SendGate, name: str, method: str, target: Any
    ) -> PowerplaneError:
        """The error a call that raised ``exc`` ends with (its gate closed where that
        decides it): a timeout after the request may have left is
        :class:`~powerplane.errors.OutcomeUnknown`, one before it a
        :class:`~powerplane.errors.ChannelTimeout` saying nothing was sent; a plugin's
        own error as it is; anything else a :class:`~powerplane.errors.ProtocolError`."""
        changes_state = method in VERB_METHODS
        error: PowerplaneError
        if isinstance(exc, ChannelTimeout):
            # the plugin's own timeout: once its request may have left, unknown
            if changes_state and (gate.close() or not self.channels.gated(name)):
                error = OutcomeUnknown(exc.message, channel=name, target=target)
                error.__cause__ = exc
                return error
            return exc
        if isinstance(exc, PowerplaneError):
            return exc
        if isinstance(exc, TimeoutError):
            sent = gate.close()
            what = f"no answer within {self.limits.timeout_s:g} s (limits.timeout_s)"
            if changes_state and (sent or not self.channels.gated(name)):
                error = OutcomeUnknown(what, channel=name, target=target)
            else:
                error = ChannelTimeout(what + ("; nothing was sent" if changes_state else ""),
                                       channel=name, target=target)
            error.__suppress_context__ = True  # as ``raise ... from None``
            return error
        error = ProtocolError(
            f"the plugin let an unmapped {type(exc).__module__}.{type(exc).__name__} "
            f"escape from {method}()",
            channel=name,
            target=target,
        )
        error.__cause__ = exc
        return error

    def _cut(self, gate: SendGate, name: str, method: str, target: Any, is_async: bool,
             node: str | None) -> None:
        """A call cancelled before it answered: close its gate (nothing leaves after this)
        and, for a verb, record what the gate knew (:func:`~powerplane.channel.cut_calls`)."""
        sent = gate.close()
        if not is_async:
            self.gave_up.add(name)
        if method not in VERB_METHODS:
            return
        key = target_key(target)
        nodes = (node,) if node is not None else tuple(
            n for n, spec in self.deployment.nodes.items()
            if any(r.channel == name and target_key(r.target) == key for r in spec.channels))
        note_cut(CutCall(name, method, target, nodes,
                         True if sent else (False if self.channels.gated(name) else None)))
