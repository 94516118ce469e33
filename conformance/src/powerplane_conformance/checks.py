"""The machinery of one check: the ``@check`` declaration (assertion, verb requirement or
common to all channels, destructive or not) and the marks a run leaves on each item; the
context a running check works with is :mod:`powerplane_conformance.context`, above the
session it holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import pytest

from powerplane import PowerState, Verb
from powerplane_conformance.assertions import ASSERTIONS, Assertion, assertion_id
from powerplane_conformance.model import START_STATE

__all__ = [
    "ALL_SUBJECTS",
    "RESTORE_FAILED",
    "CheckSpec",
    "Start",
    "check",
    "redact",
    "spec_of",
]

F = TypeVar("F", bound=Callable[..., Any])

Start = Literal["verb", "on", "off"]
"""The power state a check brings its machine to before it acts: the state its verb is
tested from (``verb``: on for reboot and shutdown, off for power-on), or on, or off."""

ALL_SUBJECTS = "*"
"""The subject id of a check that spans every subject of a channel (concurrency)."""

META = pytest.StashKey[dict[str, Any]]()
"""Per item: the assertion id, text, channel, node and verb of the check."""
NOT_TESTED = pytest.StashKey[bool]()
"""Per item: the skip is a NOT TESTED (blocked by the target file), not a SKIP."""
XFAIL = pytest.StashKey[str]()
"""Per item: the declared defect's reason (strict xfail)."""
SECRETS = pytest.StashKey[set[str]]()
"""Per config: every secret value seen, redacted from every message."""
RESTORE_FAILED = pytest.StashKey[list[str]]()
"""Per item: why putting a machine back after the check did not succeed, one per machine."""

NOT_TESTED_PREFIX = "NOT TESTED: "


@dataclass(frozen=True)
class CheckSpec:
    """What a check proves and what it needs."""

    template: str
    """Assertion id, with ``{VERB}`` for checks parametrized by verb."""
    verbs: tuple[Verb, ...] = ()
    """The verbs it is parametrized over (each one its requirement)."""
    verb: Verb | None = None
    """The one verb it requires (when not parametrized)."""
    common: bool = False
    """Applies to every channel, whatever it advertises."""
    absent: bool = False
    """Applies to the verbs a channel does NOT advertise (the refusal check)."""
    destructive: bool = False
    """Changes power state: NOT TESTED unless ``allow_destructive``."""
    per_channel: bool = False
    """Spans all subjects of a channel at once (concurrency)."""
    start: Start | None = None
    """The power state the check brings its machine to first (None: it works in any state,
    or does not say). The suite leaves a machine as an earlier check left it, instead of
    restoring it, when this next check would only undo the restore."""

    def assertion(self, verb: Verb | None) -> Assertion:
        return ASSERTIONS[assertion_id(self.template, verb)]

    def start_state(self, verb: Verb | None) -> PowerState | None:
        """The state the check brings its machine to first, for ``verb``; None: any."""
        if self.start == "verb":
            return START_STATE[verb] if verb is not None else None
        if self.start is None:
            return None
        return PowerState(self.start)


def check(
    template: str,
    *,
    verb: Verb | None = None,
    verbs: Sequence[Verb] = (),
    common: bool = False,
    absent: bool = False,
    destructive: bool = False,
    per_channel: bool = False,
    start: Start | None = None,
) -> Callable[[F], F]:
    """Declare a suite test: the assertion it proves and the verb it requires.

    Every test declares a verb requirement (``verb=``, ``verbs=`` or ``absent=True`` with
    ``verbs=``) or ``common=True``. A destructive check that brings its machine to one
    state first says which with ``start=`` (see :attr:`CheckSpec.start`).
    """
    spec = CheckSpec(template, tuple(verbs), verb, common, absent, destructive, per_channel,
                     start)
    for v in spec.verbs or ((spec.verb,) if spec.verb else (None,)):
        spec.assertion(v)  # unknown ids fail at import

    def mark(fn: F) -> F:
        fn._pp_check = spec  # type: ignore[attr-defined]
        if spec.verbs:
            ids = [v.value for v in spec.verbs]
            fn = pytest.mark.parametrize("verb", list(spec.verbs), ids=ids)(fn)
        return fn

    return mark


def spec_of(fn: Any) -> CheckSpec | None:
    """The :class:`CheckSpec` of a test function, if it is a suite check."""
    spec = getattr(fn, "_pp_check", None)
    return spec if isinstance(spec, CheckSpec) else None


def redact(text: str, secrets: set[str]) -> str:
    """``text`` with every secret value replaced by ``<redacted>``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "<redacted>")
    return text
