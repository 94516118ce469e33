"""The one bounded channel call: the limiters, the send gate, the deadline, the error mapping.

Every call the host makes of a channel -- discovery, a verb of ``invoke`` or of a fleet
call, a readback, a boot marker -- is :meth:`Calls.call`, the path that carries the
at-most-once promise: it takes a unit of the endpoint's limiter (``limits.per_endpoint``)
and of the total one (``limits.total``), puts a fresh :class:`~powerplane.channel.SendGate`
in force, bounds the call by ``limits.timeout_s`` (its own timer, or a batch's shared
:class:`~powerplane.scheduling.SharedDeadlines`), and maps whatever escapes: a timeout after
the request may have left is :class:`~powerplane.errors.OutcomeUnknown`, one before it a
:class:`~powerplane.errors.ChannelTimeout`; a cancelled verb is recorded as a
:class:`~powerplane.channel.CutCall`; an unmapped exception a
:class:`~powerplane.errors.ProtocolError`. A plain-``def`` method runs in a daemon worker
thread (:mod:`powerplane.workers`), in a copy of the call's context so it sees the gate.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

from powerplane.channel import CutCall, SendGate, note_cut
from powerplane.config import Deployment
from powerplane.errors import ChannelTimeout, OutcomeUnknown, PowerplaneError, ProtocolError
from powerplane.host.channels import Channels
from powerplane.scheduling import Limiter, SharedDeadlines, acquire_both, try_both
from powerplane.workers import call as in_worker

__all__ = ["VERB_METHODS", "Calls", "Method", "target_key"]

VERB_METHODS = frozenset({"reboot", "shutdown", "power_on", "terminate", "invoke_batch"})
"""The channel methods that change a machine's state (their timeouts may be unknown outcomes)."""

Method = tuple[Callable[..., Any], bool]
"""A channel's bound method and whether it is ``async def``, as :meth:`Calls.method` finds it."""


def target_key(target: Any) -> Any:
    """``target`` as a dictionary key (a mapping target as its sorted JSON)."""
    try:
        hash(target)
        return target
    except TypeError:
        return json.dumps(target, sort_keys=True, default=str)


class Calls:
    """The bounded calls of one host's channels (see the module docstring)."""

    def __init__(self, deployment: Deployment, channels: Channels) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self.channels = channels
        self.total: Limiter | None = None
        """The bound on every call at once (``limits.total``), made by :meth:`start`."""
        self.endpoints: dict[Any, Limiter] = {}
        self.gave_up: set[str] = set()
        """Channels with a plain-def call the host gave up on (its thread may still run):
        closed with :data:`~powerplane.host.channels.CLOSE_GRACE_S`, not ``limits.timeout_s``."""
        self._async: dict[tuple[str, str], bool] = {}

    def start(self) -> None:
        """Make the total limiter (calls are refused before it exists)."""
        self.total = Limiter(self.limits.total)

    def limiter(self, endpoint: Any) -> Limiter:
        """The limiter that bounds concurrent calls to ``endpoint`` (limits.per_endpoint)."""
        sem = self.endpoints.get(endpoint)
        if sem is None:
            sem = self.endpoints[endpoint] = Limiter(self.limits.per_endpoint)
        return sem

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
        how: Method | None = None, endpoint: Any = None,
    ) -> Any:
        """Call ``method`` of channel ``name`` for ``target`` (with ``args``: instead of the
        target), bounded, gated, timed and mapped.

        ``deadlines``: a batch's shared timer, else a timer of its own; ``node``: the node
        the call is for, where the caller knows it (a cut verb names it); ``how`` and
        ``endpoint``: :meth:`method` and :meth:`~Channels.endpoint` as the caller already
        looked them up for many calls (a fleet call looks each up once per channel).
        """
        total = self.total
        assert total is not None, "use 'async with PowerHost(...)' or await start()"
        fn, is_async = how if how is not None else self.method(name, method)
        if endpoint is None:
            endpoint = self.channels.endpoint(name, target)
        sem = self.endpoints.get(endpoint)
        if sem is None:
            sem = self.limiter(endpoint)
        call_args = args if args else (target,)
        with SendGate() as gate:
            # free units are taken by a plain call: no awaitable unless the call must wait
            if not try_both(sem, total):
                await acquire_both(sem, total)
            try:
                try:
                    if deadlines is None:
                        async with asyncio.timeout(self.limits.timeout_s):
                            if is_async:
                                return await fn(*call_args)
                            result = await in_worker(fn, *call_args)
                            return (await result) if inspect.isawaitable(result) else result
                    with deadlines.bound():
                        if is_async:
                            return await fn(*call_args)
                        result = await in_worker(fn, *call_args)
                        return (await result) if inspect.isawaitable(result) else result
                except asyncio.CancelledError:
                    # a cancelled call never sends afterwards
                    self._cut(gate, name, method, target, is_async, node)
                    raise
                except Exception as exc:
                    if not is_async and isinstance(exc, TimeoutError):
                        self.gave_up.add(name)
                    error = self._mapped(exc, gate, name, method, target)
                    if error is exc:
                        raise
                    raise error from error.__cause__  # None: as `from None`
            finally:
                total.release()
                sem.release()

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
