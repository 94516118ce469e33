"""Property tests: the rule never offers an unrecoverable shutdown, and invoke agrees with it."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from powerplane import CapabilitySet, ChannelError, NotOffered, PowerHost, Verb, parse_config
from powerplane.config import Recovery
from powerplane.recovery import decide

VERBS = list(Verb)
SITES = [None, "plant-a", "plant-b"]

caps_strategy = st.builds(
    lambda verbs, graceful: CapabilitySet.of(
        [v for v in verbs if v in graceful], [v for v in verbs if v not in graceful]
    ),
    st.sets(st.sampled_from(VERBS)),
    st.sets(st.sampled_from(VERBS)),
)
view_strategy = st.one_of(caps_strategy, st.just("unreachable"))
views_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), view_strategy),
    max_size=4,
    unique_by=lambda v: v[0],
)
recovery_strategy = st.builds(
    lambda rack, attended: Recovery.model_validate(
        {"attendedRack": rack, "sites": {s: {"attended": True} for s in attended}}
    ),
    st.booleans(),
    st.sets(st.sampled_from(["plant-a", "plant-b"])),
)


def recoverable(views: list[tuple[str, Any]], site: str | None, rec: Recovery) -> bool:
    powers = any(isinstance(c, CapabilitySet) and c.advertises(Verb.POWER_ON) for _, c in views)
    return powers or rec.attended_rack or rec.site_attended(site)


@settings(max_examples=400, deadline=None)
@given(views_strategy, st.sampled_from(SITES), st.sampled_from(["repairable", "replaceable"]),
       recovery_strategy)
def test_rule_invariants(
    views: list[tuple[str, Any]], site: str | None, cls: str, rec: Recovery
) -> None:
    offers = decide(views, site, cls, rec)
    by_name = dict(views)
    for verb, offer in offers.items():
        if offer.offered:
            caps = by_name[offer.channel]
            # an offered verb is always advertised by the channel chosen
            assert isinstance(caps, CapabilitySet) and caps.advertises(verb)
            assert offer.graceful == caps.is_graceful(verb)
            assert offer.reason == ""
        else:
            assert offer.reason.startswith(f"{verb.value} withheld")
    # shutdown is never offered unless recoverable
    if offers[Verb.SHUTDOWN].offered:
        assert recoverable(views, site, rec)
        # graceful preferred over hard
        if any(isinstance(c, CapabilitySet) and c.is_graceful(Verb.SHUTDOWN) for _, c in views):
            assert offers[Verb.SHUTDOWN].graceful
    elif any(isinstance(c, CapabilitySet) and c.advertises(Verb.SHUTDOWN) for _, c in views):
        assert not recoverable(views, site, rec)
    if cls == "repairable":
        assert not offers[Verb.TERMINATE].offered
    if not views:
        assert not any(o.offered for o in offers.values())


node_strategy = st.fixed_dictionaries(
    {
        "site": st.sampled_from(SITES),
        "classification": st.sampled_from(["repairable", "replaceable"]),
        "channels": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.tuples(st.sets(st.sampled_from(VERBS)), st.booleans(), st.booleans()),
        min_size=0,
        max_size=3,
    ),
    node_strategy,
    st.booleans(),
    st.sets(st.sampled_from(["plant-a", "plant-b"])),
)
def test_invoke_refuses_exactly_what_offer_for_withholds(
    channels: dict[str, tuple[set[Verb], bool, bool]],
    node: dict[str, Any],
    rack: bool,
    attended: set[str],
) -> None:
    cfg_channels = {
        name: {
            "type": "simulated",
            "verbs": [v.value for v in verbs],
            "graceful": graceful,
            "machines": {"m": "on"},
            "faults": {"*": "unreachable"} if broken else {},
        }
        for name, (verbs, graceful, broken) in channels.items()
    }
    refs = [{"channel": c, "target": "m"} for c in node["channels"] if c in channels]
    cfg = {
        "channels": cfg_channels,
        "nodes": {"n": {**node, "channels": refs}},
        "recovery": {"attendedRack": rack,
                     "sites": {s: {"attended": True} for s in attended}},
    }

    async def check() -> None:
        async with PowerHost(parse_config(cfg)) as host:
            offer = host.offer_for("n")
            for verb in VERBS:
                try:
                    result = await host.invoke("n", verb, reason="property test")
                except NotOffered as exc:
                    assert not offer[verb].offered
                    assert offer[verb].cause == "rule"
                    assert exc.reason == offer[verb].reason
                except ChannelError:
                    assert not offer[verb].offered  # withheld because discovery failed
                    assert offer[verb].cause == "channel"
                else:
                    assert offer[verb].offered
                    assert result.channel == offer[verb].channel
                    if verb is Verb.SHUTDOWN:
                        assert recoverable(
                            [(r["channel"], host.capabilities(r["channel"], "m")) for r in refs],
                            node["site"],
                            host.deployment.recovery,
                        )

    asyncio.run(check())
