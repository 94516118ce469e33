"""Target data on the simulated channel, and readers of a run's results."""

from __future__ import annotations

from typing import Any

from powerplane_conformance.api import RunSummary

PASSWORD_ENV = "PP_CONFORMANCE_TEST_PASSWORD"


def sim_target(
    channel: dict[str, Any] | None = None,
    conformance: dict[str, Any] | None = None,
    machines: dict[str, str] | None = None,
    type_name: str = "simulated",
) -> dict[str, Any]:
    """A target on one simulated-like channel ``lab``, one node per machine."""
    machines = machines or {"m1": "on", "m2": "off"}
    chan: dict[str, Any] = {
        "type": type_name,
        "machines": machines,
        "password": {"env": PASSWORD_ENV},
        "expect_password": {"env": PASSWORD_ENV},
    }
    chan.update(channel or {})
    nodes = {f"n-{m}": {"channels": [{"channel": "lab", "target": m}]} for m in machines}
    conf: dict[str, Any] = {
        "nodes": list(nodes),
        "allow_destructive": True,
        "settle_timeout_s": 1,
        "repeat": 2,
        "negative": {"lab": {"secret_key": "password"}},
    }
    conf.update(conformance or {})
    return {"channels": {"lab": chan}, "nodes": nodes, "conformance": conf}


def outcome(summary: RunSummary, ident: str) -> set[str]:
    """The outcomes recorded for assertion ``ident``."""
    return {r["outcome"] for r in summary.data["results"] if r["id"] == ident}


def messages(summary: RunSummary, ident: str) -> str:
    return "\n".join(r["message"] for r in summary.data["results"] if r["id"] == ident)
