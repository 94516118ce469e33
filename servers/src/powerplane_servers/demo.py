"""``powerplane serve --demo``: the surface on a demo fleet, with an OpenID Connect issuer on
loopback (oidc-provider-mock) and two people: alice, an admin, and
eve, a maintenance engineer allowed to cordon and uncordon only.

The fleet is simulated machines: five control-plane members (one not ready, so the next
member taken out consumes the last of the margin: the hazard tier), two machines behind an
out-of-band channel that reads off (Redfish's shape), two behind an in-band one that cannot
see off (Talos's shape; their site is attended, so shutdown is offered), and one whose only
channel advertises reboot.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from powerplane_servers.settings import OidcSettings, SecretRef, ServeSettings

__all__ = ["CLIENT", "USERS", "demo_fleet", "demo_issuer"]

CLIENT = "powerplane-demo"
USERS = {"alice": ["plant-admins"], "eve": ["plant-eng"]}
_CP = "node-role.kubernetes.io/control-plane"
_SECRET_ENV = "POWERPLANE_DEMO_CLIENT_SECRET"


def demo_fleet(folder: Path) -> Path:
    """Writes the demo deployment and its roles file into ``folder``; returns its path."""
    cps = [f"cp-{i}" for i in range(1, 6)]
    bmcs = ["bmc-1", "bmc-2", "bmc-3"]
    doc: dict[str, Any] = {
        "channels": {
            "bmc": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "machines": {n: "on" for n in cps + bmcs}, "latency_ms": 100},
            "talos": {"type": "simulated", "verbs": ["reboot", "shutdown"],
                      "readback": "on-only", "latency_ms": 100,
                      "machines": {"talos-1": "on", "talos-2": "on"}},
            "agent": {"type": "simulated", "verbs": ["reboot"],
                      "machines": {"agent-1": "on"}},
        },
        "nodes": {},
        "recovery": {"sites": {"plant-b": {"attended": True}}},
        "policy": {"type": "local", "file": "roles.yaml"},
        "audit": {"path": "audit.jsonl"},
        "lifecycle": {"store": "lifecycle.db",
                      "cluster": {"type": "simulated", "not_ready": ["cp-5"],
                                  "pods": {"bmc-1": ["web-1", "web-2"]}},
                      "storage": {"type": "none"}, "tick_s": 0.2,
                      "readback_cadence_s": 0.5, "readback_window_s": 10},
    }
    for n in cps + bmcs:
        doc["nodes"][n] = {"site": "plant-a", "labels": {_CP: ""} if n in cps else
                           {"rack": "a1"}, "channels": [{"channel": "bmc", "target": n}]}
    for n in ("talos-1", "talos-2"):
        doc["nodes"][n] = {"site": "plant-b", "labels": {"rack": "b1"},
                           "channels": [{"channel": "talos", "target": n}]}
    doc["nodes"]["agent-1"] = {"site": "plant-b", "labels": {"rack": "b1"},
                               "channels": [{"channel": "agent", "target": "agent-1"}]}
    roles = {
        "roles": {"admin": {"tier": "admin"},
                  "maintenance-engineer": {"tier": "read",
                                           "allow": ["servers:cordon", "servers:uncordon"]}},
        "bindings": [{"role": "admin", "groups": ["plant-admins"]},
                     {"role": "maintenance-engineer", "groups": ["plant-eng"]}],
    }
    (folder / "roles.yaml").write_text(yaml.safe_dump(roles, sort_keys=False))
    path = folder / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@contextlib.contextmanager
def demo_issuer() -> Iterator[tuple[str, ServeSettings]]:
    """The loopback issuer with the two users; yields its URL and the surface's settings."""
    import httpx
    from oidc_provider_mock import run_server_in_thread  # type: ignore[import-untyped]

    os.environ[_SECRET_ENV] = secrets.token_urlsafe(24)
    with run_server_in_thread() as server:
        url = f"http://localhost:{server.server_port}"
        for user, groups in USERS.items():
            httpx.put(f"{url}/users/{user}", json={"groups": groups}).raise_for_status()
        settings = ServeSettings(oidc=OidcSettings(
            issuer=url, audience=CLIENT, client_id=CLIENT,
            client_secret=SecretRef(env=_SECRET_ENV)))
        yield url, settings
