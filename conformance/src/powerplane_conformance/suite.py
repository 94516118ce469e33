"""The conformance suite: one class, importable and subclassable, composed of the checks
by concern (:mod:`~powerplane_conformance.discovery`, :mod:`~powerplane_conformance.readback`,
:mod:`~powerplane_conformance.negatives`, :mod:`~powerplane_conformance.verbs`,
:mod:`~powerplane_conformance.concurrency`) and gated by one pure function
(:func:`~powerplane_conformance.gate.gate`).

Run it against your channel by subclassing it in a test module of your own::

    from powerplane_conformance import ConformanceSuite

    class TestMyBmc(ConformanceSuite):
        conformance_subjects = ["node-1", "node-2"]     # optional: one test per node

        @pytest.fixture(scope="class")
        def conformance_target(self, my_bmc_peer):      # a path or a mapping
            return {"channels": {...}, "nodes": {...}, "conformance": {...}}

or run the packaged module with ``--powerplane-target FILE`` (what ``powerplane
conformance`` does). Each test proves one assertion (see
:mod:`powerplane_conformance.assertions`) and declares the verb it needs, or that it is
common to every channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from powerplane import CapabilitySet, PowerState, Verb
from powerplane.plugins import Registry
from powerplane_conformance.checks import (
    ALL_SUBJECTS,
    META,
    RESTORE_FAILED,
    SECRETS,
    XFAIL,
    redact,
    spec_of,
)
from powerplane_conformance.concurrency import ConcurrencyChecks
from powerplane_conformance.context import CONTEXTS, CheckContext
from powerplane_conformance.discovery import DiscoveryChecks
from powerplane_conformance.interrupt import received
from powerplane_conformance.negatives import NegativeChecks, start_probes
from powerplane_conformance.plan import plan_for, planned
from powerplane_conformance.readback import ReadbackChecks
from powerplane_conformance.session import ConformanceSession, Subject
from powerplane_conformance.settings import load_target
from powerplane_conformance.verbs import RestoreChecks, VerbChecks

__all__ = ["ConformanceSuite"]


class ConformanceSuite(RestoreChecks, ConcurrencyChecks, VerbChecks, NegativeChecks,
                       ReadbackChecks, DiscoveryChecks):
    """Every conformance check. Subclass it as ``Test...`` to run it (see the module doc)."""

    # pytest collects a class's bases in reverse MRO order: the checks run discovery,
    # readback, negatives, verbs, concurrency, restore (then plugin.py orders them by phase)

    conformance_subjects: ClassVar[Sequence[str] | None] = None
    """Subjects to parametrize over (``node`` or ``node@channel``); default: from the target
    file given with ``--powerplane-target``, else the target's first node."""

    # -- fixtures a subclass may override -----------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls, request: pytest.FixtureRequest) -> str | Path | Mapping[str, Any]:
        """The target: a target file path or target data (a mapping). Override to build one."""
        path = request.config.getoption("powerplane_target", None)
        if not path:
            pytest.skip("no conformance target: pass --powerplane-target FILE, or override "
                        "the conformance_target fixture")
        return str(path)

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_channel(cls, request: pytest.FixtureRequest) -> str | None:
        """Test only this channel (default: every channel of the target's nodes)."""
        value = request.config.getoption("powerplane_channel", None)
        return str(value) if value else None

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_registry(cls) -> Registry | None:
        """The plugin registry to resolve channel types with (None: the installed plugins)."""
        return None

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_session(
        cls,
        request: pytest.FixtureRequest,
        conformance_target: str | Path | Mapping[str, Any],
        conformance_channel: str | None,
        conformance_registry: Registry | None,
    ) -> Iterator[ConformanceSession]:
        """A started session: channels created, capabilities discovered, states recorded."""
        target = load_target(conformance_target, registry=conformance_registry)
        session = ConformanceSession(target, conformance_channel, conformance_registry)
        known = request.config.stash.setdefault(SECRETS, set())
        for name in target.deployment.channels:
            known.update(v for _, v in session.secrets(name))
        try:
            session.start()
        except KeyboardInterrupt:  # interrupted during discovery: the report names it
            request.config.stash.setdefault(CONTEXTS, []).append(session)
            session.close()
            raise
        except BaseException:
            session.close()
            raise
        request.config.stash.setdefault(CONTEXTS, []).append(session)
        yield session
        session.close()

    @pytest.fixture
    def subject(self) -> str | None:
        """The subject id (``node@channel``); the plugin parametrizes it."""
        return None

    @pytest.fixture
    def check(
        self,
        request: pytest.FixtureRequest,
        conformance_session: ConformanceSession,
        subject: str | None,
    ) -> Iterator[CheckContext]:
        """The running check: gated (see :func:`~powerplane_conformance.gate.gate`) on the
        channel's claims and the target file; a destructive check's machine is restored
        after it, and a restore that does not succeed is recorded on the check."""
        spec = spec_of(request.function)
        if spec is None:
            raise TypeError(f"{request.function.__name__} is not declared with @check")
        session = conformance_session
        params = getattr(request.node, "callspec", None)
        verb: Verb | None = params.params.get("verb") if params is not None else None
        verb = verb or spec.verb
        subj = None if spec.per_channel or subject == ALL_SUBJECTS else session.subject(subject)
        item = request.node
        assert isinstance(item, pytest.Item)
        ctx = CheckContext(item, session, spec, subj, verb)
        channels = sorted(session.channels()) if subj is None else [subj.channel]
        meta = {
            "id": ctx.assertion.id,
            "text": ctx.assertion.text,
            "channel": ",".join(channels),
            "node": subj.node if subj else None,
            "verb": verb.value if verb else None,
        }
        item.stash[META] = meta
        plan = plan_for(item, session)  # started at the first check: it runs beside the rest
        start_probes(self, item, session)  # at the first network negative: its probes
        item.user_properties += [("assertion", meta["id"]), ("verb", meta["verb"] or "common"),
                                 ("channel", meta["channel"]), ("node", meta["node"] or "*")]
        reason = session.settings.xfail.get(ctx.assertion.id)
        if reason is not None:
            item.stash[XFAIL] = reason
        stop = session.gate(spec, verb, subj, ctx.assertion.id)
        if stop is not None:
            if stop.outcome == "skip":
                ctx.skip(stop.reason)
            ctx.not_tested(stop.reason)
        yield ctx
        if received():
            return  # interrupted: nothing is awaited; the session's close restores each machine
        if planned(spec, verb):
            # the plan puts each machine back; a restore it could not make is recorded on
            # the check that took the machine away last
            for node in [plan.nodes[k] for k in sorted(plan.nodes)
                         if subj is None or k == subj.key]:
                why = node.restore_failure(ctx.assertion.id)
                if why is not None:
                    item.stash.setdefault(RESTORE_FAILED, []).append(
                        redact(f"{node.subject.key}: {why}",
                               item.config.stash.get(SECRETS, set())))
        elif spec.destructive and subj is not None \
                and not _restore_can_wait(item, session, subj):
            ctx.restore(subj)


def _next_start(item: pytest.Item, session: ConformanceSession, subj: Subject) -> PowerState | None:
    """The state the next check to act on ``subj`` brings it to first; None when that is not
    known (no later check of this suite class, one that spans the channel, or one that
    works in any state). A later check the gate stops is passed over: it does not act."""
    items = item.session.items
    try:
        here = items.index(item)
    except ValueError:
        return None
    for nxt in items[here + 1:]:
        spec = spec_of(getattr(nxt, "function", None))
        if spec is None or nxt.parent is not item.parent:
            return None
        params = getattr(nxt, "callspec", None)
        values: dict[str, Any] = dict(params.params) if params is not None else {}
        if spec.per_channel:
            return None
        try:
            other = session.subject(values.get("subject"))
        except LookupError:
            return None
        if other != subj:
            continue
        verb: Verb | None = values.get("verb") or spec.verb
        if session.gate(spec, verb, subj) is not None:
            continue
        return spec.start_state(verb)
    return None


def _restore_can_wait(item: pytest.Item, session: ConformanceSession, subj: Subject) -> bool:
    """Whether the restore after this check would only be undone by the next check on the
    same machine: that check starts from the state the machine reads now, and the restore
    is one the channel could carry out (a restore it cannot is tried now, so that its
    failure is recorded on the check that made it necessary). The machine is then restored
    after that later check (or by STATE_RESTORED, which proves the end state)."""
    want = _next_start(item, session, subj)
    original = session.original.get(subj.key)
    if want is None or original is None or original is PowerState.UNKNOWN:
        return False
    caps = session.caps(subj)
    back = Verb.POWER_ON if original is PowerState.ON else Verb.SHUTDOWN
    if not isinstance(caps, CapabilitySet) or not caps.advertises(back):
        return False
    try:
        return session.accepts(subj, want)(session.read(subj))
    except Exception:
        return False
