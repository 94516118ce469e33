"""The suite's plain vocabulary, at the bottom of its layers: what a subject is, what a
readback wait observed, the state each verb leads to and is tested from, how readback
waits are paced, the outcomes of a restore after a signal, and the handles of the workers a
session owns. No module of the suite below this one; every one above may import it.

The layers of the distribution, each importing only those below it (kept by the
``conformance-layers`` import contract in the workspace's pyproject.toml): see the
package docstring of :mod:`powerplane_conformance`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from powerplane import PowerState, Verb

__all__ = [
    "END_STATE",
    "MAX_POLL_S",
    "NOT_RESTORED",
    "ONE_NODE",
    "RESTORED",
    "RESTORE_BUDGET_S",
    "RESTORE_WORDS",
    "SENT_NOT_CONFIRMED",
    "START_STATE",
    "VERBS3",
    "DerivedConfigInvalid",
    "Observation",
    "PlanHandle",
    "PowerOnByHand",
    "ProbesHandle",
    "Subject",
    "describe_error",
    "poll_delays",
]

END_STATE = {Verb.REBOOT: PowerState.ON, Verb.POWER_ON: PowerState.ON,
             Verb.SHUTDOWN: PowerState.OFF, Verb.TERMINATE: PowerState.OFF}
"""The state each verb leads to."""
START_STATE = {Verb.REBOOT: PowerState.ON, Verb.POWER_ON: PowerState.OFF,
               Verb.SHUTDOWN: PowerState.ON, Verb.TERMINATE: PowerState.ON}
"""The state each verb is tested from."""


VERBS3 = (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON)
"""The verbs every machine can be brought back from (terminate never is)."""
ONE_NODE = "the target names fewer than two nodes on one channel"
"""How a concurrency check that had one node to act on starts its NOT TESTED reason (the
report then calls the verb verified on one node, its concurrency not verified)."""


@dataclass(frozen=True)
class Subject:
    """One node as one of its channels addresses it."""

    node: str
    channel: str
    target: Any
    type_name: str

    @property
    def key(self) -> str:
        return f"{self.node}@{self.channel}"


@dataclass
class Observation:
    """What readback showed while waiting for a state."""

    ok: bool
    states: list[str] = field(default_factory=list)
    detail: str = ""
    elapsed: float = 0.0
    error: str = ""

    def describe(self) -> str:
        """``off, then unknown x3, then on (5 readings over 1.2 s)``."""
        runs: list[list[Any]] = []
        for s in self.states:
            if runs and runs[-1][0] == s:
                runs[-1][1] += 1
            else:
                runs.append([s, 1])
        seq = ", then ".join(f"{s} x{n}" if n > 1 else str(s) for s, n in runs) or "nothing"
        text = f"{seq} ({len(self.states)} readings over {self.elapsed:.1f} s)"
        if self.detail:
            text += f"; last detail: {self.detail}"
        if self.error:
            text += f"; error: {self.error}"
        return text


PowerOnByHand = Callable[[str, Any], None]
"""A person at the rack, asked to power on ``(node, target)``; returns once they say it is
done (what they say proves nothing: the suite reads the machine back)."""




class DerivedConfigInvalid(ValueError):
    """A config the suite built (from hints or declarations) that the channel's own model
    rejects: the check that needed it is NOT TESTED, never FAIL."""


RESTORE_BUDGET_S = 0.7
"""After a signal, the seconds the session's close gives the restore of every machine, all
started at once (the power plan's worker of a machine ends its step in flight first, within
the same budget): so that Ctrl-C or SIGTERM ends a run within about a second. A machine that
reads its state at the start within it is :data:`RESTORED`; one whose power-on (or shutdown)
was sent but that no reading showed back in its state within it is
:data:`SENT_NOT_CONFIRMED`; one whose verb was never sent is :data:`NOT_RESTORED`. Nothing
is sent once the budget is over, and nothing is called restored without a reading."""
RESTORED = "restored"
"""A machine read back in the state it had at the start."""
SENT_NOT_CONFIRMED = "sent_not_confirmed"
"""The verb that puts a machine back was sent, and no reading confirmed it: outcome unknown."""
NOT_RESTORED = "not_restored"
"""Nothing was sent to put the machine back (or it could not be)."""
RESTORE_WORDS = {RESTORED: "restored",
                 SENT_NOT_CONFIRMED: "restore sent, not confirmed (outcome unknown)",
                 NOT_RESTORED: "not restored"}
"""How a person reads each restore outcome."""


FIRST_POLL_S = 0.02
"""The pause before the second reading while waiting for a state (most changes show early)."""
POLL_GROWTH = 1.5
"""Each later pause is this much longer than the one before ..."""
MAX_POLL_S = 0.5
"""... up to this: a change that takes long is seen within half a second of showing."""


def poll_delays() -> Iterator[float]:
    """The pauses between readings while waiting for a state, from the start of one reading
    to the start of the next: fast at first, then backing off (0.02 s, 0.03 s, 0.045 s, ...,
    at most :data:`MAX_POLL_S`). Endless; the settle window bounds the wait."""
    delay = FIRST_POLL_S
    while True:
        yield delay
        delay = min(delay * POLL_GROWTH, MAX_POLL_S)


def describe_error(exc: BaseException) -> str:
    """``RefusedByDevice: channel 'lab', target m1: no such machine``."""
    return f"{type(exc).__name__}: {exc}"


class PlanHandle(Protocol):
    """What a session owns of its power plan (:class:`powerplane_conformance.plan.Plan`):
    it stops the plan when it closes, and after a signal waits for each machine's worker
    before putting that machine back."""

    def stop(self, wait: bool = True) -> None:
        """No more steps; with ``wait``, wait for the workers too."""

    def worker(self, key: str) -> threading.Thread | None:
        """The started worker that changes machine ``key``, if any."""


class ProbesHandle(Protocol):
    """What a session owns of its network probes
    (:class:`powerplane_conformance.probes.Probes`): it waits for them when it closes."""

    def wait(self, timeout: float) -> None:
        """Wait for every probe, at most ``timeout`` each."""
