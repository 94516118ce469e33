"""The concurrency check: a verb sent to every node of one channel at once (through
``invoke_batch`` where the channel offers it, as the host does) is accepted for each and
read back for each. The session's power plan makes it (:mod:`~powerplane_conformance.plan`):
each machine's worker brings its machine to the verb's start state, the workers meet, the
verb leaves for all of them in one call, and each reads its own machine back."""

from __future__ import annotations

from powerplane import CapabilitySet, Verb
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.model import END_STATE, ONE_NODE, VERBS3
from powerplane_conformance.plan import Step, concurrent_groups, plan_for

__all__ = ["ONE_NODE", "ConcurrencyChecks"]



class ConcurrencyChecks:
    """Every node of a channel at once."""

    @proves("{VERB}_CONCURRENT", verbs=VERBS3, destructive=True, per_channel=True)
    def test_verb_concurrent(self, check: CheckContext, verb: Verb) -> None:
        session = check.session
        advertised = any(isinstance(c := session.caps(x), CapabilitySet) and c.advertises(verb)
                         for x in session.subjects)
        if not advertised:
            check.skip(f"no channel of the target advertises {verb.value}")
        groups = concurrent_groups(session, verb)
        if not groups:
            check.not_tested(f"{ONE_NODE} that advertises {verb.value} (list more in "
                             "conformance.nodes)")
        plan = plan_for(check.item, session)
        ident = check.assertion.id
        want = END_STATE[verb]
        for subs in groups:
            keys = ", ".join(x.key for x in subs)
            steps: list[tuple[str, Step | None]] = []
            for x in subs:
                mine = plan.steps(x, ident)
                steps.append((x.key, mine[0].wait() if mine else None))
            for key, step in steps:
                if step is None:
                    check.not_tested(f"no step was planned for {ident} on {key}")
                if step.not_made:
                    check.not_tested(f"{key}: {step.not_made}")
            errors = [f"{key}: {step.round.error}" for key, step in steps
                      if step is not None and step.round is not None and step.round.error]
            if errors:
                check.fail(f"{verb.value} accepted for each of {keys}", "; ".join(errors))
            bad = [f"{key}: {step.round.describe()}" for key, step in steps
                   if step is not None and step.round is not None and not step.round.ok]
            if bad:
                check.fail(f"each of {keys} reads {want.value}", "; ".join(bad))
            latencies = [step.round.latency for _, step in steps
                         if step is not None and step.round is not None]
            if latencies:
                check.latency(max(latencies))
