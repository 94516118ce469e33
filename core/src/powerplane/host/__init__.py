"""The host: discovers channels' capabilities, offers verbs under the rule, invokes them.

:class:`PowerHost` is the façade an embedder uses; the package splits it by concern.
"""

from __future__ import annotations

from powerplane.host.facade import (
    GUARDED,
    ChannelReading,
    InvokeGuard,
    InvokeResult,
    NodeReading,
    Plan,
    PowerHost,
)

__all__ = ["GUARDED", "ChannelReading", "InvokeGuard", "InvokeResult", "NodeReading", "Plan",
           "PowerHost"]
