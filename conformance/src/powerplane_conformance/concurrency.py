"""The concurrency check: a verb sent to every node of one channel at once (through
``invoke_batch`` where the channel offers it, as the host does) is accepted for each and
read back for each."""

from __future__ import annotations

import asyncio
from typing import Any

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import BatchInvoker, maybe_await, verb_method
from powerplane.errors import ChannelError
from powerplane_conformance.checks import CheckContext
from powerplane_conformance.checks import check as proves
from powerplane_conformance.session import END_STATE, START_STATE, Subject, describe_error
from powerplane_conformance.verbs import VERBS3

__all__ = ["ConcurrencyChecks"]


class ConcurrencyChecks:
    """Every node of a channel at once."""

    @proves("{VERB}_CONCURRENT", verbs=VERBS3, destructive=True, per_channel=True)
    def test_verb_concurrent(self, check: CheckContext, verb: Verb) -> None:
        session = check.session
        groups: list[list[Subject]] = []
        advertised = False
        for subs in session.channels().values():
            able = [x for x in subs if isinstance(c := session.caps(x), CapabilitySet)
                    and c.advertises(verb)]
            advertised = advertised or bool(able)
            if len(able) >= 2:
                groups.append(able)
        if not advertised:
            check.skip(f"no channel of the target advertises {verb.value}")
        if not groups:
            check.not_tested(f"the target names fewer than two nodes on one channel that "
                             f"advertises {verb.value} (list more in conformance.nodes)")
        try:
            for subs in groups:
                for x in subs:
                    check.precondition(x, START_STATE[verb])
                self._concurrently(check, subs, verb)
        finally:
            for subs in groups:
                for x in subs:
                    check.restore(x)

    def _concurrently(self, check: CheckContext, subs: list[Subject], verb: Verb) -> None:
        session = check.session

        channel = session.channel_of(subs[0])
        method = verb_method(channel, verb)

        async def all_at_once() -> list[Any]:
            if isinstance(channel, BatchInvoker):  # what PowerHost.invoke_many uses then
                try:
                    return list(await maybe_await(channel.invoke_batch, verb,
                                                  [x.target for x in subs]))
                except Exception as exc:
                    return [exc] * len(subs)
            if method is None:
                return [ChannelError(f"the channel has no method {verb.method}()",
                                     channel=subs[0].channel)] * len(subs)
            calls = [maybe_await(method, x.target) for x in subs]
            return await asyncio.gather(*calls, return_exceptions=True)

        results = session.loop.run(all_at_once(), session.call_timeout)
        keys = ", ".join(x.key for x in subs)
        if len(results) != len(subs):
            check.fail(f"invoke_batch answers one outcome per target ({len(subs)})",
                       f"{len(results)} outcomes")
        errors = [f"{x.key}: {describe_error(r)}" for x, r in zip(subs, results, strict=True)
                  if isinstance(r, BaseException)]
        if errors:
            check.fail(f"{verb.value} accepted for each of {keys}", "; ".join(errors))
        want = END_STATE[verb]
        bad = []
        for x in subs:
            obs = session.wait_for(x, want)
            if not obs.ok:
                bad.append(f"{x.key}: {obs.describe()}")
        if bad:
            check.fail(f"each of {keys} reads {want.value}", "; ".join(bad))
