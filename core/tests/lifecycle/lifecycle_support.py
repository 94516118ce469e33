"""Helpers shared by the lifecycle tests (a module of its own, so that test modules import
it by a unique name rather than from ``conftest``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from powerplane.authority.identity import Identity
from powerplane.lifecycle import Ceremony

CP_LABEL = "node-role.kubernetes.io/control-plane"


def make_config(
    tmp: Path,
    workers: tuple[str, ...] = ("w1", "w2"),
    control_plane: tuple[str, ...] = ("cp1", "cp2", "cp3"),
    *,
    verbs: tuple[str, ...] = ("reboot", "shutdown", "power-on"),
    channel: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    storage: dict[str, Any] | None = None,
    lifecycle: dict[str, Any] | None = None,
    labels: dict[str, dict[str, str]] | None = None,
    attended: bool = False,
) -> dict[str, Any]:
    """A deployment: one simulated channel, a machine per node, a simulated cluster."""
    names = [*control_plane, *workers]
    nodes: dict[str, Any] = {}
    for n in names:
        lab = {CP_LABEL: ""} if n in control_plane else {}
        lab.update((labels or {}).get(n, {}))
        nodes[n] = {"labels": lab, "channels": [{"channel": "lab", "target": n}]}
    ch = {"type": "simulated", "verbs": list(verbs), "machines": {n: "on" for n in names}}
    ch.update(channel or {})
    lc: dict[str, Any] = {
        "store": str(tmp / "lifecycle.db"),
        "cluster": cluster or {"type": "simulated"},
        "storage": storage or {"type": "none"},
        "readback_cadence_s": 0.01,
        "readback_window_s": 5,
        "tick_s": 0.01,
    }
    lc.update(lifecycle or {})
    return {
        "channels": {"lab": ch},
        "nodes": nodes,
        "recovery": {"attendedRack": attended},
        "lifecycle": lc,
    }


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def ceremony(node: str, *, hazard: bool = False, actor: str | None = None) -> Ceremony:
    """A complete ceremony for ``node``; ``actor``: the user of an identity an embedder
    authenticated (None: this process's OS user, as the host's authority says)."""
    return Ceremony(
        reason="replace the PSU in slot 2",
        identity=Identity(actor) if actor is not None else None,
        confirm_node=node,
        ack_preflight=True,
        hazard_reason="planned window CHG-1234" if hazard else None,
    )


def cp_deployment(tmp: Path) -> str:
    """A deployment file in ``tmp``: three control-plane nodes and a worker on one simulated
    channel, with a lifecycle (SQLite store, simulated cluster): the quorum guard applies."""
    cp = {"node-role.kubernetes.io/control-plane": ""}
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated",
                             "machines": {"m1": "on", "m2": "on", "m3": "on", "m4": "on"},
                             "state_file": str(tmp / "lab.json")}},
        "nodes": {
            "cp-1": {"labels": cp, "channels": [{"channel": "lab", "target": "m1"}]},
            "cp-2": {"labels": cp, "channels": [{"channel": "lab", "target": "m2"}]},
            "cp-3": {"labels": cp, "channels": [{"channel": "lab", "target": "m3"}]},
            "w-1": {"channels": [{"channel": "lab", "target": "m4"}]},
        },
        "lifecycle": {"store": str(tmp / "pp.db"),
                      "cluster": {"type": "simulated", "state_file": str(tmp / "cl.json")}},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)
