"""Outcomes of a check, counted separately and never merged, and one check's result."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

__all__ = ["Outcome", "Result"]


class Outcome(str, Enum):
    """What became of one check."""

    PASS = "pass"
    """The channel advertised the behaviour and showed it."""
    FAIL = "fail"
    """The channel advertised the behaviour and misbehaved (or an xfail passed unexpectedly)."""
    SKIP = "skip"
    """The channel does not advertise what the check needs."""
    NOT_TESTED = "not_tested"
    """The target file blocks the check (allow_destructive off, no negative hints, ...)."""
    XFAIL = "xfail"
    """A defect the target file declares, and it occurred."""

    def __str__(self) -> str:
        return self.value


@dataclass
class Result:
    """One check on one channel (and node): its assertion, outcome and what was observed."""

    id: str
    text: str
    channel: str | None
    node: str | None
    verb: str | None
    outcome: Outcome
    message: str = ""
    latency_s: float | None = None
    test: str = ""
    restore_failed: str | None = None
    """Why putting the machine back after the check did not succeed (None: it did, or the
    check changed nothing). The message says so too."""
    duration_s: float | None = None
    """The check's wall seconds: its setup, call and teardown as pytest timed them (the
    first check of a suite class includes starting the session, the last one closing it)."""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data
