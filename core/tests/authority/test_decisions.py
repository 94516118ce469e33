"""``powerplane.authority.roles``: the local policy's decisions (deny wins, tiers, scopes,
no role), and a property test against a straightforward reference evaluation."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from powerplane.authority.actions import DEFAULT_TIER, Action, Tier
from powerplane.authority.identity import Identity
from powerplane.authority.roles import LocalPolicy, RolesFile
from powerplane.nodes import NodeSpec

ACTIONS = list(Action)


def policy(doc: dict[str, Any]) -> LocalPolicy:
    return LocalPolicy(RolesFile.model_validate(doc), "roles.yaml")


def decide(p: LocalPolicy, who: Identity, action: Action, spec: NodeSpec | None) -> Any:
    [found] = asyncio.run(p.decide(who, action, [("n", spec)]))
    return found


NODE = NodeSpec(site="plant-a", labels={"rack": "a"})


def test_a_user_in_no_role_is_denied_with_the_reason() -> None:
    p = policy({"roles": {"admin": {"tier": "admin"}},
                "bindings": [{"role": "admin", "users": ["alice"]}]})
    d = decide(p, Identity("mallory", ("staff",)), Action.READ, NODE)
    assert not d.allowed
    assert d.explain("n") == ("denied: user mallory (groups: staff) servers:read on n: no "
                              "role in roles.yaml is bound to this user or its groups")


def test_deny_wins_over_a_group_role_that_allows_everything() -> None:
    p = policy({"roles": {"admin": {"tier": "admin"}, "careful": {"deny": ["servers:shutdown"]}},
                "bindings": [{"role": "careful", "users": ["dana"]},
                             {"role": "admin", "groups": ["plant-admins"]}]})
    dana = Identity("dana", ("plant-admins",))
    shutdown = decide(p, dana, Action.SHUTDOWN, NODE)
    assert not shutdown.allowed
    assert shutdown.rule == "role careful denies it (deny wins)"
    assert decide(p, dana, Action.REBOOT, NODE).allowed


def test_the_delegation_example_allows_cordon_and_uncordon_and_nothing_else() -> None:
    p = policy({"roles": {"maintenance-engineer": {"allow": ["servers:cordon",
                                                             "servers:uncordon"]}},
                "bindings": [{"role": "maintenance-engineer", "groups": ["plant-eng"]}]})
    eng = Identity("erin", ("plant-eng",))
    allowed = {a for a in Action if decide(p, eng, a, NODE).allowed}
    assert allowed == {Action.CORDON, Action.UNCORDON}
    shutdown = decide(p, eng, Action.SHUTDOWN, NODE)
    assert shutdown.explain("node-3") == (
        "denied: user erin (groups: plant-eng) servers:shutdown on node-3: no role allows "
        "it; role maintenance-engineer allows servers:cordon, servers:uncordon")


def test_every_action_but_read_is_admin_by_default() -> None:
    assert {a for a, t in DEFAULT_TIER.items() if t is Tier.READ} == {Action.READ}
    p = policy({"roles": {"viewer": {"tier": "read"}},
                "bindings": [{"role": "viewer", "users": ["victor"]}]})
    victor = Identity("victor")
    assert [a for a in Action if decide(p, victor, a, NODE).allowed] == [Action.READ]


def test_a_scoped_role_counts_only_for_the_nodes_in_its_scope() -> None:
    p = policy({"roles": {"rack-a": {"allow": ["servers:reboot"], "sites": ["plant-a"],
                                     "labels": {"rack": "a"}}},
                "bindings": [{"role": "rack-a", "users": ["ron"]}]})
    ron = Identity("ron")
    assert decide(p, ron, Action.REBOOT, NODE).allowed
    other_rack = NodeSpec(site="plant-a", labels={"rack": "b"})
    other_site = NodeSpec(site="plant-b", labels={"rack": "a"})
    for spec in (other_rack, other_site, None):
        d = decide(p, ron, Action.REBOOT, spec)
        assert not d.allowed
        assert "not this node (out of its scope)" in d.rule


# -- the property: the decision equals a reference evaluation --------------------------------
USERS = ["alice", "bob", "carol"]
GROUPS = ["g1", "g2", "g3"]
SITES = ["s1", "s2"]
action_names = st.lists(st.sampled_from([a.value for a in ACTIONS]), max_size=4, unique=True)
role = st.fixed_dictionaries(
    {},
    optional={
        "tier": st.sampled_from(["none", "read", "admin"]),
        "allow": action_names,
        "deny": action_names,
        "sites": st.lists(st.sampled_from(SITES), max_size=2, unique=True),
        "labels": st.dictionaries(st.sampled_from(["rack", "row"]), st.sampled_from(["a", "b"]),
                                  max_size=2),
    },
)
roles_doc = st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), role, max_size=4).flatmap(
    lambda roles: st.fixed_dictionaries({
        "roles": st.just(roles),
        "bindings": st.lists(st.fixed_dictionaries({
            "role": st.sampled_from(sorted(roles)),
            "users": st.lists(st.sampled_from(USERS), max_size=2, unique=True),
            "groups": st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
        }).filter(lambda b: bool(b["users"] or b["groups"])), max_size=5)
        if roles else st.just([]),
    }))
identity = st.builds(Identity, st.sampled_from([*USERS, "dave"]),
                     st.lists(st.sampled_from(GROUPS), max_size=3, unique=True).map(tuple))
spec = st.builds(NodeSpec, site=st.sampled_from([*SITES, None]),
                 labels=st.dictionaries(st.sampled_from(["rack", "row"]),
                                        st.sampled_from(["a", "b"]), max_size=2))

RANK = {"none": 0, "read": 1, "admin": 2}


def reference(doc: dict[str, Any], who: Identity, action: Action, node: NodeSpec) -> bool:
    """Deny wins; else any held, in-scope role whose tier covers the action's default tier
    or whose allow list names it; the default tier of everything but servers:read is
    admin."""
    held = {b["role"] for b in doc["bindings"]
            if who.user in b["users"] or set(who.groups) & set(b["groups"])}
    in_scope = []
    for name in held:
        r = doc["roles"][name]
        if "sites" in r and node.site not in r["sites"]:
            continue
        if "labels" in r and any(node.labels.get(k) != v for k, v in r["labels"].items()):
            continue
        in_scope.append(r)
    if any(action.value in r.get("deny", []) for r in in_scope):
        return False
    need = 1 if action is Action.READ else 2
    return any(RANK[r.get("tier", "none")] >= need or action.value in r.get("allow", [])
               for r in in_scope)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=roles_doc, who=identity, node=spec, action=st.sampled_from(ACTIONS))
def test_the_decision_equals_the_reference_evaluation(
    doc: dict[str, Any], who: Identity, node: NodeSpec, action: Action,
) -> None:
    p = policy(doc)
    d = decide(p, who, action, node)
    assert d.allowed is reference(doc, who, action, node), d.rule
    again = decide(p, who, action, node)  # the cached decision is the same
    assert again.allowed is d.allowed and again.rule == d.rule
    many = asyncio.run(p.decide_actions(who, ACTIONS, [("n", node), ("m", None)]))
    assert many[action][0].allowed is d.allowed and many[action][0].rule == d.rule
    [alone] = asyncio.run(p.decide(who, action, [("m", None)]))
    assert many[action][1].allowed is alone.allowed and many[action][1].rule == alone.rule
