"""Helpers of the authority tests: deployments with a roles file, audit files read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

CP = "node-role.kubernetes.io/control-plane"

ADMIN_ENGINEER_ROLES: dict[str, Any] = {
    "roles": {
        "admin": {"tier": "admin"},
        "viewer": {"tier": "read"},
        "maintenance-engineer": {"tier": "read",
                                 "allow": ["servers:cordon", "servers:uncordon"]},
        "no-shutdown": {"deny": ["servers:shutdown"]},
    },
    "bindings": [
        {"role": "admin", "users": ["alice"], "groups": ["plant-admins"]},
        {"role": "maintenance-engineer", "groups": ["plant-eng"]},
        {"role": "viewer", "users": ["victor"]},
        {"role": "no-shutdown", "users": ["dana"]},
    ],
}
"""alice admin; plant-eng may cordon and uncordon; victor reads; dana is denied shutdown
(and, in plant-admins, allowed everything else)."""


def write_deployment(
    tmp: Path,
    roles: dict[str, Any] | None = ADMIN_ENGINEER_ROLES,
    *,
    lifecycle: bool = False,
    nodes: tuple[str, ...] = ("n1", "n2"),
    sites: dict[str, str] | None = None,
    labels: dict[str, dict[str, str]] | None = None,
    audit: str | None = None,
    control_plane: tuple[str, ...] = (),
) -> Path:
    """A deployment file in ``tmp`` (simulated machines, one channel that can power on),
    with ``roles`` as its roles file (None: no ``policy:`` section)."""
    names = [*control_plane, *nodes]
    doc: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {n: "on" for n in names},
                             "state_file": str(tmp / "machines.json")}},
        "nodes": {},
    }
    for n in names:
        lab = {CP: ""} if n in control_plane else {}
        lab.update((labels or {}).get(n, {}))
        doc["nodes"][n] = {"site": (sites or {}).get(n, "plant-a"), "labels": lab,
                           "channels": [{"channel": "lab", "target": n}]}
    if roles is not None:
        (tmp / "roles.yaml").write_text(yaml.safe_dump(roles, sort_keys=False))
        doc["policy"] = {"type": "local", "file": "roles.yaml"}
    if audit is not None:
        doc["audit"] = {"path": audit}
    if lifecycle:
        doc["lifecycle"] = {"store": str(tmp / "lifecycle.db"), "cluster": {"type": "simulated"},
                            "storage": {"type": "none"}, "tick_s": 0.01,
                            "no_control_plane": not control_plane,
                            "readback_cadence_s": 0.01, "readback_window_s": 5}
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines audit file (none when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def machines(tmp: Path) -> dict[str, Any]:
    """The simulated machines' shared state (what was sent to them)."""
    path = tmp / "machines.json"
    return json.loads(path.read_text()) if path.exists() else {}
