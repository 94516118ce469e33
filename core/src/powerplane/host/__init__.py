"""The host: discovers channels' capabilities, offers verbs under the rule, invokes them.

:class:`Host` (:mod:`~powerplane.host.facade`) is the engine; an embedder uses
:class:`powerplane.PowerHost`, the runtime's ``Host`` composed with its deployment's authority
and guard (:mod:`powerplane.runtime`). The package is split by concern, each module
importing only those below it::

    facade      Host: checks arguments, delegates
    invoking    the rule again at dispatch, the guard, one node or a fleet (Plan, InvokeResult)
    reading     power state read back, boot markers, the wait for a verb's state
    discovery   capabilities per (channel, target), batched per endpoint
    cache       the rule's verdicts: one RuleCache, one invalidate()
    calls       the ONE bounded call: limiters + send gate + deadline + error mapping
    channels    the open channels: created on first use, traits found once, closed

Every channel call -- discovery, a verb (one node or a fleet's), a readback -- is
:meth:`powerplane.host.calls.Calls.each` (one job: ``Calls.call``), the path that carries
the at-most-once promise.
"""

from __future__ import annotations

from powerplane.host.facade import Host, has_lifecycle
from powerplane.host.invoking import GUARDED, InvokeGuard, InvokeResult, Plan
from powerplane.host.reading import ChannelReading, NodeReading

__all__ = ["GUARDED", "ChannelReading", "Host", "InvokeGuard", "InvokeResult", "NodeReading",
           "Plan", "has_lifecycle"]
