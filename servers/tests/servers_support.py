"""Helpers of the Servers surface tests: a small fleet under a roles file, the app served
in-process (httpx over ASGI) or on a loopback port (uvicorn in a thread)."""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from fastapi import FastAPI

from powerplane_servers.app import create_app
from powerplane_servers.settings import ProxySettings, ServeSettings
from powerplane_servers.surface import Surface, open_surface

CP = "node-role.kubernetes.io/control-plane"

ROLES: dict[str, Any] = {
    "roles": {
        "admin": {"tier": "admin"},
        "viewer": {"tier": "read"},
        "maintenance-engineer": {"tier": "read",
                                 "allow": ["servers:cordon", "servers:uncordon"]},
    },
    "bindings": [
        {"role": "admin", "users": ["alice"], "groups": ["plant-admins"]},
        {"role": "maintenance-engineer", "groups": ["plant-eng"]},
        {"role": "viewer", "users": ["victor"]},
    ],
}
"""alice admin; the group plant-eng may cordon and uncordon only; victor reads; anyone
else (mallory) has no role."""

ADMIN = {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "plant-admins"}
ENGINEER = {"X-Forwarded-User": "eve", "X-Forwarded-Groups": "plant-eng"}
VIEWER = {"X-Forwarded-User": "victor"}
NOBODY = {"X-Forwarded-User": "mallory"}

PROXY = ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)))


def write_fleet(tmp: Path, *, extra_nodes: int = 0, latency_ms: int = 0) -> Path:
    """cp-1..cp-5 (cp-5 not ready: quorum 3 of 4 ready, margin 1, so taking one ready
    member out consumes the last of the margin), ``bmc-1``/``bmc-2`` on an out-of-band
    channel that reads off (Redfish's shape), ``talos-1``/``talos-2`` on an in-band channel
    that cannot see off (readback on-only; their site is attended, so shutdown is
    recoverable and offered), ``inband-1`` on a channel advertising reboot only, and
    ``extra_nodes`` more ``w-N`` on the out-of-band channel."""
    cps = [f"cp-{i}" for i in range(1, 6)]
    oob_nodes = [*cps, "bmc-1", "bmc-2", *(f"w-{i}" for i in range(extra_nodes))]
    doc: dict[str, Any] = {
        "channels": {
            "bmc": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "machines": {n: "on" for n in oob_nodes}, "readback": "full",
                    "latency_ms": latency_ms},
            "talos": {"type": "simulated", "verbs": ["reboot", "shutdown"],
                      "machines": {"talos-1": "on", "talos-2": "on"},
                      "readback": "on-only", "latency_ms": latency_ms},
            "agent": {"type": "simulated", "verbs": ["reboot"],
                      "machines": {"inband-1": "on"}, "latency_ms": latency_ms},
        },
        "nodes": {},
        "recovery": {"sites": {"plant-b": {"attended": True}}},
        "policy": {"type": "local", "file": "roles.yaml"},
        "lifecycle": {"store": str(tmp / "lifecycle.db"),
                      "cluster": {"type": "simulated", "not_ready": ["cp-5"]},
                      "storage": {"type": "none"}, "tick_s": 0.05,
                      "readback_cadence_s": 0.05, "readback_window_s": 2},
    }
    for n in oob_nodes:
        labels = {CP: ""} if n in cps else {"rack": "r1" if n.startswith("bmc") else "r9"}
        doc["nodes"][n] = {"site": "plant-a", "labels": labels,
                           "channels": [{"channel": "bmc", "target": n}]}
    for n in ("talos-1", "talos-2"):
        doc["nodes"][n] = {"site": "plant-b", "labels": {"rack": "r2"},
                           "channels": [{"channel": "talos", "target": n}]}
    doc["nodes"]["inband-1"] = {"site": "plant-b", "labels": {"rack": "r2"},
                                "channels": [{"channel": "agent", "target": "inband-1"}]}
    (tmp / "roles.yaml").write_text(yaml.safe_dump(ROLES, sort_keys=False))
    path = tmp / "powerplane.json" if extra_nodes > 1000 else tmp / "powerplane.yaml"
    if path.suffix == ".json":
        import json
        path.write_text(json.dumps(doc))
    else:
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def make_app(config: Path, settings: ServeSettings = PROXY, *, runner: bool = True,
             ) -> FastAPI:
    return create_app(settings, functools.partial(open_surface, str(config), runner=runner))


def surface_of(app: FastAPI) -> Surface:
    found = app.state.surface
    assert isinstance(found, Surface)
    return found


@contextlib.asynccontextmanager
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan, and an httpx client on it (from 127.0.0.1)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """The app on a loopback port (uvicorn in a thread); yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def ceremony(node: str, intent: str, **extra: Any) -> dict[str, Any]:
    """A complete ceremony for ``intent`` on ``node`` (reason, acknowledgement, name)."""
    body: dict[str, Any] = {"node": node, "intent": intent, "reason": "kernel 6.12 update"}
    if intent in ("drain", "reboot", "shutdown"):
        body["ackPreflight"] = True
    if intent in ("reboot", "shutdown"):
        body["confirmNode"] = node
    body.update(extra)
    return body


def oidc_settings_for_routes() -> ServeSettings:
    """Settings with the page's login on (its routes exist; nothing is fetched)."""
    from powerplane_servers.settings import OidcSettings

    return ServeSettings(proxy=ProxySettings(trusted=("127.0.0.1",)),
                         oidc=OidcSettings(issuer="http://127.0.0.1:9/", audience="x",
                                           client_id="powerplane-web"))
