"""What a running check works with: :class:`CheckContext` (its session, subject and verb,
and the ways to end), and :data:`CONTEXTS`, every session of a run.

Above :mod:`powerplane_conformance.session`, which it names, and below the checks that use it
(:mod:`.concurrency`, :mod:`.discovery`, :mod:`.negatives`, :mod:`.readback`, :mod:`.verbs`)
and the suite that builds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from powerplane import CapabilitySet, Verb
from powerplane_conformance.checks import (
    NOT_TESTED,
    NOT_TESTED_PREFIX,
    RESTORE_FAILED,
    SECRETS,
    CheckSpec,
    redact,
)
from powerplane_conformance.model import describe_error

if TYPE_CHECKING:
    from powerplane_conformance.session import ConformanceSession, Subject

__all__ = ["CONTEXTS", "CheckContext"]

CONTEXTS = pytest.StashKey["list[ConformanceSession]"]()
"""Per config: every session run, for results.json."""


class CheckContext:
    """What a running check works with: the session, its subject, the verb, and the ways
    to end (``fail``, ``not_tested``, ``skip``)."""

    def __init__(
        self,
        item: pytest.Item,
        session: ConformanceSession,
        spec: CheckSpec,
        subject: Subject | None,
        verb: Verb | None,
    ) -> None:
        self.item = item
        self.session = session
        self.spec = spec
        self.subject_or_none = subject
        self.verb = verb
        self.assertion = spec.assertion(verb)
        self.settings = session.settings

    @property
    def subject(self) -> Subject:
        assert self.subject_or_none is not None, "a per-channel check has no single subject"
        return self.subject_or_none

    @property
    def caps(self) -> CapabilitySet:
        caps = self.session.caps(self.subject)
        assert isinstance(caps, CapabilitySet)
        return caps

    def _secrets(self) -> set[str]:
        return self.item.config.stash.setdefault(SECRETS, set())

    def remember_secret(self, value: str) -> None:
        """Redact ``value`` from every message of the run."""
        if value:
            self._secrets().add(value)

    def fail(self, expected: str, observed: str) -> NoReturn:
        """End as FAIL: the assertion, what was expected and what was observed."""
        text = (f"{self.assertion.id}: {self.assertion.text}\n"
                f"  expected: {expected}\n  observed: {observed}")
        # from None: the report shows the assertion, not the exception being handled
        raise pytest.fail.Exception(redact(text, self._secrets()), pytrace=False) from None

    def not_tested(self, reason: str) -> NoReturn:
        """End as NOT TESTED: the target file (or a failed precondition) blocks this check."""
        self.item.stash[NOT_TESTED] = True
        pytest.skip(NOT_TESTED_PREFIX + redact(reason, self._secrets()))

    def skip(self, reason: str) -> NoReturn:
        """End as SKIP: the channel does not advertise what the check needs."""
        pytest.skip(redact(reason, self._secrets()))

    def restore(self, subject: Subject) -> None:
        """Put ``subject`` back the way it was at the start; when that does not succeed
        (an error, or the reason it could not), the check's result says so."""
        try:
            why = self.session.restore(subject)
        except Exception as exc:
            why = describe_error(exc)
        if why is not None:
            self.item.stash.setdefault(RESTORE_FAILED, []).append(
                redact(f"{subject.key}: {why}", self._secrets()))

    def latency(self, seconds: float) -> None:
        """Record how long the verb took to settle (a JUnit property and in results.json)."""
        self.item.user_properties.append(("latency_s", round(seconds, 3)))

    def precondition(self, subject: Subject, want: Any) -> None:
        """Bring the machine to ``want`` or end as NOT TESTED with why not."""
        why = self.session.ensure(subject, want)
        if why is not None:
            self.not_tested(f"precondition not met on {subject.key}: {why}")
